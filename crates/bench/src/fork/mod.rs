//! `pagepilot bench fork`: what a `fork` costs the process that makes it
//! with a writable file region, against the same file mapped `MAP_SHARED`
//! by the kernel, with as many dirty pages at the fork.
//!
//! Forked workers see one memory (docs/lifecycle.md): before the fork the
//! pager writes the region's dirty pages back, drops its frames and maps
//! the file over the application's view, which the child inherits; once the
//! child is gone the parent's watcher pages the region again (the resume,
//! looked for every 100 ms). So a fork costs pagepilot twice: (a) fork and
//! reap, with that switch inside, and (b) afterwards, the wait for the
//! resume and the working set paged in again. The kernel's fork leaves its
//! pages mapped and cached: its (b) is the working set touched while resident.
//!
//! Each side's forks run in a child process of their own (this binary
//! re-executed with a hidden flag; the pager's fork handler is process-wide,
//! so a kernel fork in a process holding a region would share that region
//! too), in a fresh memory cgroup limited to the budget and `--slack-mb` on
//! top of what the process holds once mapped. Per run, each side's child
//! pages its working set in, forks once to warm up, waits a random part of
//! the watcher's period (the same for both sides) and forks once measured;
//! the sides alternate.

use crate::error::IoContext;
use crate::BenchError;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use pagepilot_pager::sys::PAGE;
use serde::{Deserialize, Serialize};

use super::cgroup::MemCgroup;
use super::child::{self as harness, Exit, Role};
use super::datafile::{self, DataFile};
use super::measure::{check_range, median, ratio, Format};
use crate::BenchResult;

mod child;

use crate::emit::emit;
pub(crate) use child::{child_main, Job};
use child::{ChildOut, SideName};

const MB: usize = 1 << 20;

