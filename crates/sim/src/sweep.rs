//! Sweeps of policies over memory sizes: one pass per stack algorithm (LRU,
//! OPT), one run per size for the others, spread over all cores.

use pagepilot_policy::registry::{self, RegistryError, Setup};
use rayon::prelude::*;
use thiserror::Error;

use crate::curve::StackPolicy;
use crate::engine::simulate_reporting;
use crate::report::Row;
use crate::Trace;

/// Errors setting up a sweep.
#[derive(Debug, Error)]
pub enum SweepError {
    /// The trace holds no references.
    #[error("the trace holds no references")]
    EmptyTrace,
    /// No memory sizes were given, or one was zero.
    #[error("memory sizes must be at least one frame (got {0:?})")]
    BadFrames(Vec<usize>),
    /// No policies were given.
    #[error("no policy given")]
    NoPolicy,
    /// A policy spec was not accepted.
    #[error(transparent)]
    Policy(#[from] RegistryError),
}

/// How to run the per-size simulations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallelism {
    /// On every core (rayon's pool).
    AllCores,
    /// One after another on the calling thread.
    Serial,
}

/// Up to `points` memory sizes spread evenly up to the footprint `distinct`.
pub fn auto_frames(distinct: usize, points: usize) -> Vec<usize> {
    let points = points.max(1);
    let mut sizes: Vec<usize> = (1..=points)
        .map(|i| (distinct * i).div_ceil(points).max(1))
        .collect();
    sizes.dedup();
    sizes
}

/// How a sweep spreads its runs over the machine, to tell the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// (policy, size) points.
    pub runs: usize,
    /// Policies.
    pub policies: usize,
    /// Memory sizes.
    pub sizes: usize,
    /// Policies computed as one-pass curves for every size (LRU, OPT).
    pub curves: Vec<String>,
    /// Threads the runs are spread over.
    pub cores: usize,
}

impl Plan {
    /// The plan of [`sweep`] for `specs` at `frames` with `parallelism`.
    pub fn of(specs: &[String], frames: &[usize], parallelism: Parallelism) -> Plan {
        Plan {
            runs: specs.len() * frames.len(),
            policies: specs.len(),
            sizes: frames.len(),
            curves: specs
                .iter()
                .filter(|s| StackPolicy::of_spec(s).is_some())
                .cloned()
                .collect(),
            cores: match parallelism {
                Parallelism::AllCores => rayon::current_num_threads(),
                Parallelism::Serial => 1,
            },
        }
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        write!(
            f,
            "{} ({} x {}) in parallel on {}",
            count(self.runs, "run", "runs"),
            count(self.policies, "policy", "policies"),
            count(self.sizes, "size", "sizes"),
            count(self.cores, "core", "cores"),
        )?;
        if !self.curves.is_empty() && self.sizes > 1 {
            write!(f, "; {}: one pass for every size", self.curves.join(", "))?;
        }
        Ok(())
    }
}

/// One unit of work: a whole stack curve, or one policy at one size.
enum Job<'a> {
    Curve(usize, StackPolicy),
    Single(usize, &'a str, usize),
}

