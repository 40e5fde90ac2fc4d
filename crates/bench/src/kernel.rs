//! The kernel baseline: the same workload over the kernel's own `mmap` of the file, run by a
//! child process (this binary re-executed with a hidden flag) inside a memory cgroup limited to
//! the same budget, after the page cache was dropped.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cgroup::{self, CgroupError, MemCgroup};
use super::datafile::DataFile;
use super::measure::{self, Measured};
use super::workload::{self, Workload};
use pagepilot_pager::sys::{self, Mapping};

/// Hidden flag of `pagepilot bench join|scan` that runs the child side.
pub const CHILD_FLAG: &str = "--internal-kernel-child";

/// Failure of a kernel-baseline run.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// Setting up the cgroup failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// Dropping the page cache failed (needs root).
    #[error("dropping the page cache: {0}")]
    DropCaches(io::Error),
    /// The child could not be started.
    #[error("starting the kernel-baseline child {exe}: {source}")]
    Spawn {
        /// The executable.
        exe: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The child failed (its stderr was passed through).
    #[error("kernel-baseline child failed ({status}); killed by the cgroup's OOM killer?")]
    Child {
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// The child's report was not understood.
    #[error("kernel-baseline child printed no result: {0}")]
    Report(serde_json::Error),
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
}

impl KernelError {
    /// Whether the child was killed by SIGKILL: the cgroup's OOM killer, when the kernel could
    /// not keep the workload within the limit. That is an outcome of the baseline, not a
    /// failure of the benchmark.
    pub fn is_oom_kill(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        matches!(self, KernelError::Child { status } if status.signal() == Some(libc::SIGKILL))
    }
}

/// What the parent tells the child.
#[derive(Serialize, Deserialize)]
struct ChildJob {
    file: PathBuf,
    cgroup: PathBuf,
    budget: u64,
    workload: Workload,
    advice: Advice,
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

/// Runs `workload` over `file` in a fresh memory cgroup limited to `limit_bytes`.
/// `subcommand` is the bench subcommand whose hidden flag runs [`child_main`].
pub fn run(
    subcommand: &str,
    file: &DataFile,
    limit_bytes: usize,
    workload: Workload,
    advice: Advice,
) -> Result<Measured, KernelError> {
    let cg = MemCgroup::create(limit_bytes)?;
    sys::drop_page_cache().map_err(KernelError::DropCaches)?;
    let job = ChildJob {
        file: file.path().to_path_buf(),
        cgroup: cg.dir().to_path_buf(),
        budget: limit_bytes as u64,
        workload,
        advice,
    };
    let job = serde_json::to_string(&job).map_err(KernelError::Report)?;
    let exe = std::env::current_exe().map_err(|source| KernelError::Spawn {
        exe: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let out = Command::new(&exe)
        .args(["bench", subcommand, CHILD_FLAG, &job])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| KernelError::Spawn { exe, source })?;
    if !out.status.success() {
        return Err(KernelError::Child { status: out.status });
    }
    let m: Measured = serde_json::from_slice(&out.stdout).map_err(KernelError::Report)?;
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

/// The child side: joins the cgroup, maps the file read-only, runs the workload and prints
/// its [`Measured`] as JSON on stdout.
pub fn child_main(job: &str) -> Result<(), KernelError> {
    let side = |e: &dyn std::fmt::Display| KernelError::ChildSide(e.to_string());
    let job: ChildJob = serde_json::from_str(job).map_err(KernelError::Report)?;
    cgroup::join(&job.cgroup)?;
    let file = File::open(&job.file).map_err(|e| side(&e))?;
    sys::fadvise_dontneed(&file).map_err(|e| side(&e))?;
    let len = file.metadata().map_err(|e| side(&e))?.len() as usize;
    let map = Mapping::shared(std::os::fd::AsRawFd::as_raw_fd(&file), len, false)
        .map_err(|e| side(&e))?;
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
    let baseline = cgroup::usage(&job.cgroup)?;
    cgroup::set_limit(&job.cgroup, job.budget + baseline)?;
    let (maj0, min0) = sys::faults_self();
    let read0 = measure::read_bytes_self().map_err(|e| side(&e))?;
    let t0 = Instant::now();
    // SAFETY: the mapping covers the whole file and lives until the end of this function.
    let checksum = unsafe { workload::run(job.workload, map.ptr(), map.len()) };
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let (maj1, min1) = sys::faults_self();
    let read1 = measure::read_bytes_self().map_err(|e| side(&e))?;
    let m = Measured {
        elapsed_ns,
        faults: maj1 - maj0,
        minor_faults: min1 - min0,
        bytes_read: read1 - read0,
        checksum,
        cgroup_baseline_bytes: baseline,
    };
    println!(
        "{}",
        serde_json::to_string(&m).map_err(KernelError::Report)?
    );
    Ok(())
}