/// Longest a side's child may run.
const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// Arguments of `pagepilot bench fork`.
#[derive(clap::Args)]
pub struct Args {
    /// Budget of the region in MB; the file is four times larger.
    #[arg(long, default_value_t = 32)]
    budget_mb: usize,
    /// The parent's working set in MB, at the start of the file, touched
    /// before each fork and again after it (at most the budget; default:
    /// half the budget, so that the kernel's read-ahead past the working set
    /// fits in its cgroup too: at the limit, its fork would pay for reclaim).
    #[arg(long)]
    working_mb: Option<usize>,
    /// Dirty megabytes at the fork, at the start of the working set.
    #[arg(long, default_value = "0,1,4,16", value_delimiter = ',')]
    dirty_mb: Vec<usize>,
    /// Forks per point; the median is reported.
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// MB the memory cgroup of each side allows beyond the budget and what the process holds
    /// once mapped: the pager's own memory grows as it runs (its tables, buffers), and its
    /// frames are shmem, which the cgroup cannot reclaim without swap (a limit of the bare
    /// budget gets pagepilot OOM-killed where the kernel's clean pages are just reclaimed).
    #[arg(long, default_value_t = 8)]
    slack_mb: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Directory for the data file (must be on a disk, not tmpfs).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Why a run of `bench fork` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ForkBenchError {
    /// A page of the working set did not hold what was last written there.
    #[error("{side}: after the fork, page {page} holds {got:#04x}, {want:#04x} was written")]
    WrongByte {
        /// `pagepilot` or `kernel`.
        side: &'static str,
        /// The page.
        page: usize,
        /// What it held.
        got: u8,
        /// What it should have.
        want: u8,
    },
    /// The region was not paged again after its child was gone.
    #[error("the region was not resumed within {0:?} of its child's end (stats().resumes)")]
    NoResume(Duration),
}

/// One fork of one side.
#[derive(Clone, Copy, Default, Serialize, Deserialize)]
pub struct ForkRun {
    /// `fork`, the child's `_exit(0)` and `waitpid`, ns (pagepilot: its
    /// prepare handler's write-back, dropping the frames and mapping the file inside).
    pub fork_ns: u64,
    /// From the reap to the region paged again (`stats().resumes`), ns; 0 for the kernel.
    pub resume_wait_ns: u64,
    /// Touching the working set again (one load per page, checked), ns.
    pub retouch_ns: u64,
    /// `resume_wait_ns + retouch_ns`: what the fork costs afterwards.
    pub after_ns: u64,
    /// Page-ins during the retouch (pagepilot's missing faults, the kernel's major faults).
    pub retouch_page_ins: u64,
}

impl ForkRun {
    fn total_ns(&self) -> u64 {
        self.fork_ns + self.after_ns
    }
}

/// Field-wise medians of a side's runs.
fn median_run(runs: &[ForkRun]) -> ForkRun {
    let m = |f: fn(&ForkRun) -> u64| median(runs.iter().map(f).collect());
    ForkRun {
        fork_ns: m(|r| r.fork_ns),
        resume_wait_ns: m(|r| r.resume_wait_ns),
        retouch_ns: m(|r| r.retouch_ns),
        after_ns: m(|r| r.after_ns),
        retouch_page_ins: m(|r| r.retouch_page_ins),
    }
}

/// One dirty size.
#[derive(Serialize)]
pub struct ForkPoint {
    /// Dirty megabytes at the fork.
    pub dirty_mb: usize,
    /// pagepilot, medians per field.
    pub pagepilot: ForkRun,
    /// The kernel, medians per field.
    pub kernel: ForkRun,
    /// (a) fork and reap, pagepilot / kernel (of the medians).
    pub fork_ratio: f64,
    /// (b) after the fork, pagepilot / kernel (of the medians).
    pub after_ratio: f64,
    /// (a) + (b), median over runs of pagepilot's total / the kernel's of the same round.
    pub total_ratio: f64,
    /// Bytes pagepilot wrote back per fork (the dirty pages, before the child exists).
    pub written_back_per_fork: u64,
    /// Median peak charge of pagepilot's cgroup beyond what its process held once mapped.
    pub pagepilot_peak_bytes: u64,
    /// The same for the kernel's.
    pub kernel_peak_bytes: u64,
    /// Every pagepilot run.
    pub pagepilot_runs: Vec<ForkRun>,
    /// Every kernel run.
    pub kernel_runs: Vec<ForkRun>,
}

/// The whole report.
#[derive(Serialize)]
pub struct ForkReport {
    /// Always "fork".
    pub bench: &'static str,
    /// Budget in MB.
    pub budget_mb: usize,
    /// File size in MB.
    pub file_mb: usize,
    /// The parent's working set in MB.
    pub working_mb: usize,
    /// Runs per point.
    pub runs: usize,
    /// Points.
    pub points: Vec<ForkPoint>,
}

/// Runs one side's child in a fresh cgroup of the budget.
fn run_child(mut job: Job) -> Result<ChildOut, crate::BenchError> {
    let cg = MemCgroup::create(job.budget as usize)?;
    job.cgroup = cg.dir().to_path_buf();
    let side = job.side;
    let out = match harness::run("bench fork", &Role::Fork(job), Some(CHILD_LIMIT))? {
        Exit::Reported(out) => out,
        Exit::TimedOut(_) => {
            return Err(BenchError::Measurement {
                bench: "fork",
                what: format!("the {side:?} child ran past {CHILD_LIMIT:?}"),
            })
        }
        Exit::Killed(status) => {
            return Err(BenchError::Measurement {
                bench: "fork",
                what: format!(
                    "the {side:?} child failed ({status}); killed by its cgroup's OOM killer?"
                ),
            })
        }
    };
    drop(cg);
    Ok(out)
}

/// Runs `pagepilot bench fork`.
pub fn run(args: Args) -> BenchResult {
    check_range("--budget-mb", args.budget_mb, 1 << 14)?;
    check_range("--runs", args.runs, 1000)?;
    let working_mb = args.working_mb.unwrap_or(args.budget_mb.div_ceil(2));
    check_range("--working-mb", working_mb, args.budget_mb)?;
    for &d in &args.dirty_mb {
        if d > working_mb {
            return Err(BenchError::BadArg {
                option: "--dirty-mb",
                value: d.to_string(),
                why: format!("more than the working set ({working_mb} MB)"),
            });
        }
    }
    super::kernel::baseline_available()?;
    let budget = args.budget_mb * MB;
    let dir = datafile::default_dir(args.dir);
    let file = DataFile::create(&dir, "fork", 4 * budget)?;
    let mut points = Vec::new();
    let mut tag = 0u8;
    for &dirty_mb in &args.dirty_mb {
        let (mut pp, mut k, mut written) = (Vec::new(), Vec::new(), 0);
        let (mut pp_peak, mut k_peak) = (Vec::new(), Vec::new());
        for run in 0..args.runs {
            tag = tag.wrapping_add(4);
            let job = |side| Job {
                side,
                file: file.path().to_path_buf(),
                cgroup: PathBuf::new(),
                budget: budget as u64,
                slack: (args.slack_mb * MB) as u64,
                working_pages: working_mb * MB / PAGE,
                dirty_pages: dirty_mb * MB / PAGE,
                tag,
            };
            // Side by side, alternating which goes first.
            let order = if run % 2 == 0 {
                [SideName::Pagepilot, SideName::Kernel]
            } else {
                [SideName::Kernel, SideName::Pagepilot]
            };
            for side in order {
                let out = run_child(job(side))?;
                match side {
                    SideName::Pagepilot => {
                        written += out.written_back;
                        pp.push(out.run);
                        pp_peak.push(out.peak_bytes);
                    }
                    SideName::Kernel => {
                        k.push(out.run);
                        k_peak.push(out.peak_bytes);
                    }
                }
            }
        }
        let (p, kn) = (median_run(&pp), median_run(&k));
        let totals = pp
            .iter()
            .zip(&k)
            .map(|(p, k)| ratio(p.total_ns() as f64, k.total_ns() as f64).unwrap_or(0.0))
            .collect();
        points.push(ForkPoint {
            dirty_mb,
            pagepilot: p,
            kernel: kn,
            fork_ratio: ratio(p.fork_ns as f64, kn.fork_ns as f64).unwrap_or(0.0),
            after_ratio: ratio(p.after_ns as f64, kn.after_ns as f64).unwrap_or(0.0),
            total_ratio: median(totals),
            written_back_per_fork: written / args.runs as u64,
            pagepilot_peak_bytes: median(pp_peak),
            kernel_peak_bytes: median(k_peak),
            pagepilot_runs: pp,
            kernel_runs: k,
        });
    }
    let report = ForkReport {
        bench: "fork",
        budget_mb: args.budget_mb,
        file_mb: file.len() / MB,
        working_mb,
        runs: args.runs,
        points,
    };
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

fn print_text(r: &ForkReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "fork with a writable file region: working set {} MB of a {} MB file, budget {} MB, \
         median of {}",
        r.working_mb, r.file_mb, r.budget_mb, r.runs
    )?;
    writeln!(
        out,
        "(a) fork and reap; (b) after: the working set touched again \
         (pagepilot: after waiting for the resume)"
    )?;
    writeln!(
        out,
        "{:>8} | {:>9} {:>9} {:>7} | {:>8} {:>10} {:>8} {:>9} {:>8} {:>7} | {:>7}",
        "dirty MB",
        "(a) pp us",
        "kernel us",
        "ratio",
        "wait ms",
        "retouch ms",
        "page-ins",
        "(b) pp ms",
        "kern ms",
        "ratio",
        "a+b"
    )?;
    let ms = |ns: u64| ns as f64 / 1e6;
    for p in &r.points {
        writeln!(
            out,
            "{:>8} | {:>9.1} {:>9.1} {:>7.2} | {:>8.1} {:>10.2} {:>8} {:>9.1} {:>8.3} {:>7.0} | {:>7.1}",
            p.dirty_mb,
            p.pagepilot.fork_ns as f64 / 1e3,
            p.kernel.fork_ns as f64 / 1e3,
            p.fork_ratio,
            ms(p.pagepilot.resume_wait_ns),
            ms(p.pagepilot.retouch_ns),
            p.pagepilot.retouch_page_ins,
            ms(p.pagepilot.after_ns),
            ms(p.kernel.after_ns),
            p.after_ratio,
            p.total_ratio
        )?;
    }
    Ok(())
}
