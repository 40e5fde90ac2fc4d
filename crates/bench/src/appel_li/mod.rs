//! `pagepilot bench appel-li`: the Appel-Li virtual memory primitives of
//! SawMill's Table 1 (Prot1, Prot100, Unprot100, Trap, Fault, Appel1,
//! Appel2), measured on raw Linux (`mprotect` and a SIGSEGV handler) and on
//! pagepilot's regions (userfaultfd write-protect, faults served by a
//! handler thread or, with `UFFD_FEATURE_SIGBUS`, in the faulting thread),
//! side by side in one run, beside the paper's columns.
//!
//! A run sets up the three sides, then measures each primitive on each side
//! in turn (the side that goes first rotates per primitive and run), every
//! primitive `--reps` times (Appel2: `--reps / 20` rounds of 100 faults);
//! a run's figure is the median of its repetitions, the report gives the
//! median over `--runs` runs and the ratio pagepilot / Linux. Userfaultfd
//! only write-protects: "protect" is read-only on both sides (Appel and Li's
//! Prot increases the protection; read-only suffices for every primitive).

mod linux;
mod paper;
mod prims;
pub(crate) mod report;
mod uffd;

use crate::error::IoContext;
use std::io;

use pagepilot_pager::sys;

use super::measure::{median, Format};
use crate::BenchResult;
use linux::Linux;
use prims::{Primitive, Side};
use uffd::{UffdSigbus, UffdThread};

/// Arguments of `pagepilot bench appel-li`.
#[derive(clap::Args)]
pub struct Args {
    /// Repetitions of each primitive per side and run (Appel2: a twentieth as many rounds of
    /// 100 faults).
    #[arg(long, default_value_t = 5000)]
    reps: usize,
    /// Runs; each run's median is taken, the report gives the median over runs.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Where the uffd-thread side's handler thread runs: on the measuring thread's CPU (a
    /// context switch per fault), on another CPU (a cross-CPU wake-up), or wherever the
    /// scheduler puts it (either, from run to run).
    #[arg(long, value_enum, default_value_t = HandlerCpu::Same)]
    handler_cpu: HandlerCpu,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Placement of the handler thread against the measuring thread.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandlerCpu {
    /// Both kept to the measuring thread's first allowed CPU.
    Same,
    /// The measuring thread on the first allowed CPU, the handler on the second.
    Other,
    /// Neither pinned.
    Any,
}

/// What went wrong in `bench appel-li`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument out of its range.
    #[error("--{name} must be between {lo} and {hi}, got {got}")]
    Range {
        /// The flag.
        name: &'static str,
        /// Smallest allowed.
        lo: usize,
        /// Largest allowed.
        hi: usize,
        /// Given.
        got: usize,
    },
    /// A system call failed.
    #[error("{side}: {call}")]
    Sys {
        /// The side.
        side: &'static str,
        /// The call.
        call: &'static str,
        /// Its error.
        source: io::Error,
    },
    /// No userfaultfd.
    #[error("{side}")]
    Open {
        /// The side.
        side: &'static str,
        /// Why.
        source: pagepilot_pager::sys::OpenError,
    },
    /// The kernel lacks a userfaultfd feature.
    #[error("{side}: userfaultfd features {want:#x} asked, {got:#x} granted")]
    Feature {
        /// The side.
        side: &'static str,
        /// Asked for.
        want: u64,
        /// Granted.
        got: u64,
    },
    /// Faults did not all reach the handler.
    #[error("{side}: {primitive}: {expect} faults expected, the handler served {seen}")]
    Lost {
        /// The side.
        side: &'static str,
        /// The primitive.
        primitive: &'static str,
        /// Faults raised.
        expect: u64,
        /// Faults served.
        seen: u64,
    },
    /// A faulting block outlived the watchdog.
    #[error(
        "{side}: a fault was not served within {:?} (watchdog)",
        uffd::WATCHDOG
    )]
    Watchdog {
        /// The side.
        side: &'static str,
    },
    /// `--handler-cpu other` with one CPU allowed.
    #[error("--handler-cpu other needs two CPUs, this process may use {0}")]
    OneCpu(usize),
    /// The handler thread failed.
    #[error("uffd-thread: the handler thread failed: {0}")]
    Handler(io::Error),
}

