//! The kernel baseline: the same workload over the kernel's own `mmap` (`MAP_SHARED`) of the
//! file, run by a child process (this binary re-executed with a hidden flag) inside a memory
//! cgroup limited to the same budget, after the page cache was dropped (or, for a warm run,
//! with the file left in the page cache).

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cgroup::{self, CgroupError, Entry, MemCgroup};
use super::child::{self, ChildError, Exit, Role};
use super::cold::make_cold;
use super::datafile::DataFile;
use super::measure::{self, Measured};
use super::workload::{self, Cache, Plan, Workload};
use pagepilot_pager::sys::{self, Mapping};

/// Failure of a kernel-baseline run.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// Setting up the cgroup failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// Dropping the page cache failed (needs root).
    #[error("dropping the page cache: {0}")]
    DropCaches(io::Error),
    /// The child could not be run, failed, or printed no result.
    #[error(transparent)]
    Child(#[from] ChildError),
    /// The child was killed by SIGKILL.
    #[error("kernel-baseline child failed ({status}); killed by the cgroup's OOM killer?")]
    Killed {
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// The child's workload read wrong data.
    #[error("kernel baseline checksum {got} != expected {want}")]
    Checksum {
        /// What it computed.
        got: u64,
        /// What it should have.
        want: u64,
    },
    /// The child side failed.
    #[error("kernel-baseline child: {0}")]
    ChildSide(String),
    /// The child ran longer than it was allowed and was killed.
    #[error("kernel-baseline child killed after {0:?} (its time limit)")]
    TimedOut(Duration),
}

impl KernelError {
    /// Whether the child was killed by SIGKILL: the cgroup's OOM killer, when the kernel could
    /// not keep the workload within the limit. That is an outcome of the baseline, not a
    /// failure of the benchmark.
    pub fn is_oom_kill(&self) -> bool {
        matches!(self, KernelError::Killed { .. })
    }
}

/// Why the kernel baseline cannot run for this user: its rows are skipped, the others run.
#[derive(Debug, thiserror::Error)]
pub enum BaselineUnavailable {
    /// The memory controller it limits the kernel with is missing.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// A file it must write is closed to this user.
    #[error(
        "{0} is not writable by this user: the kernel baseline creates memory cgroups and \
         drops the page cache, which needs root; its rows are skipped"
    )]
    NotWritable(PathBuf),
}

/// Whether this user can run the kernel baseline: the memory controller is mounted and its
/// root and `/proc/sys/vm/drop_caches` are writable.
pub fn baseline_available() -> Result<(), BaselineUnavailable> {
    cgroup::mounted()?;
    let root = std::path::Path::new(cgroup::MEMORY_ROOT);
    for path in [root, std::path::Path::new(sys::DROP_CACHES)] {
        if !sys::writable(path) {
            return Err(BaselineUnavailable::NotWritable(path.to_path_buf()));
        }
    }
    Ok(())
}

/// What the parent tells the child.
#[derive(Serialize, Deserialize)]
pub struct ChildJob {
    file: PathBuf,
    cgroup: PathBuf,
    budget: u64,
    workload: Workload,
    advice: Advice,
    #[serde(default)]
    cache: Cache,
}

/// What the kernel is told about the access pattern (`madvise` on the mapping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Advice {
    /// Nothing: the kernel's defaults (read-around on faults, read-ahead on sequences).
    #[default]
    Normal,
    /// `MADV_RANDOM`: no read-around, one page per fault.
    Random,
}

/// How a kernel run starts, and how long it may take.
#[derive(Clone, Copy, Debug, Default)]
pub struct Start {
    /// What the kernel is told about the access pattern.
    pub advice: Advice,
    /// Cold drops the page cache first (and the child drops the file's pages); warm leaves
    /// what the caller put there.
    pub cache: Cache,
    /// Longest the child may run, from its start; then it is killed
    /// ([`KernelError::TimedOut`]). `None`: no limit.
    pub timeout: Option<Duration>,
}