/// Simulates every policy in `specs` with every memory size in `frames`.
/// Rows come policy by policy in the order given, sizes in the order given.
/// `progress` is called with the number of (policy, size) points finished
/// by each completed unit of work.
pub fn sweep(
    trace: &Trace,
    specs: &[String],
    frames: &[usize],
    parallelism: Parallelism,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Row>, SweepError> {
    if trace.is_empty() {
        return Err(SweepError::EmptyTrace);
    }
    if frames.is_empty() || frames.contains(&0) {
        return Err(SweepError::BadFrames(frames.to_vec()));
    }
    if specs.is_empty() {
        return Err(SweepError::NoPolicy);
    }
    // Check every spec before running anything.
    for spec in specs {
        registry::build(spec, &setup(trace, frames[0]))?;
    }
    let mut jobs = Vec::new();
    for (p, spec) in specs.iter().enumerate() {
        match StackPolicy::of_spec(spec) {
            Some(stack) => jobs.push(Job::Curve(p, stack)),
            None => jobs.extend((0..frames.len()).map(|f| Job::Single(p, spec, f))),
        }
    }
    let run = |job: &Job| -> Result<Vec<(usize, usize, Row)>, SweepError> {
        let rows = match *job {
            Job::Curve(p, stack) => {
                let most = frames.iter().copied().max().unwrap_or(1);
                let curve = stack.curve_upto(&trace.refs, trace.distinct(), most);
                frames
                    .iter()
                    .enumerate()
                    .map(|(f, &n)| {
                        let pt = curve.point(n);
                        // LRU and OPT never clear referenced bits: no minor faults.
                        let row =
                            Row::new(&specs[p], n, pt.references, pt.faults, pt.cold_faults, 0);
                        (p, f, row)
                    })
                    .collect()
            }
            Job::Single(p, spec, f) => {
                let policy = registry::build(spec, &setup(trace, frames[f]))?;
                let (c, incidents) = simulate_reporting(trace, policy, frames[f]);
                let mut row = Row::new(
                    spec,
                    frames[f],
                    c.references,
                    c.faults,
                    c.cold_faults,
                    c.minor_faults,
                );
                row.incidents = incidents;
                vec![(p, f, row)]
            }
        };
        progress(rows.len() as u64);
        Ok(rows)
    };
    let done: Vec<_> = match parallelism {
        Parallelism::AllCores => jobs.par_iter().map(run).collect::<Result<_, _>>()?,
        Parallelism::Serial => jobs.iter().map(run).collect::<Result<_, _>>()?,
    };
    let mut rows: Vec<_> = done.into_iter().flatten().collect();
    rows.sort_by_key(|&(p, f, _)| (p, f));
    Ok(rows.into_iter().map(|(_, _, r)| r).collect())
}

fn setup(trace: &Trace, frames: usize) -> Setup<'_> {
    Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate;

    fn mixed_trace() -> Trace {
        let mut x = 7u64;
        let pages = (0..3000u64).map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            if i % 500 < 250 {
                i % 97
            } else {
                (x >> 40) % 120
            }
        });
        Trace::from_pages(pages)
    }

    fn specs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_parallel_sweep_equals_serial_sweep() {
        let trace = mixed_trace();
        let names = specs(&["fifo", "clock", "lru", "mru", "opt", "mru-live"]);
        let frames = auto_frames(trace.distinct(), 20);
        let par = sweep(&trace, &names, &frames, Parallelism::AllCores, &|_| {}).unwrap();
        let ser = sweep(&trace, &names, &frames, Parallelism::Serial, &|_| {}).unwrap();
        assert_eq!(par, ser);
        assert_eq!(par.len(), names.len() * frames.len());
        assert_eq!(par[0].policy, "fifo");
        assert_eq!(par[0].frames, frames[0]);
    }

    #[test]
    fn test_sweep_rows_equal_single_runs_and_progress_counts_every_point() {
        let trace = mixed_trace();
        let names = specs(&["lru", "clock", "opt"]);
        // The second set stays below the footprint: OPT keeps a partial stack.
        for frames in [&[5, 40, 97, 200][..], &[3, 17, 60]] {
            let count = std::sync::atomic::AtomicU64::new(0);
            let rows = sweep(&trace, &names, frames, Parallelism::AllCores, &|n| {
                count.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            })
            .unwrap();
            assert_eq!(count.into_inner(), 3 * frames.len() as u64);
            for row in rows {
                let built = registry::build(&row.policy, &setup(&trace, row.frames)).unwrap();
                let c = simulate(&trace, built, row.frames);
                assert_eq!((row.faults, row.cold_faults), (c.faults, c.cold_faults));
                assert_eq!(row.minor_faults, c.minor_faults);
            }
        }
    }

    #[test]
    fn test_sweep_refuses_empty_trace_zero_frames_and_unknown_policy() {
        let trace = mixed_trace();
        let empty = Trace::new();
        let lru = specs(&["lru"]);
        let none = &|_| {};
        assert!(matches!(
            sweep(&empty, &lru, &[4], Parallelism::Serial, none),
            Err(SweepError::EmptyTrace)
        ));
        assert!(matches!(
            sweep(&trace, &lru, &[0, 4], Parallelism::Serial, none),
            Err(SweepError::BadFrames(_))
        ));
        let err = sweep(
            &trace,
            &specs(&["lru", "nope"]),
            &[4],
            Parallelism::Serial,
            none,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("nope") && err.contains("fifo"), "{err}");
    }

    #[test]
    fn test_plan_says_how_many_runs_go_on_how_many_cores() {
        let plan = Plan::of(
            &specs(&["lru", "fifo", "seq:L=5"]),
            &[4, 8],
            Parallelism::AllCores,
        );
        assert_eq!(plan.runs, 6);
        assert_eq!(plan.cores, rayon::current_num_threads());
        let text = Plan::of(&specs(&["fifo"]), &[4], Parallelism::Serial).to_string();
        assert_eq!(text, "1 run (1 policy x 1 size) in parallel on 1 core");
        let text = plan.to_string();
        assert!(text.starts_with("6 runs (3 policies x 2 sizes)"), "{text}");
        assert!(text.ends_with("; lru: one pass for every size"), "{text}");
    }

    #[test]
    fn test_auto_frames_spread_evenly_up_to_the_footprint() {
        assert_eq!(auto_frames(100, 20).len(), 20);
        assert_eq!(auto_frames(100, 20)[0], 5);
        assert_eq!(*auto_frames(100, 20).last().unwrap(), 100);
        assert_eq!(auto_frames(3, 20), vec![1, 2, 3]);
    }
}
