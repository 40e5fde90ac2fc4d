//! Multiprogrammed simulation with one global policy (the SEQ paper,
//! section 5): several traces run round-robin by a quantum, a missing fault
//! blocks its process for a service time while another ready process runs,
//! and one replacement policy chooses among the pages of all of them.
//!
//! Time counts references: each reference takes one unit. When no process
//! is ready the clock jumps to the earliest wake-up (idle time). Process `p`'s
//! page `v` is the global page `Page::vpn_in(p, v)`, so sequences never span
//! processes. Every missing fault, first touches included, blocks.

use std::collections::VecDeque;

use pagepilot_policy::registry::{self, RegistryError, Setup, Spec};
use pagepilot_policy::Page;
use rayon::prelude::*;
use thiserror::Error;

use crate::report::Row;
use crate::{Access, Machine, Trace};

/// Errors setting up a multiprogrammed run.
#[derive(Debug, Error)]
pub enum GlobalError {
    /// No traces were given.
    #[error("global mode needs at least one trace")]
    NoTraces,
    /// More processes than the page-number encoding holds.
    #[error("global mode runs at most 65536 processes, got {0}")]
    TooManyProcesses(usize),
    /// A process's trace holds no references.
    #[error("process {0}: the trace holds no references")]
    EmptyTrace(usize),
    /// A page number does not fit below the process bits.
    #[error("process {0}: page numbers must fit in 48 bits to share one address space")]
    PageTooLarge(usize),
    /// The quantum is zero.
    #[error("the quantum must be at least one reference")]
    ZeroQuantum,
    /// No memory sizes were given, or one was zero.
    #[error("memory sizes must be at least one frame (got {0:?})")]
    BadFrames(Vec<usize>),
    /// The policy needs the future, which a fault-driven schedule does not have.
    #[error(
        "policy `{0}` is not defined in global mode: the interleaving depends on the faults, \
         so there is no fixed future to look at"
    )]
    NeedsFuture(String),
    /// A policy spec was not accepted.
    #[error(transparent)]
    Policy(#[from] RegistryError),
}

/// The scheduler's parameters, in reference times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// References a process runs before the next ready one takes over.
    pub quantum: u64,
    /// Time a missing fault blocks its process.
    pub service: u64,
}

/// What one process, or the whole run, did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// References executed.
    pub references: u64,
    /// Missing faults, first touches included.
    pub faults: u64,
    /// First-touch faults.
    pub cold_faults: u64,
    /// Minor faults from reference-bit emulation.
    pub minor_faults: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.references += other.references;
        self.faults += other.faults;
        self.cold_faults += other.cold_faults;
        self.minor_faults += other.minor_faults;
    }
}

/// One multiprogrammed run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Per process, in the order given.
    pub processes: Vec<Tally>,
    /// The whole run.
    pub all: Tally,
    /// Time from start to the last reference, idle time included.
    pub elapsed: u64,
    /// Time no process was ready.
    pub idle: u64,
}

/// A stretch of one process on the CPU (for tests and inspection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// The process.
    pub process: usize,
    /// When it started.
    pub at: u64,
    /// References it ran.
    pub references: u64,
}

/// The processes' pages in one page table: process `p`'s slot `s` is global
/// slot `offset[p] + s`.
struct Universe {
    pages: Trace,
    offset: Vec<u32>,
}

impl Universe {
    fn new(traces: &[Trace]) -> Result<Universe, GlobalError> {
        if traces.is_empty() {
            return Err(GlobalError::NoTraces);
        }
        if traces.len() > 1 << 16 {
            return Err(GlobalError::TooManyProcesses(traces.len()));
        }
        let mut pages = Trace::new();
        let mut offset = Vec::with_capacity(traces.len());
        for (p, t) in traces.iter().enumerate() {
            if t.is_empty() {
                return Err(GlobalError::EmptyTrace(p));
            }
            offset.push(pages.distinct() as u32);
            for &v in &t.pages {
                if v >> pagepilot_policy::SPACE_SHIFT != 0 {
                    return Err(GlobalError::PageTooLarge(p));
                }
                pages.push(Page::vpn_in(p as u16, v), false);
            }
        }
        Ok(Universe { pages, offset })
    }
}

