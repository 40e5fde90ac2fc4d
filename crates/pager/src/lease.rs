//! Leases: how a parent knows whether another process still uses the
//! kernel's mapping of a region's file (`sharing`).
//!
//! A lease is an open file description of a small memfd, the lease file,
//! with a shared lock on it (`F_OFD_SETLK`). A child made by `fork`
//! inherits the description granted to it before the fork, so the lock
//! lives exactly as long as some process holds a descriptor of it: the
//! child, its own children, until the last of them exits or `exec`s (the
//! descriptor is close-on-exec, and `exec` drops the mapping too). The
//! parent's own description of the file holds no lock, so asking whether
//! an exclusive lock would conflict (`F_OFD_GETLK`) asks whether anyone
//! else holds a lease; no process id is tracked and nothing is reaped.
//!
//! A handle sent to a process that is not a child (a pickled region,
//! `multiprocessing`'s spawn and forkserver) cannot carry a descriptor: the
//! parent keeps the granted description open, pending, and names it by
//! path (`/proc/<pid>/fd/<n>`). The other process opens that path (a new
//! description of the same file), locks it, and marks byte `n` of the file
//! as claimed; the parent then closes its pending copy. A lease never
//! claimed stays pending: the region stays shared, which is always safe.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, MutexGuard};

use crate::sys;

/// A region's lease file and the leases it granted that are not claimed yet.
pub struct Lease {
    /// The lease file; this description holds no lock.
    file: File,
    /// Granted to handles another process is to claim, by descriptor.
    pending: Mutex<Vec<OwnedFd>>,
}

const CLAIMED: u8 = 1;

impl Lease {
    /// A new lease file, with no lease granted.
    pub fn new() -> io::Result<Lease> {
        let fd = sys::memfd("pagepilot-lease", 0)?;
        Ok(Lease {
            file: File::from(fd),
            pending: Mutex::new(Vec::new()),
        })
    }

    fn pending(&self) -> MutexGuard<'_, Vec<OwnedFd>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A lease: a new description of the lease file, locked. Whoever holds
    /// a descriptor of it (a child after `fork`) holds the lease.
    pub fn grant(&self) -> io::Result<OwnedFd> {
        let fd = sys::reopen(self.file.as_raw_fd())?;
        sys::lock_shared(&fd)?;
        Ok(fd)
    }

    /// A lease for a handle another process will claim ([`claim`]): kept
    /// here until then; returns the path that process opens.
    pub fn grant_pending(&self) -> io::Result<String> {
        let fd = self.grant()?;
        let n = fd.as_raw_fd();
        // A descriptor number used before may have been marked claimed.
        self.file.write_all_at(&[0], n as u64)?;
        self.pending().push(fd);
        Ok(format!("/proc/{}/fd/{n}", std::process::id()))
    }

    /// Whether any process but this one holds a lease, or one is pending.
    /// Pending leases that were claimed are let go first.
    pub fn held(&self) -> bool {
        self.pending().retain(|fd| {
            let mut mark = [0u8];
            let claimed = self.file.read_exact_at(&mut mark, fd.as_raw_fd() as u64).is_ok()
                && mark[0] == CLAIMED;
            !claimed
        });
        // In doubt, held: staying shared is always safe.
        sys::locked_by_others(&self.file).unwrap_or(true)
    }
}

/// Claims the lease granted at `path` ([`Lease::grant_pending`]) for this
/// process: it holds it until the descriptor returned is closed.
pub fn claim(path: &str) -> io::Result<OwnedFd> {
    let n: u64 = path
        .rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("not a lease: {path}")))?;
    let fd = sys::open_path(path)?;
    sys::lock_shared(&fd)?;
    File::from(fd.try_clone()?).write_all_at(&[CLAIMED], n)?;
    Ok(fd)
}
