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
//! parent keeps the granted description open, pending, and names it in a
//! [`Ticket`] (its process, descriptor number, the lease file's inode and a
//! token written in the file for that grant). The other process opens
//! `/proc/<pid>/fd/<n>` (a new description of the same file), checks that
//! it is that lease file and that grant, locks it, checks that the region
//! is still shared, and marks the grant claimed; the parent then closes
//! its pending copy. Nothing is written to a file that is not the lease
//! file. A lease never claimed stays pending: the region stays shared,
//! which is always safe.
//!
//! The lease file: byte 0 is the region's state ([`State`]); grant `n`'s
//! slot, at `SLOTS + 16 n`, holds its token (8 bytes) and its claimed mark.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::sys;

/// Where the grants' slots begin in the lease file.
const SLOTS: u64 = 64;
const SLOT: u64 = 16;
const CLAIMED: u8 = 1;

/// The region's state, as the lease file tells it to a claiming process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// The pager pages the region: a new mapping of the file would not see
    /// its pages.
    Paged = 0,
    /// The region is the kernel's mapping of its file.
    Shared = 1,
    /// The region was unmapped: the file is all there is.
    Closed = 2,
}

/// A region's lease file and the leases it granted that are not claimed yet.
pub struct Lease {
    /// The lease file; this description holds no lock.
    file: File,
    /// Granted to handles another process is to claim, by descriptor.
    pending: Mutex<Vec<OwnedFd>>,
}

/// What a process that is not a child needs to claim a pending lease:
/// plain data, sent with the handle.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ticket {
    /// The sharing process.
    pub pid: u32,
    /// Its start time (`/proc/<pid>/stat`, field 22): a process id reused
    /// by another process is told apart.
    pub started: u64,
    /// The pending description's number in the sharing process.
    pub fd: i32,
    /// The lease file's device and inode.
    pub dev: u64,
    /// The lease file's inode.
    pub ino: u64,
    /// Written in the grant's slot: a number reused by a later grant is
    /// told apart.
    pub token: u64,
}

/// Why a ticket cannot be claimed while its process runs.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The grant was claimed and let go already (a pickle loaded twice).
    #[error("the region's handle was opened already (a pickled region is loaded once)")]
    Used,
    /// The region is paged again by the sharing process: a new mapping of
    /// the file would not see its pages.
    #[error("the region is paged again by process {0}; its handle came too late")]
    Paged(u32),
    /// The lease file could not be read or locked.
    #[error("the lease failed")]
    Io(#[from] io::Error),
}

impl Lease {
    /// A new lease file, with no lease granted, the region `Shared`.
    pub fn new() -> io::Result<Lease> {
        let fd = sys::memfd("pagepilot-lease", 0)?;
        let lease = Lease {
            file: File::from(fd),
            pending: Mutex::new(Vec::new()),
        };
        lease.set_state(State::Shared)?;
        Ok(lease)
    }

    fn pending(&self) -> MutexGuard<'_, Vec<OwnedFd>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells claiming processes the region's state.
    pub fn set_state(&self, state: State) -> io::Result<()> {
        self.file.write_all_at(&[state as u8], 0)
    }

    /// A lease: a new description of the lease file, locked. Whoever holds
    /// a descriptor of it (a child after `fork`) holds the lease.
    pub fn grant(&self) -> io::Result<OwnedFd> {
        let fd = sys::reopen(self.file.as_raw_fd())?;
        sys::lock_shared(&fd)?;
        Ok(fd)
    }

    /// A lease for a handle another process will claim ([`claim`]): kept
    /// here until then.
    pub fn grant_pending(&self) -> io::Result<Ticket> {
        static GRANTS: AtomicU64 = AtomicU64::new(0);
        let fd = self.grant()?;
        let n = fd.as_raw_fd();
        let meta = self.file.metadata()?;
        let pid = std::process::id();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let token = now ^ (u64::from(pid) << 32) ^ GRANTS.fetch_add(1, Ordering::Relaxed);
        let mut slot = [0u8; SLOT as usize];
        slot[..8].copy_from_slice(&token.to_le_bytes());
        self.file.write_all_at(&slot, slot_of(n))?;
        self.pending().push(fd);
        Ok(Ticket {
            pid,
            started: sys::process_start_time(pid)?,
            fd: n,
            dev: meta.dev(),
            ino: meta.ino(),
            token,
        })
    }

    /// Whether a grant is pending (issued, not claimed yet).
    pub fn has_pending(&self) -> bool {
        self.release_claimed();
        !self.pending().is_empty()
    }

    fn release_claimed(&self) {
        self.pending().retain(|fd| {
            let mut mark = [0u8];
            let at = slot_of(fd.as_raw_fd()) + 8;
            let claimed = self.file.read_exact_at(&mut mark, at).is_ok() && mark[0] == CLAIMED;
            !claimed
        });
    }

    /// Whether any process but this one holds a lease, or one is pending.
    /// Pending leases that were claimed are let go first.
    pub fn held(&self) -> bool {
        self.release_claimed();
        // In doubt, held: staying shared is always safe.
        sys::locked_by_others(&self.file).unwrap_or(true)
    }
}

fn slot_of(fd: i32) -> u64 {
    SLOTS + SLOT * fd.max(0) as u64
}

/// Claims the lease `ticket` names for this process: it holds it until the
/// descriptor returned is closed. `Ok(None)`: no lease is needed (the
/// sharing process is gone, or has unmapped the region: the file is all
/// there is).
pub fn claim(ticket: &Ticket) -> Result<Option<OwnedFd>, ClaimError> {
    let alive = sys::process_start_time(ticket.pid).is_ok_and(|t| t == ticket.started);
    if !alive {
        return Ok(None);
    }
    let path = format!("/proc/{}/fd/{}", ticket.pid, ticket.fd);
    // Only a file that is this lease file is read, locked or written.
    let fd = match sys::open_path(&path) {
        Ok(fd) => fd,
        Err(_) => return Err(ClaimError::Used),
    };
    let file = File::from(fd);
    let meta = file.metadata()?;
    if (meta.dev(), meta.ino()) != (ticket.dev, ticket.ino) {
        return Err(ClaimError::Used);
    }
    sys::lock_shared(&file)?;
    let at = slot_of(ticket.fd);
    let mut token = [0u8; 8];
    file.read_exact_at(&mut token, at)?;
    if u64::from_le_bytes(token) != ticket.token {
        return Err(ClaimError::Used);
    }
    // Locked first, then the state read: a resume that follows sees the lock.
    let mut state = [0u8];
    file.read_exact_at(&mut state, 0)?;
    match state[0] {
        s if s == State::Shared as u8 => {}
        s if s == State::Closed as u8 => return Ok(None),
        _ => return Err(ClaimError::Paged(ticket.pid)),
    }
    file.write_all_at(&[CLAIMED], at + 8)?;
    Ok(Some(OwnedFd::from(file)))
}