/// The sides, in report order.
const SIDES: [&str; 3] = ["linux", "uffd-thread", "uffd-sigbus"];

/// Per primitive, per side, each run's median in µs.
type Runs = [[Vec<f64>; 3]; 7];

fn check(name: &'static str, got: usize, lo: usize, hi: usize) -> Result<(), Error> {
    if got < lo || got > hi {
        return Err(Error::Range { name, lo, hi, got });
    }
    Ok(())
}

/// Measures one group of primitives on one side: (primitive, ns per repetition).
fn measure(group: usize, s: &dyn Side, reps: usize) -> Result<Vec<(Primitive, Vec<u64>)>, Error> {
    Ok(match group {
        0 => vec![(Primitive::Prot1, prims::prot1(s, reps)?)],
        1 => {
            let (p, u) = prims::prot100(s, reps)?;
            vec![(Primitive::Prot100, p), (Primitive::Unprot100, u)]
        }
        2 => {
            let (t, f) = prims::trap_fault(s, reps)?;
            vec![(Primitive::Trap, t), (Primitive::Fault, f)]
        }
        3 => vec![(Primitive::Appel1, prims::appel1(s, reps)?)],
        _ => vec![(Primitive::Appel2, prims::appel2(s, (reps / 20).max(1))?)],
    })
}

fn one_run(run: usize, reps: usize, handler: Option<usize>, acc: &mut Runs) -> Result<(), Error> {
    let linux = Linux::new()?;
    let thread = UffdThread::new(handler)?;
    let sigbus = UffdSigbus::new()?;
    {
        let sides: [&dyn Side; 3] = [&linux, &thread, &sigbus];
        for group in 0..5 {
            for k in 0..3 {
                let si = (k + run + group) % 3;
                for (p, xs) in measure(group, sides[si], reps)? {
                    acc[p as usize][si].push(median(xs) as f64 / 1000.0);
                }
            }
        }
    }
    drop(sigbus);
    drop(linux);
    thread.finish()
}

/// Runs the benchmark.
pub fn run(args: Args) -> BenchResult {
    let r = measure_all(&args)?;
    let mut out = io::stdout().lock();
    crate::emit::emit(&mut out, args.format, &r, |out| r.write_text(out))
        .doing("writing the report")?;
    Ok(())
}

/// Runs the primitives `args` ask for.
pub(crate) fn measure_all(args: &Args) -> Result<report::Report, crate::BenchError> {
    check("reps", args.reps, 1, 1_000_000)?;
    check("runs", args.runs, 1, 1000)?;
    prims::now_ns();
    let err = |call| {
        move |source| Error::Sys {
            side: "uffd-thread",
            call,
            source,
        }
    };
    let saved = sys::affinity().map_err(err("sched_getaffinity"))?;
    let cpus = sys::allowed_cpus(2).map_err(err("sched_getaffinity"))?;
    let handler = match args.handler_cpu {
        HandlerCpu::Any => None,
        // The handler inherits the measuring thread's affinity.
        HandlerCpu::Same => cpus.first().copied().map(|_| usize::MAX),
        HandlerCpu::Other if cpus.len() < 2 => return Err(Error::OneCpu(cpus.len()).into()),
        HandlerCpu::Other => Some(cpus[1]),
    };
    if args.handler_cpu != HandlerCpu::Any {
        sys::pin_to_cpu(cpus[0]).map_err(err("sched_setaffinity"))?;
    }
    let mut acc: Runs = Default::default();
    let measured = (0..args.runs).try_for_each(|run| one_run(run, args.reps, handler, &mut acc));
    let _ = sys::set_affinity(&saved);
    measured?;
    Ok(report::Report::of(
        args.reps,
        args.runs,
        args.handler_cpu,
        acc,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_out_of_range_arguments_name_the_flag() {
        let e = check("reps", 0, 1, 10).unwrap_err();
        assert!(matches!(e, Error::Range { name: "reps", .. }));
        assert!(e.to_string().contains("--reps"));
        assert!(check("runs", 10, 1, 10).is_ok());
    }
}