fn check_spec(spec: &str) -> Result<(), GlobalError> {
    if Spec::parse(spec)?.name == "opt" {
        return Err(GlobalError::NeedsFuture(spec.to_string()));
    }
    Ok(())
}

/// Runs `traces` as processes under one global policy `spec` with `frames`
/// frames.
pub fn run(
    traces: &[Trace],
    spec: &str,
    frames: usize,
    schedule: Schedule,
) -> Result<Run, GlobalError> {
    let universe = Universe::new(traces)?;
    run_in(&universe, traces, spec, frames, schedule, None)
}

/// Like [`run`], also recording every dispatch.
pub fn run_logged(
    traces: &[Trace],
    spec: &str,
    frames: usize,
    schedule: Schedule,
) -> Result<(Run, Vec<Dispatch>), GlobalError> {
    let universe = Universe::new(traces)?;
    let mut log = Vec::new();
    let run = run_in(&universe, traces, spec, frames, schedule, Some(&mut log))?;
    Ok((run, log))
}

fn run_in(
    universe: &Universe,
    traces: &[Trace],
    spec: &str,
    frames: usize,
    schedule: Schedule,
    mut log: Option<&mut Vec<Dispatch>>,
) -> Result<Run, GlobalError> {
    check_spec(spec)?;
    if schedule.quantum == 0 {
        return Err(GlobalError::ZeroQuantum);
    }
    if frames == 0 {
        return Err(GlobalError::BadFrames(vec![frames]));
    }
    let setup = Setup {
        slots: universe.pages.distinct(),
        frames,
        future: None,
    };
    let policy = registry::build(spec, &setup).map_err(|e| match e {
        RegistryError::NeedsFuture(_) => GlobalError::NeedsFuture(spec.to_string()),
        e => GlobalError::Policy(e),
    })?;
    let mut machine = Machine::new(&universe.pages, policy, frames, 0);
    let k = traces.len();
    let mut tally = vec![Tally::default(); k];
    let mut next = vec![0usize; k];
    let mut ready_at = vec![0u64; k];
    let mut queue: VecDeque<usize> = (0..k).collect();
    let (mut now, mut idle, mut index) = (0u64, 0u64, 0u64);
    while !queue.is_empty() {
        let pick = match queue.iter().position(|&p| ready_at[p] <= now) {
            Some(i) => i,
            None => {
                let wake = queue.iter().map(|&p| ready_at[p]).min().unwrap_or(now);
                idle += wake - now;
                now = wake;
                queue.iter().position(|&p| ready_at[p] <= now).unwrap_or(0)
            }
        };
        let p = queue.remove(pick).unwrap_or(0);
        let (trace, t) = (&traces[p], &mut tally[p]);
        let writes = trace.has_writes();
        let start = now;
        let mut ran = 0;
        while ran < schedule.quantum && next[p] < trace.len() {
            let i = next[p];
            let slot = universe.offset[p] + trace.refs[i];
            let access = machine.access(slot, writes && trace.is_write(i), index);
            next[p] += 1;
            index += 1;
            now += 1;
            ran += 1;
            t.references += 1;
            match access {
                Access::Hit => {}
                Access::Minor => t.minor_faults += 1,
                Access::Missing { cold, .. } => {
                    t.faults += 1;
                    t.cold_faults += u64::from(cold);
                    ready_at[p] = now + schedule.service;
                    break;
                }
            }
        }
        if let Some(log) = log.as_deref_mut() {
            log.push(Dispatch {
                process: p,
                at: start,
                references: ran,
            });
        }
        if next[p] < trace.len() {
            queue.push_back(p);
        }
    }
    let mut all = Tally::default();
    for t in &tally {
        all.add(t);
    }
    Ok(Run {
        processes: tally,
        all,
        elapsed: now,
        idle,
    })
}

