//! Synthetic page-reference traces of the three behaviour classes the SEQ
//! paper finds in its space-time graphs (its section 2):
//!
//! 1. [`Behaviour::Sweep`]: one large region swept repeatedly in one
//!    direction (like `es` and `gnuplot`);
//! 2. [`Behaviour::UpDown`]: several regions swept up, then down, touching
//!    a run of consecutive pages and then skipping a few (like `applu`);
//! 3. [`Behaviour::Scattered`]: no visible pattern, as in a hash table:
//!    skewed random references (Zipf over pages scattered in the region).
//!
//! Generation is deterministic: the same [`Workload`] (seed included)
//! always gives the same trace.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use thiserror::Error;

use crate::Trace;

/// Upper bound on the references one workload may generate, so a spec
/// cannot ask for more memory than a machine has.
pub const MAX_REFERENCES: u64 = 1 << 30;

/// A reference pattern, with its sizes in pages.
#[derive(Clone, Debug, PartialEq)]
pub enum Behaviour {
    /// Class (i): pages `0..pages` referenced in increasing order, `sweeps`
    /// times over.
    Sweep {
        /// Pages in the region.
        pages: u64,
        /// Times the region is swept.
        sweeps: u32,
    },
    /// Class (ii): `regions` regions of `region_pages` pages, separated by
    /// `gap_pages` unused pages. Each pass sweeps every region, upward on
    /// even passes and downward on odd ones, touching a run of consecutive
    /// pages (length drawn from `run`) and then skipping a few (drawn from
    /// `skip`).
    UpDown {
        /// Number of regions.
        regions: u32,
        /// Pages per region.
        region_pages: u64,
        /// Unused pages between regions (holes in the address space).
        gap_pages: u64,
        /// Inclusive range of run lengths, in pages (at least 1).
        run: (u64, u64),
        /// Inclusive range of pages skipped after each run.
        skip: (u64, u64),
        /// Number of passes over all regions.
        passes: u32,
    },
    /// Class (iii): `references` references to `pages` pages, the page of
    /// popularity rank k drawn with probability proportional to
    /// 1/(k+1)^`exponent`, ranks assigned to pages at random.
    Scattered {
        /// Pages in the region.
        pages: u64,
        /// References to generate.
        references: u64,
        /// Zipf exponent; 0 is uniform.
        exponent: f64,
    },
}

/// A named behaviour placed in the address space, with its seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// A short name for tables and plots.
    pub name: String,
    /// What it does.
    pub behaviour: Behaviour,
    /// Virtual page number of its first page.
    pub base: u64,
    /// Seed of the random choices (runs, skips, scattered pages).
    pub seed: u64,
}

/// A workload spec that cannot be generated.
#[derive(Debug, Error, PartialEq)]
pub enum SyntheticError {
    /// A size was zero or a range empty.
    #[error("workload `{workload}`: {what}")]
    BadSize {
        /// The workload's name.
        workload: String,
        /// What was wrong.
        what: String,
    },
    /// The workload would exceed [`MAX_REFERENCES`] references.
    #[error("workload `{workload}`: {references} references exceed the limit of {MAX_REFERENCES}")]
    TooLarge {
        /// The workload's name.
        workload: String,
        /// The references it asked for (an upper bound).
        references: u64,
    },
}

/// The default mix: one workload of each class, about 100 thousand
/// references each, with footprints of 2000 to 3000 pages.
pub fn default_mix(seed: u64) -> Vec<Workload> {
    vec![
        Workload {
            name: "sweep".into(),
            behaviour: Behaviour::Sweep {
                pages: 2000,
                sweeps: 50,
            },
            base: 0x1_0000,
            seed,
        },
        Workload {
            name: "up-down".into(),
            behaviour: Behaviour::UpDown {
                regions: 4,
                region_pages: 600,
                gap_pages: 400,
                run: (30, 50),
                skip: (1, 4),
                passes: 44,
            },
            base: 0x2_0000,
            seed: seed.wrapping_add(1),
        },
        Workload {
            name: "scattered".into(),
            behaviour: Behaviour::Scattered {
                pages: 3000,
                references: 100_000,
                exponent: 0.8,
            },
            base: 0x3_0000,
            seed: seed.wrapping_add(2),
        },
    ]
}