/// Runs `workload` over `file` in a fresh memory cgroup limited to `limit_bytes`, the page
/// cache dropped first; the workload runs in a child ([`child_main`]).
pub fn run(
    file: &DataFile,
    limit_bytes: usize,
    workload: Workload,
    advice: Advice,
) -> Result<Measured, KernelError> {
    let start = Start {
        advice,
        ..Start::default()
    };
    run_with(file, limit_bytes, workload, start)
}

/// [`run`], starting as `start` says. A writing workload maps the file writable and its time
/// includes `msync(MS_SYNC)` and `munmap`.
pub fn run_with(
    file: &DataFile,
    limit_bytes: usize,
    workload: Workload,
    start: Start,
) -> Result<Measured, KernelError> {
    let Start {
        advice,
        cache,
        timeout,
    } = start;
    let cg = MemCgroup::create(limit_bytes)?;
    if cache == Cache::Cold {
        make_cold(&[file.path()], true).map_err(KernelError::DropCaches)?;
    }
    let job = ChildJob {
        file: file.path().to_path_buf(),
        cgroup: cg.dir().to_path_buf(),
        budget: limit_bytes as u64,
        workload,
        advice,
        cache,
    };
    let m: Measured = match child::run("kernel-baseline", &Role::Kernel(job), timeout)? {
        Exit::Reported(m) => m,
        Exit::Killed(status) => return Err(KernelError::Killed { status }),
        Exit::TimedOut(after) => return Err(KernelError::TimedOut(after)),
    };
    let want = workload::expected(workload, file.len());
    if m.checksum != want {
        return Err(KernelError::Checksum {
            got: m.checksum,
            want,
        });
    }
    drop(cg);
    Ok(m)
}

/// The child side: joins the cgroup, maps the file (writable if the workload writes), runs the
/// workload and prints its [`Measured`] as JSON on stdout.
pub fn child_main(job: ChildJob) -> Result<(), KernelError> {
    let side = |e: &dyn std::fmt::Display| KernelError::ChildSide(e.to_string());
    cgroup::enter(&job.cgroup, Entry::CodeLocked)?;
    let writes = job.workload.writes();
    let file = File::options()
        .read(true)
        .write(writes)
        .open(&job.file)
        .map_err(|e| side(&e))?;
    if job.cache == Cache::Cold {
        make_cold(&[&job.file], false).map_err(|e| side(&e))?;
    }
    let len = file.metadata().map_err(|e| side(&e))?.len() as usize;
    let map = Mapping::shared(std::os::fd::AsRawFd::as_raw_fd(&file), len, writes)
        .map_err(|e| side(&e))?;
    let plan = Plan::new(job.workload, len);
    if job.advice == Advice::Random {
        map.advise_random().map_err(|e| side(&e))?;
    }
    // The process's own memory (and its threads' stacks, touched here first) must not eat
    // into the file's budget: the limit is the budget on top of what is charged now.
    std::thread::scope(|s| {
        for _ in 0..job.workload.threads() {
            s.spawn(|| std::hint::black_box([0u8; 64 << 10]));
        }
    });
    let baseline = cgroup::limit_above_charged(&job.cgroup, job.budget)?;
    let (maj0, min0) = sys::faults_self();
    let read0 = measure::read_bytes_self().map_err(|e| side(&e))?;
    let cpu0 = sys::cpu_us_self();
    let t0 = Instant::now();
    // SAFETY: the mapping covers the whole file, is writable if the plan writes, and lives
    // until it is dropped below; nothing else refers to it.
    let checksum = unsafe { plan.run(map.ptr()) };
    if writes {
        // The dirty pages reach the file within the run, as pagepilot's unmap writes them.
        sys::msync(map.ptr() as usize, map.len()).map_err(|e| side(&e))?;
        drop(map);
    }
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let cpu_us = sys::cpu_us_self() - cpu0;
    let (maj1, min1) = sys::faults_self();
    let read1 = measure::read_bytes_self().map_err(|e| side(&e))?;
    let m = Measured {
        elapsed_ns,
        faults: maj1 - maj0,
        minor_faults: min1 - min0,
        bytes_read: read1 - read0,
        checksum,
        cgroup_baseline_bytes: baseline,
        cpu_us,
    };
    Ok(child::report(&m)?)
}