/// Runs every policy with every memory size (in parallel) and reports one
/// row for the whole run and one per process, labelled by `names`.
pub fn sweep(
    traces: &[Trace],
    names: &[String],
    specs: &[String],
    frames: &[usize],
    schedule: Schedule,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Row>, GlobalError> {
    let universe = Universe::new(traces)?;
    if frames.is_empty() || frames.contains(&0) {
        return Err(GlobalError::BadFrames(frames.to_vec()));
    }
    for spec in specs {
        check_spec(spec)?;
        let setup = Setup {
            slots: universe.pages.distinct(),
            frames: frames[0],
            future: None,
        };
        registry::build(spec, &setup).map_err(|e| match e {
            RegistryError::NeedsFuture(_) => GlobalError::NeedsFuture(spec.clone()),
            e => GlobalError::Policy(e),
        })?;
    }
    let jobs: Vec<(&String, usize)> = specs
        .iter()
        .flat_map(|s| frames.iter().map(move |&f| (s, f)))
        .collect();
    let runs = jobs
        .par_iter()
        .map(|&(spec, f)| {
            let r = run_in(&universe, traces, spec, f, schedule, None);
            progress(1);
            r
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    for (&(spec, f), run) in jobs.iter().zip(&runs) {
        let row = |label: &str, t: &Tally| {
            let mut r = Row::new(
                spec,
                f,
                t.references,
                t.faults,
                t.cold_faults,
                t.minor_faults,
            );
            r.process = Some(label.to_string());
            r
        };
        let mut all = row("all", &run.all);
        all.elapsed = Some(run.elapsed);
        rows.push(all);
        for (p, t) in run.processes.iter().enumerate() {
            let label = names.get(p).cloned().unwrap_or_else(|| p.to_string());
            rows.push(row(&label, t));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(process: usize, at: u64, references: u64) -> Dispatch {
        Dispatch {
            process,
            at,
            references,
        }
    }

    #[test]
    fn test_faults_block_for_the_service_time_and_the_clock_jumps_when_all_wait() {
        // A: a0 a1 a0 a1, B: b0 b0, memory for everything, quantum 2,
        // service 3. A faults at 0 (ready at 4), B faults at 1 (ready at 5),
        // idle 2..4, A faults at 4 (ready at 8), B hits at 5 and ends, idle
        // 6..8, A hits twice.
        let a = Trace::from_pages([0, 1, 0, 1]);
        let b = Trace::from_pages([0, 0]);
        let sched = Schedule {
            quantum: 2,
            service: 3,
        };
        let (run, log) = run_logged(&[a, b], "lru", 4, sched).unwrap();
        assert_eq!(
            log,
            vec![d(0, 0, 1), d(1, 1, 1), d(0, 4, 1), d(1, 5, 1), d(0, 8, 2)]
        );
        assert_eq!((run.elapsed, run.idle), (10, 4));
        assert_eq!((run.processes[0].faults, run.processes[1].faults), (2, 1));
        assert_eq!(run.all.references, 6);
        assert_eq!(run.all.cold_faults, 3);
    }

    #[test]
    fn test_processes_take_turns_by_the_quantum() {
        let a = Trace::from_pages([0; 5]);
        let b = Trace::from_pages([0; 5]);
        let sched = Schedule {
            quantum: 2,
            service: 0,
        };
        let (run, log) = run_logged(&[a, b], "fifo", 10, sched).unwrap();
        assert_eq!(
            log,
            vec![
                d(0, 0, 1),
                d(1, 1, 1),
                d(0, 2, 2),
                d(1, 4, 2),
                d(0, 6, 2),
                d(1, 8, 2)
            ]
        );
        assert_eq!((run.elapsed, run.idle), (10, 0));
    }

    #[test]
    fn test_same_page_number_in_two_processes_is_two_pages_competing_for_frames() {
        // One frame, quantum 1: every turn evicts the other process's page.
        let a = Trace::from_pages([5, 5]);
        let b = Trace::from_pages([5, 5]);
        let sched = Schedule {
            quantum: 1,
            service: 0,
        };
        let run = run(&[a, b], "lru", 1, sched).unwrap();
        assert_eq!((run.all.faults, run.all.cold_faults), (4, 2));
    }

    #[test]
    fn test_one_process_alone_faults_as_in_a_single_run() {
        let mut x = 99u64;
        let trace = Trace::from_pages((0..2000).map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            if i % 300 < 100 {
                i % 60
            } else {
                (x >> 40) % 80
            }
        }));
        let sched = Schedule {
            quantum: 7,
            service: 5,
        };
        for spec in ["lru", "fifo", "clock", "mru"] {
            for frames in [3, 20, 50] {
                let r = run(std::slice::from_ref(&trace), spec, frames, sched).unwrap();
                let setup = Setup {
                    slots: trace.distinct(),
                    frames,
                    future: None,
                };
                let single =
                    crate::simulate(&trace, registry::build(spec, &setup).unwrap(), frames);
                assert_eq!(r.all.faults, single.faults, "{spec} {frames}");
                assert_eq!(r.all.minor_faults, single.minor_faults, "{spec} {frames}");
            }
        }
    }

    #[test]
    fn test_global_seq_beats_global_lru_on_two_sweeping_processes() {
        // Two processes each sweep their own 100 pages ten times; 150 frames
        // hold neither both loops nor let LRU keep anything: global LRU
        // faults on every reference, global SEQ detects each process's
        // sequence and replaces behind it.
        let a = Trace::from_pages((0..10).flat_map(|_| 0..100u64));
        let b = Trace::from_pages((0..10).flat_map(|_| 1000..1100u64));
        let sched = Schedule {
            quantum: 50,
            service: 20,
        };
        let traces = [a, b];
        let lru = run(&traces, "lru", 150, sched).unwrap();
        let seq = run(&traces, "seq", 150, sched).unwrap();
        assert_eq!(lru.all.faults, 2000);
        assert!(seq.all.faults * 2 < lru.all.faults, "{seq:?}");
        // Fewer faults, fewer waits: the mix finishes sooner.
        assert!(seq.elapsed < lru.elapsed);
    }

    #[test]
    fn test_global_mode_rejects_opt_and_bad_setups_with_clear_errors() {
        let t = || vec![Trace::from_pages([1, 2]), Trace::from_pages([3])];
        let sched = Schedule {
            quantum: 4,
            service: 2,
        };
        let err = run(&t(), "opt", 2, sched).unwrap_err();
        assert!(matches!(err, GlobalError::NeedsFuture(_)));
        assert!(err.to_string().contains("global mode"), "{err}");
        let names = vec!["a".to_string(), "b".to_string()];
        let err = sweep(
            &t(),
            &names,
            &["lru".into(), "opt".into()],
            &[2],
            sched,
            &|_| {},
        );
        assert!(matches!(err, Err(GlobalError::NeedsFuture(_))));
        assert!(matches!(
            run(&[Trace::from_pages([1]), Trace::new()], "lru", 2, sched),
            Err(GlobalError::EmptyTrace(1))
        ));
        let zero = Schedule {
            quantum: 0,
            service: 2,
        };
        assert!(matches!(
            run(&t(), "lru", 2, zero),
            Err(GlobalError::ZeroQuantum)
        ));
        assert!(run(&t(), "nope", 2, sched)
            .unwrap_err()
            .to_string()
            .contains("clock"));
        assert!(matches!(
            run(&[Trace::from_pages([1 << 50])], "lru", 2, sched),
            Err(GlobalError::PageTooLarge(0))
        ));
    }

    #[test]
    fn test_global_sweep_reports_the_whole_run_and_each_process() {
        let traces = vec![
            Trace::from_pages(0..50),
            Trace::from_pages((0..20).cycle().take(100)),
        ];
        let names = vec!["scan".to_string(), "loop".to_string()];
        let sched = Schedule {
            quantum: 10,
            service: 30,
        };
        let specs = vec!["lru".to_string(), "clock".to_string()];
        let rows = sweep(&traces, &names, &specs, &[8, 64], sched, &|_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 2 * 3);
        assert_eq!(rows[0].process.as_deref(), Some("all"));
        assert_eq!(rows[1].process.as_deref(), Some("scan"));
        assert_eq!(rows[0].references, 150);
        assert_eq!(rows[0].faults, rows[1].faults + rows[2].faults);
        // With memory for everything only first touches fault.
        assert_eq!(rows[3].faults, 70);
        assert!(rows[0].elapsed.unwrap() >= 150);
    }
}