impl Workload {
    /// Generates the trace.
    pub fn generate(&self) -> Result<Trace, SyntheticError> {
        self.check()?;
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut trace = Trace::new();
        let base = self.base;
        match self.behaviour {
            Behaviour::Sweep { pages, sweeps } => {
                for _ in 0..sweeps {
                    (0..pages).for_each(|p| trace.push(base + p, false));
                }
            }
            Behaviour::UpDown {
                regions,
                region_pages,
                gap_pages,
                run,
                skip,
                passes,
            } => {
                for pass in 0..passes {
                    for r in 0..u64::from(regions) {
                        let start = base + r * (region_pages + gap_pages);
                        for offset in runs(&mut rng, region_pages, run, skip) {
                            let offset = if pass % 2 == 0 {
                                offset
                            } else {
                                region_pages - 1 - offset
                            };
                            trace.push(start + offset, false);
                        }
                    }
                }
            }
            Behaviour::Scattered {
                pages,
                references,
                exponent,
            } => {
                let mut by_rank: Vec<u64> = (0..pages).collect();
                by_rank.shuffle(&mut rng);
                let cumulative: Vec<f64> = (0..pages)
                    .scan(0.0, |sum, k| {
                        *sum += ((k + 1) as f64).powf(-exponent);
                        Some(*sum)
                    })
                    .collect();
                let total = cumulative[cumulative.len() - 1];
                for _ in 0..references {
                    let u = rng.gen::<f64>() * total;
                    let k = cumulative
                        .partition_point(|&c| c <= u)
                        .min(by_rank.len() - 1);
                    trace.push(base + by_rank[k], false);
                }
            }
        }
        Ok(trace)
    }

    /// An upper bound on the references [`generate`](Self::generate) makes.
    pub fn max_references(&self) -> u64 {
        match self.behaviour {
            Behaviour::Sweep { pages, sweeps } => pages.saturating_mul(u64::from(sweeps)),
            Behaviour::UpDown {
                regions,
                region_pages,
                passes,
                ..
            } => region_pages
                .saturating_mul(u64::from(regions))
                .saturating_mul(u64::from(passes)),
            Behaviour::Scattered { references, .. } => references,
        }
    }

    fn check(&self) -> Result<(), SyntheticError> {
        let bad = |what: &str| {
            Err(SyntheticError::BadSize {
                workload: self.name.clone(),
                what: what.into(),
            })
        };
        let span = match self.behaviour {
            Behaviour::Sweep { pages, sweeps } => {
                if pages == 0 || sweeps == 0 {
                    return bad("a sweep needs pages and sweeps above zero");
                }
                pages
            }
            Behaviour::UpDown {
                regions,
                region_pages,
                gap_pages,
                run,
                skip,
                passes,
            } => {
                if regions == 0 || region_pages == 0 || passes == 0 {
                    return bad("up-down needs regions, region_pages and passes above zero");
                }
                if run.0 == 0 || run.0 > run.1 || skip.0 > skip.1 {
                    return bad("up-down needs 1 <= run.0 <= run.1 and skip.0 <= skip.1");
                }
                region_pages
                    .checked_add(gap_pages)
                    .and_then(|r| r.checked_mul(u64::from(regions)))
                    .unwrap_or(u64::MAX)
            }
            Behaviour::Scattered {
                pages,
                references,
                exponent,
            } => {
                if pages == 0 || references == 0 {
                    return bad("scattered needs pages and references above zero");
                }
                if !(exponent.is_finite() && exponent >= 0.0) {
                    return bad("scattered needs a finite exponent >= 0");
                }
                if pages > MAX_REFERENCES {
                    return bad("scattered has more pages than the reference limit");
                }
                pages
            }
        };
        if self.base.checked_add(span).is_none() {
            return bad("the region runs past the end of the address space");
        }
        let references = self.max_references();
        if references > MAX_REFERENCES {
            return Err(SyntheticError::TooLarge {
                workload: self.name.clone(),
                references,
            });
        }
        Ok(())
    }
}

