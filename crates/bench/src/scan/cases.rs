//! The cases of `bench scan` and who runs them: pagepilot with its defaults, pagepilot tuned,
//! the baseline of the case (the kernel's `mmap` in a memory cgroup, or buffered `pread` for a
//! warm file) and a reference beside it.

use std::time::Duration;

use serde::Serialize;

use super::fileio;
use crate::datafile::DataFile;
use crate::kernel::{self, Advice, KernelError};
use crate::live;
use crate::measure::Measured;
use crate::workload::{Cache, Pattern, Plan};

/// One point of the benchmark: a budget, the page cache's state, an order of touches and a
/// number of application threads.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Case {
    /// Budget in MB: pagepilot's frames, the kernel's cgroup limit.
    pub budget_mb: usize,
    /// The page cache at the start of each run.
    pub cache: Cache,
    /// Order of touches.
    pub pattern: Pattern,
    /// Application threads, each on its own contiguous part of the file.
    pub threads: usize,
}

/// Who runs a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// pagepilot through the public API with no option but the policy.
    Defaults,
    /// pagepilot with the benchmark's tuning ([`tuning`]).
    Tuned,
    /// The kernel's `MAP_SHARED` mapping, in a child process in a memory cgroup of the budget.
    KernelMmap,
    /// The same, told `MADV_RANDOM` (no read-around).
    KernelMadvRandom,
    /// Buffered `pread` of the same pages in the same order, into a buffer per thread, in
    /// the benchmark's own process.
    Pread,
}

impl Side {
    /// Whether the kernel runs this side (in a memory cgroup, which needs root).
    pub fn is_kernel(self) -> bool {
        matches!(self, Side::KernelMmap | Side::KernelMadvRandom)
    }

    /// Short name for the table.
    pub fn short(self) -> &'static str {
        match self {
            Side::Defaults => "defaults",
            Side::Tuned => "tuned",
            Side::KernelMmap => "mmap",
            Side::KernelMadvRandom => "madv-rnd",
            Side::Pread => "pread",
        }
    }
}

impl Case {
    /// What pagepilot is compared with: the kernel's mapping from a cold cache, buffered
    /// `pread` from a warm one.
    pub fn baseline(&self) -> Side {
        match self.cache {
            Cache::Cold => Side::KernelMmap,
            Cache::Warm => Side::Pread,
        }
    }

    /// A second comparison, for reference: the kernel's mapping of the warm file, or the
    /// kernel told `MADV_RANDOM` on cold uniform reads.
    pub fn reference(&self) -> Option<Side> {
        match (self.cache, self.pattern) {
            (Cache::Warm, _) => Some(Side::KernelMmap),
            (Cache::Cold, Pattern::Uniform) => Some(Side::KernelMadvRandom),
            (Cache::Cold, _) => None,
        }
    }

    /// Every side of the case, in the order of the first round.
    pub fn sides(&self) -> Vec<Side> {
        let mut v = vec![Side::Defaults, Side::Tuned, self.baseline()];
        v.extend(self.reference());
        v
    }

    /// Its label in progress messages.
    pub fn label(&self) -> String {
        format!(
            "budget {} MB, {}, {}, {} thread(s)",
            self.budget_mb,
            self.cache.name(),
            self.pattern.name(),
            self.threads
        )
    }
}

/// The tuned options of `bench scan` (`--readahead`, `--readahead-depth`, `--fault-around`,
/// `--handler-threads`, `--faulting-thread`).
#[derive(Clone, Copy, Debug)]
pub struct Knobs {
    /// Read-ahead window of sequential scans, pages.
    pub readahead: usize,
    /// Windows kept ahead of sequential scans.
    pub readahead_depth: usize,
    /// Pages read per fault by the other orders.
    pub fault_around: usize,
    /// Handler threads; `None`: one per application thread.
    pub handler_threads: Option<usize>,
    /// Faults served in the faulting thread.
    pub faulting_thread: bool,
}

/// The tuned row's options for `case`: one handler thread per application thread; sequential
/// scans read ahead asynchronously (128-page windows, 4 ahead); other orders read one page per
/// fault (no read-ahead, `--fault-around` 1: no read-around).
pub fn tuning(case: &Case, k: &Knobs) -> live::Tuning {
    let sequential = matches!(case.pattern, Pattern::Sequential | Pattern::Twopass);
    live::Tuning {
        readahead: Some(if sequential { k.readahead } else { 1 }),
        fault_around: (!sequential).then_some(k.fault_around),
        async_readahead: Some(sequential),
        readahead_depth: sequential.then_some(k.readahead_depth),
        handler_threads: Some(k.handler_threads.unwrap_or(case.threads)),
        faulting_thread: k.faulting_thread,
    }
}

