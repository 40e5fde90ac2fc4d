//! SEQ written plainly from section 4.1 (linear scans, whole fault lists),
//! and a property test that the policy makes the same sequences and the same
//! replacement choices under random faults, evictions and victim requests.

use proptest::prelude::*;

use super::rig::{params, Rig};
use crate::builtin::seq::{Dir, SeqParams};
use crate::{Page, SPACE_SHIFT};

/// A sequence with every fault it took: `(page, time)`, oldest first, one
/// per page (the tail first, the head last).
#[derive(Clone, Debug)]
struct Run {
    low: u64,
    high: u64,
    dir: Dir,
    faults: Vec<(u64, u64)>,
}

impl Run {
    fn len(&self) -> u64 {
        self.high - self.low + 1
    }
    fn last(&self) -> u64 {
        self.faults.last().map_or(0, |f| f.1)
    }
}

struct Model {
    p: SeqParams,
    runs: Vec<Run>,
}

fn same_space(a: u64, b: u64) -> bool {
    a >> SPACE_SHIFT == b >> SPACE_SHIFT
}

impl Model {
    fn extends(&self, r: &Run, pf: u64) -> Option<Dir> {
        let up = r.high.checked_add(1) == Some(pf) && same_space(r.high, pf);
        let down = r.low.checked_sub(1) == Some(pf) && same_space(r.low, pf);
        match r.dir {
            Dir::Up | Dir::Nil if up => Some(Dir::Up),
            Dir::Down | Dir::Nil if down => Some(Dir::Down),
            _ => None,
        }
    }

    fn fault(&mut self, pf: u64, time: u64) {
        let grow: Vec<usize> = (0..self.runs.len())
            .filter(|&i| self.extends(&self.runs[i], pf).is_some())
            .collect();
        let grow = match grow[..] {
            [a, b] => {
                // The one below pf (extended upward) goes on a tie, as in Table.
                let (below, above) = if self.runs[a].high < pf {
                    (a, b)
                } else {
                    (b, a)
                };
                let older = if self.runs[below].last() <= self.runs[above].last() {
                    below
                } else {
                    above
                };
                let keep = self.runs[below + above - older].low;
                self.runs.remove(older);
                self.runs.iter().position(|r| r.low == keep)
            }
            [a] => Some(a),
            _ => None,
        };
        let inside = self.runs.iter().position(|r| r.low <= pf && pf <= r.high);
        if let Some(g) = grow {
            let low = self.runs[g].low;
            if let Some(i) = inside {
                self.runs.remove(i);
            }
            let g = self.runs.iter().position(|r| r.low == low).unwrap();
            let dir = self.extends(&self.runs[g], pf).unwrap();
            let r = &mut self.runs[g];
            r.dir = dir;
            r.low = r.low.min(pf);
            r.high = r.high.max(pf);
            r.faults.push((pf, time));
            return;
        }
        if let Some(i) = inside {
            let r = &mut self.runs[i];
            let kept: Vec<(u64, u64)> = match r.dir {
                Dir::Up => r.faults.iter().copied().filter(|f| f.0 < pf).collect(),
                Dir::Down => r.faults.iter().copied().filter(|f| f.0 > pf).collect(),
                Dir::Nil => Vec::new(),
            };
            if kept.is_empty() {
                self.runs.remove(i);
            } else {
                r.low = kept.iter().map(|f| f.0).min().unwrap();
                r.high = kept.iter().map(|f| f.0).max().unwrap();
                r.faults = kept;
            }
        }
        self.add(pf, time);
    }

    fn add(&mut self, pf: u64, time: u64) {
        while self.runs.len() >= self.p.x {
            // Oldest shorter than L, else oldest up to 2L, 4L, ...
            let mut bound = self.p.l - 1;
            let victim = loop {
                let oldest = (0..self.runs.len())
                    .filter(|&i| self.runs[i].len() <= bound)
                    .min_by_key(|&i| self.runs[i].last());
                if let Some(i) = oldest {
                    break i;
                }
                bound = if bound < self.p.l {
                    2 * self.p.l
                } else {
                    2 * bound
                };
            };
            self.runs.remove(victim);
        }
        self.runs.push(Run {
            low: pf,
            high: pf,
            dir: Dir::Nil,
            faults: vec![(pf, time)],
        });
    }

    /// The sequence victim: eligible runs by N-th most recent fault, newest
    /// first; in each, the first resident page M or more behind the head.
    fn victim(&self, resident: impl Fn(u64) -> bool) -> Option<u64> {
        let mut eligible: Vec<&Run> = self.runs.iter().filter(|r| r.len() >= self.p.l).collect();
        let nth = |r: &Run| r.faults[r.faults.len() - r.faults.len().min(self.p.n)].1;
        eligible.sort_by_key(|r| std::cmp::Reverse(nth(r)));
        eligible.into_iter().find_map(|r| {
            let behind = r.faults.len().checked_sub(1 + self.p.m as usize)?;
            r.faults[..=behind]
                .iter()
                .rev()
                .map(|f| f.0)
                .find(|&v| resident(v))
        })
    }

    fn seqs(&self) -> Vec<(u64, u64, Dir)> {
        let mut all: Vec<_> = self.runs.iter().map(|r| (r.low, r.high, r.dir)).collect();
        all.sort_unstable();
        all
    }
}

/// Small page numbers mapped onto both sides of an address-space boundary,
/// so that numerically adjacent pages of different spaces are exercised.
fn vpn(i: u64) -> u64 {
    if i < 20 {
        Page::vpn_in(0, (1 << SPACE_SHIFT) - 20 + i)
    } else {
        Page::vpn_in(1, i - 20)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn test_seq_matches_a_plain_model_of_the_paper(
        events in proptest::collection::vec((0u64..40, 0u8..6), 1..300),
        l in 1u64..6,
        m in 0u64..4,
        n in 1usize..4,
        x in 1usize..7,
    ) {
        let p = params(l, m, n, x);
        let mut r = Rig::new(p);
        let mut model = Model { p, runs: Vec::new() };
        for (i, what) in events {
            let v = vpn(i);
            let slot = r.mem.named(v).slot as usize;
            match what {
                0 if r.mem.resident[slot] => r.evict(v),
                1 | 2 => {
                    let index = &r.mem.index;
                    let resident = &r.mem.resident;
                    let expected = model.victim(|v| resident[index[&v] as usize]);
                    let before = r.seq.decisions();
                    let got = r.victim();
                    let after = r.seq.decisions();
                    match expected {
                        Some(e) => {
                            prop_assert_eq!(got, Some(e));
                            prop_assert_eq!(after.from_sequences, before.from_sequences + 1);
                        }
                        None => prop_assert_eq!(after.from_fallback, before.from_fallback + 1),
                    }
                    if let Some(g) = got {
                        r.evict(g);
                    }
                }
                _ if !r.mem.resident[slot] => {
                    r.fault(v);
                    model.fault(v, r.time);
                }
                _ => {}
            }
            prop_assert_eq!(r.seqs(), model.seqs());
            r.seq.table.check();
        }
    }
}
