//! The report of `bench appel-li`: per primitive, each side's median over
//! runs in µs, the ratios pagepilot / Linux, the paper's columns.

use std::io::{self, Write};

use serde::Serialize;

use super::paper::{paper, PaperRow};
use super::prims::Primitive;
use super::{HandlerCpu, Runs, SIDES};
use crate::measure::{median, ratio};

/// One primitive.
#[derive(Serialize)]
pub struct Row {
    /// Its name (`prot1` is the paper's Prot).
    pub primitive: &'static str,
    /// Raw Linux (`mprotect`, SIGSEGV handler), µs.
    pub linux_us: f64,
    /// Userfaultfd write-protect, handler thread, µs.
    pub uffd_thread_us: f64,
    /// Userfaultfd write-protect, SIGBUS in the faulting thread, µs.
    pub uffd_sigbus_us: f64,
    /// `uffd_thread_us / linux_us` (below 1: pagepilot faster).
    pub ratio_thread: f64,
    /// `uffd_sigbus_us / linux_us`.
    pub ratio_sigbus: f64,
    /// The paper's columns, µs.
    pub paper_us: Option<PaperRow>,
    /// Each run's median per side, µs (`linux`, `uffd-thread`, `uffd-sigbus`).
    pub runs_us: [Vec<f64>; 3],
}

/// The whole report.
#[derive(Serialize)]
pub struct Report {
    /// Repetitions per primitive, side and run.
    pub reps: usize,
    /// Runs.
    pub runs: usize,
    /// Where the uffd-thread side's handler ran.
    pub handler_cpu: HandlerCpu,
    /// The sides, in the order of `runs_us`.
    pub sides: [&'static str; 3],
    /// One row per primitive, in the paper's order.
    pub rows: Vec<Row>,
}

impl Report {
    /// Medians and ratios of the runs' medians.
    pub fn of(reps: usize, runs: usize, handler_cpu: HandlerCpu, acc: Runs) -> Report {
        let rows = Primitive::ALL
            .iter()
            .zip(acc)
            .map(|(p, per_side)| {
                let m = |i: usize| median(per_side[i].clone());
                let (l, t, s) = (m(0), m(1), m(2));
                Row {
                    primitive: p.name(),
                    linux_us: l,
                    uffd_thread_us: t,
                    uffd_sigbus_us: s,
                    ratio_thread: ratio(t, l).unwrap_or(0.0),
                    ratio_sigbus: ratio(s, l).unwrap_or(0.0),
                    paper_us: paper(p.name()),
                    runs_us: per_side,
                }
            })
            .collect();
        Report {
            reps,
            runs,
            handler_cpu,
            sides: SIDES,
            rows,
        }
    }

    /// The table for people.
    pub fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(
            out,
            "Appel-Li primitives (SawMill Table 1), us per operation: median over {} runs \
             of each run's median of {} repetitions; handler thread: {} CPU",
            self.runs,
            self.reps,
            match self.handler_cpu {
                HandlerCpu::Same => "the measuring thread's",
                HandlerCpu::Other => "another",
                HandlerCpu::Any => "any",
            }
        )?;
        writeln!(
            out,
            "ratio = pagepilot / linux (below 1: pagepilot faster); paper columns for reference\n"
        )?;
        writeln!(
            out,
            "{:<10} {:>8} {:>12} {:>7} {:>12} {:>7}  | {:>6} {:>6} {:>6} {:>7}",
            "primitive",
            "linux",
            "uffd-thread",
            "ratio",
            "uffd-sigbus",
            "ratio",
            "OSF/1",
            "Mach",
            "SPIN",
            "SawMill"
        )?;
        for r in &self.rows {
            let p = r
                .paper_us
                .map_or([0.0; 4], |p| [p.osf1, p.mach, p.spin, p.sawmill]);
            writeln!(
                out,
                "{:<10} {:>8.3} {:>12.3} {:>6.2}x {:>12.3} {:>6.2}x  | {:>6} {:>6} {:>6} {:>7}",
                r.primitive,
                r.linux_us,
                r.uffd_thread_us,
                r.ratio_thread,
                r.uffd_sigbus_us,
                r.ratio_sigbus,
                p[0],
                p[1],
                p[2],
                p[3]
            )?;
        }
        writeln!(
            out,
            "\nprotect = read-only (linux: mprotect PROT_READ; uffd: UFFDIO_WRITEPROTECT on a \
             memfd mapping registered in WP mode). Trap and Fault come from the same faults; \
             Appel2 includes its Prot100, per page."
        )
    }
}