/// Offsets `0..pages` in increasing order, in runs of consecutive pages
/// separated by skips.
fn runs(
    rng: &mut StdRng,
    pages: u64,
    run: (u64, u64),
    skip: (u64, u64),
) -> impl Iterator<Item = u64> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at < pages {
        let len = rng.gen_range(run.0..=run.1);
        let end = (at + len).min(pages);
        offsets.extend(at..end);
        at = end.saturating_add(rng.gen_range(skip.0..=skip.1));
    }
    offsets.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vpns(t: &Trace) -> Vec<u64> {
        t.refs.iter().map(|&s| t.pages[s as usize]).collect()
    }

    /// Longest stretch of references each one page above or below the
    /// previous, in the same direction.
    fn longest_run(v: &[u64]) -> usize {
        let (mut best, mut len, mut dir) = (1, 1, 0i8);
        for w in v.windows(2) {
            let d = if w[1] == w[0] + 1 {
                1
            } else if w[0] == w[1] + 1 {
                -1
            } else {
                0
            };
            len = if d != 0 && d == dir {
                len + 1
            } else if d != 0 {
                2
            } else {
                1
            };
            dir = d;
            best = best.max(len);
        }
        best
    }

    fn mix() -> Vec<Workload> {
        default_mix(7)
    }

    #[test]
    fn test_same_seed_gives_same_trace_and_other_seed_differs() {
        for w in mix() {
            let a = vpns(&w.generate().unwrap());
            let b = vpns(&w.generate().unwrap());
            assert!(a == b, "{}: same seed, different traces", w.name);
            if !matches!(w.behaviour, Behaviour::Sweep { .. }) {
                let other = Workload {
                    seed: w.seed ^ 0x5eed,
                    ..w.clone()
                };
                let c = vpns(&other.generate().unwrap());
                assert!(a != c, "{}: other seed, same trace", w.name);
            }
        }
    }

    #[test]
    fn test_sweep_is_periodic_with_the_region_size() {
        let w = &mix()[0];
        let Behaviour::Sweep { pages, sweeps } = w.behaviour else {
            panic!("first workload of the mix is the sweep")
        };
        let t = w.generate().unwrap();
        let v = vpns(&t);
        assert_eq!(v.len() as u64, pages * u64::from(sweeps));
        assert_eq!(t.distinct() as u64, pages);
        let p = pages as usize;
        assert!((0..v.len() - p).all(|i| v[i] == v[i + p]));
        assert!(v[..p].windows(2).all(|w| w[1] == w[0] + 1));
    }

    #[test]
    fn test_up_down_alternates_direction_in_runs_with_skips() {
        let w = &mix()[1];
        let Behaviour::UpDown {
            regions,
            region_pages,
            gap_pages,
            run,
            ..
        } = w.behaviour
        else {
            panic!("second workload of the mix is up-down")
        };
        let v = vpns(&w.generate().unwrap());
        // Every page lies inside a region, never in a gap.
        let stride = region_pages + gap_pages;
        assert!(v.iter().all(|&p| (p - w.base) % stride < region_pages));
        assert!(v
            .iter()
            .all(|&p| (p - w.base) / stride < u64::from(regions)));
        // Long runs of consecutive pages, but never a whole region: skips.
        let longest = longest_run(&v);
        assert!(longest as u64 >= run.0, "longest run {longest}");
        assert!((longest as u64) < region_pages, "longest run {longest}");
        // The first pass goes up, the second down.
        let first_region = |p: &&u64| (**p - w.base) / stride == 0;
        let pass_len = v
            .iter()
            .take_while(|p| (**p - w.base) / stride != 1)
            .count();
        let up: Vec<u64> = v[..pass_len].to_vec();
        assert!(up.windows(2).all(|w| w[1] > w[0]));
        let rest = &v[pass_len..];
        let second: Vec<u64> = rest
            .iter()
            .skip_while(|p| (**p - w.base) / stride != 0)
            .take_while(first_region)
            .copied()
            .collect();
        assert!(second.len() > 1 && second.windows(2).all(|w| w[1] < w[0]));
    }

    #[test]
    fn test_scattered_has_no_long_runs_and_is_skewed() {
        let w = &mix()[2];
        let Behaviour::Scattered {
            pages, references, ..
        } = w.behaviour
        else {
            panic!("third workload of the mix is scattered")
        };
        let t = w.generate().unwrap();
        let v = vpns(&t);
        assert_eq!(v.len() as u64, references);
        assert!(v.iter().all(|&p| p >= w.base && p < w.base + pages));
        assert!(longest_run(&v) < 6, "longest run {}", longest_run(&v));
        // Skewed: the most popular tenth of the pages takes well over a tenth
        // of the references.
        let mut counts = vec![0u64; t.distinct()];
        t.refs.iter().for_each(|&s| counts[s as usize] += 1);
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = counts[..(pages / 10) as usize].iter().sum();
        assert!(top * 10 > references * 3, "top tenth took {top}");
    }

    #[test]
    fn test_default_mix_is_a_few_hundred_thousand_references() {
        let total: usize = mix().iter().map(|w| w.generate().unwrap().len()).sum();
        assert!((200_000..600_000).contains(&total), "{total}");
    }

    #[test]
    fn test_bad_sizes_are_refused_by_name() {
        let mut w = mix()[1].clone();
        w.behaviour = Behaviour::UpDown {
            regions: 2,
            region_pages: 10,
            gap_pages: 0,
            run: (0, 3),
            skip: (0, 0),
            passes: 1,
        };
        assert!(
            matches!(w.generate(), Err(SyntheticError::BadSize { workload, .. }) if workload == "up-down")
        );
        w.behaviour = Behaviour::Sweep {
            pages: 1 << 20,
            sweeps: 1 << 20,
        };
        assert!(matches!(w.generate(), Err(SyntheticError::TooLarge { .. })));
        w.behaviour = Behaviour::Scattered {
            pages: 10,
            references: 10,
            exponent: f64::NAN,
        };
        assert!(matches!(w.generate(), Err(SyntheticError::BadSize { .. })));
    }
}
