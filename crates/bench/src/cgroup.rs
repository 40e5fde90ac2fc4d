//! A cgroup v1 memory cgroup for the kernel baseline: created with a limit, removed on drop.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Where the cgroup v1 memory controller is mounted on these machines.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

/// Failure to set up the memory cgroup.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The v1 memory controller is not mounted.
    #[error("the cgroup v1 memory controller is not mounted at {MEMORY_ROOT}")]
    NotMounted,
    /// A cgroup file operation failed.
    #[error("cgroup {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Whether the v1 memory controller is mounted at [`MEMORY_ROOT`].
pub fn mounted() -> Result<(), CgroupError> {
    if Path::new(MEMORY_ROOT)
        .join("memory.limit_in_bytes")
        .exists()
    {
        Ok(())
    } else {
        Err(CgroupError::NotMounted)
    }
}

/// A memory cgroup limited to a budget; the directory is removed when dropped.
pub struct MemCgroup {
    dir: PathBuf,
}

impl MemCgroup {
    /// Creates `/sys/fs/cgroup/memory/pagepilot-<pid>-<n>` limited to `limit_bytes`.
    pub fn create(limit_bytes: usize) -> Result<MemCgroup, CgroupError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        mounted()?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = Path::new(MEMORY_ROOT).join(format!("pagepilot-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|source| CgroupError::Io {
            path: dir.clone(),
            source,
        })?;
        let cg = MemCgroup { dir };
        cg.write("memory.limit_in_bytes", &limit_bytes.to_string())?;
        Ok(cg)
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self, file: &str, value: &str) -> Result<(), CgroupError> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(|source| CgroupError::Io { path, source })
    }
}

/// Memory charged to the cgroup at `dir` now.
pub fn usage(dir: &Path) -> Result<u64, CgroupError> {
    read_number(&dir.join("memory.usage_in_bytes"))
}

fn read_number(path: &Path) -> Result<u64, CgroupError> {
    let path = path.to_path_buf();
    let text = std::fs::read_to_string(&path).map_err(|source| CgroupError::Io {
        path: path.clone(),
        source,
    })?;
    text.trim().parse().map_err(|_| CgroupError::Io {
        path,
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a number: {text:?}"),
        ),
    })
}

/// The most memory charged to the cgroup at `dir` since it was made.
pub fn max_usage(dir: &Path) -> Result<u64, CgroupError> {
    read_number(&dir.join("memory.max_usage_in_bytes"))
}

/// Sets the memory limit of the cgroup at `dir`.
pub fn set_limit(dir: &Path, bytes: u64) -> Result<(), CgroupError> {
    let path = dir.join("memory.limit_in_bytes");
    std::fs::write(&path, bytes.to_string()).map_err(|source| CgroupError::Io { path, source })
}

/// What of a process's memory a cgroup it enters is to see at work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The process as it is.
    AsIs,
    /// Its code and data paged in and locked first (`mlockall(MCL_CURRENT)`), while still
    /// charged to the cgroup it was in: code run for the first time inside a workload would
    /// otherwise be read from the disk (after the page cache was dropped, up to
    /// `read_ahead_kb` per fault) and counted as if the workload had read it. Best effort:
    /// without the privilege the counts are only less exact.
    CodeLocked,
}

/// The one way a child of the bench enters the memory cgroup at `dir` (see [`Entry`]); its
/// limit is set afterwards, once it has mapped what it uses ([`limit_above_charged`]).
pub fn enter(dir: &Path, entry: Entry) -> Result<(), CgroupError> {
    if entry == Entry::CodeLocked {
        // SAFETY: mlockall changes no memory contents, only keeps the current pages resident.
        let _ = unsafe { libc::mlockall(libc::MCL_CURRENT) };
    }
    join(dir)
}

/// Limits the cgroup at `dir` to `bytes` on top of what it has charged now (the process's
/// own binary, heap, stacks and bookkeeping must not eat into the budget); returns that charge.
pub fn limit_above_charged(dir: &Path, bytes: u64) -> Result<u64, CgroupError> {
    let charged = usage(dir)?;
    set_limit(dir, bytes + charged)?;
    Ok(charged)
}

/// Moves the calling process into the cgroup at `dir` as it is: [`enter`], or back home.
pub fn join(dir: &Path) -> Result<(), CgroupError> {
    let path = dir.join("cgroup.procs");
    std::fs::write(&path, std::process::id().to_string())
        .map_err(|source| CgroupError::Io { path, source })
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // The child has exited; charged page cache moves to the parent on rmdir. Emptying
        // first makes the rmdir reliable; retry briefly while the kernel finishes the exit.
        let _ = std::fs::write(self.dir.join("memory.force_empty"), "0");
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("pagepilot: could not remove cgroup {}", self.dir.display());
    }
}