/// One run of one side.
#[derive(Clone, Debug, Serialize)]
pub struct ScanRun {
    /// What it measured (a writing run's time includes writing its dirty pages back). A run
    /// that timed out has the time limit as its time and nothing else.
    #[serde(flatten)]
    pub measured: Measured,
    /// A kernel child killed at the time limit (`--kernel-timeout-s`): its time is at least
    /// the limit.
    pub timed_out: bool,
    /// pagepilot: bytes its region read from the device (`bytes_read - cached_bytes_read` of
    /// its statistics), which the disk reads per touched page are taken from (the process's
    /// `read_bytes` also counts its own code paged in after another process dropped the page
    /// cache, up to `read_ahead_kb` per fault).
    pub pager_disk_bytes: Option<u64>,
    /// pagepilot: fault events (userfaultfd messages or signals).
    pub fault_events: Option<u64>,
    /// Warm runs: pages of the file in the page cache when the run started.
    pub cached_pages_before: Option<u64>,
    /// Writing runs: pages whose stamp was read back from the file after the run.
    pub written_pages_checked: u64,
}

/// What a case's runs share.
pub struct Context<'a> {
    /// The data file.
    pub file: &'a DataFile,
    /// pagepilot's policy.
    pub policy: &'a str,
    /// The tuned row's options.
    pub knobs: Knobs,
    /// Longest a kernel child may run.
    pub kernel_timeout: Duration,
}

/// A failure of a side's run.
#[derive(Debug, thiserror::Error)]
pub enum SideError {
    /// pagepilot failed or read wrong data.
    #[error(transparent)]
    Live(#[from] live::LiveError),
    /// The kernel's child failed (not by the cgroup's OOM killer) or read wrong data.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The page cache could not be filled, or the `pread` baseline failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The `pread` baseline read wrong data.
    #[error("pread baseline checksum {got} != expected {want}")]
    Checksum {
        /// What it computed.
        got: u64,
        /// What it should have.
        want: u64,
    },
    /// A written page's stamp is not in the file after the run.
    #[error("{side:?}")]
    LostWrite {
        /// Who wrote.
        side: Side,
        /// What is missing.
        #[source]
        lost: fileio::LostWrite,
    },
}

/// How a side's run ended, when it did not fail.
enum Ended {
    /// pagepilot ran the workload.
    Live(Box<live::LiveRun>),
    /// The kernel's child or `pread` ran the workload.
    Ran(Measured),
    /// It was killed at the time limit.
    TimedOut(Duration),
    /// The cgroup's OOM killer ended it.
    OomKilled,
}

/// Runs `plan` (the case's workload, stamped for this run) once by `side`. `Ok(None)`: the
/// kernel's child was killed by its cgroup's OOM killer (counted, not measured).
pub fn run_side(
    side: Side,
    case: &Case,
    cx: &Context,
    plan: &Plan,
) -> Result<Option<ScanRun>, SideError> {
    let cached_pages_before = match case.cache {
        Cache::Warm => Some(fileio::warm(cx.file)?),
        Cache::Cold => None,
    };
    let budget = case.budget_mb << 20;
    let live_run = |tuning| live::run_with(cx.file, budget, cx.policy, tuning, plan, case.cache);
    let kernel_run = |advice| {
        let start = kernel::Start {
            advice,
            cache: case.cache,
            timeout: Some(cx.kernel_timeout),
        };
        match kernel::run_with(cx.file, budget, plan.workload(), start) {
            Ok(m) => Ok(Ended::Ran(m)),
            Err(e) if e.is_oom_kill() => Ok(Ended::OomKilled),
            Err(KernelError::TimedOut(after)) => Ok(Ended::TimedOut(after)),
            Err(e) => Err(e),
        }
    };
    let ended = match side {
        Side::Defaults => Ended::Live(Box::new(live_run(live::Tuning::default())?)),
        Side::Tuned => Ended::Live(Box::new(live_run(tuning(case, &cx.knobs))?)),
        Side::KernelMmap => kernel_run(Advice::Normal)?,
        Side::KernelMadvRandom => kernel_run(Advice::Random)?,
        Side::Pread => {
            let m = fileio::pread_run(cx.file, plan)?;
            let want = plan.expected();
            if m.checksum != want {
                return Err(SideError::Checksum {
                    got: m.checksum,
                    want,
                });
            }
            Ended::Ran(m)
        }
    };
    let mut run = ScanRun {
        measured: Measured::default(),
        timed_out: false,
        pager_disk_bytes: None,
        fault_events: None,
        cached_pages_before,
        written_pages_checked: 0,
    };
    match ended {
        Ended::OomKilled => return Ok(None),
        // Killed in the middle: nothing to check (its writes are partial).
        Ended::TimedOut(after) => {
            run.measured.elapsed_ns = after.as_nanos() as u64;
            run.timed_out = true;
            return Ok(Some(run));
        }
        Ended::Live(r) => {
            run.measured = r.measured;
            // Windows read from the page cache count as cached when issued, as read when
            // reaped: one still in flight at the end can make the difference negative.
            let disk = r.stats.bytes_read.saturating_sub(r.stats.cached_bytes_read);
            run.pager_disk_bytes = Some(disk);
            run.fault_events = Some(r.stats.fault_events);
        }
        Ended::Ran(m) => run.measured = m,
    }
    run.written_pages_checked =
        fileio::check_written(cx.file, plan).map_err(|lost| SideError::LostWrite { side, lost })?;
    Ok(Some(run))
}
