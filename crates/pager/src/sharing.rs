//! Coherence across `fork`, as `MAP_SHARED`: while another process may use
//! a writable file region (a child after `fork`, a process that unpickled
//! it), the region is the kernel's `MAP_SHARED` mapping of its file in
//! every one of them, the parent included, so that a store by any is seen
//! by the others at their next load. The page cache is the one copy they
//! share; the pager stops caching the region meanwhile (its frames are
//! freed, its budget kept), and pages it under its policy again once no
//! other process holds the region's lease (`lease`).
//!
//! A region moves between four modes, under its lock:
//!
//! - `Paging`: the pager serves its faults (the normal mode).
//! - `Entering` (`share`, before the fork): faults wait. Dirty pages are
//!   written back (write-protected first, so a racing store waits too),
//!   every frame is dropped, then the file is mapped over the application's
//!   view (`MAP_FIXED`, one atomic replacement) and the waiting threads are
//!   woken: they retry on the file mapping. No store is lost and no load
//!   sees an older page than one already seen.
//! - `Shared`: the application's view is the file mapping; the pager's
//!   threads idle. `flush` is `msync`; pins are kept as a record.
//! - `Resuming` (`resume`, from the watcher thread): the memfd is cut to
//!   length 0, mapped over the view and registered, then given its length
//!   back. An access in between finds a page beyond the memfd's end
//!   (SIGBUS before any userfaultfd event), which the SIGBUS handler holds
//!   until the view is registered (`sigbus::hold`): no access ever sees an
//!   empty frame.
//!
//! Why the kernel's mapping and not the pager's frames shared with the child
//! (`UFFD_FEATURE_EVENT_FORK`): see docs/lifecycle.md, "Why children share
//! the kernel's mapping".

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

use crate::error::FlushError;
use crate::frame_table::{State, FLUSHING};
use crate::lease::{self, Lease, Ticket};
use crate::shared::Shared;
use crate::sys::{self, PAGE};
use crate::{fault, sigbus};

/// What serves a region's pages now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The pager, under the region's policy.
    Paging = 0,
    /// Changing to `Shared`: faults wait.
    Entering = 1,
    /// The kernel's mapping of the file, shared with other processes.
    Shared = 2,
    /// Changing back to `Paging`: faults wait.
    Resuming = 3,
}

/// Why a region could not be shared.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// A dirty page could not be written back: the file lacks data.
    #[error("write-back before sharing: {0}")]
    WriteBack(FlushError),
    /// Pages stayed in memory after every attempt to drop them (a
    /// write-back that keeps failing, pins that cannot be let go).
    #[error("{0} page(s) stayed in memory")]
    Busy(usize),
    /// The region has no file to share (anonymous memory, dataspaces).
    #[error("the region has no backing file to share")]
    NotAFile,
    /// The region is being unmapped.
    #[error("the region is being unmapped")]
    Closed,
    /// A system call failed.
    #[error("{call} failed")]
    Sys {
        /// The call.
        call: &'static str,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// Attempts at dropping every frame before sharing gives up: faults are
/// held meanwhile, so only the pool's or a reader's late work can refill one.
const ATTEMPTS: usize = 8;

/// A region's sharing state.
pub struct Sharing {
    mode: AtomicU8,
    /// Switches, flushes while shared, and pins while shared, one at a time.
    switch: Mutex<Switch>,
    /// In a child: the lease it inherited (-1: none), closed when its
    /// handle closes.
    child_lease: AtomicI32,
    /// The userfaultfd modes the view is registered with.
    uffd_mode: u64,
    /// The backing file's path (file regions), for handles.
    path: Option<std::path::PathBuf>,
}

struct Switch {
    /// The region is being unmapped: never switched again.
    closed: bool,
    /// Made at the first share.
    lease: Option<Lease>,
    /// Pinned pages, kept while shared and pinned again at resume.
    pins: Vec<u32>,
}

impl Sharing {
    /// A region paged by the pager, registered with `uffd_mode`, backed
    /// by the file at `path` if any.
    pub fn new(uffd_mode: u64, path: Option<std::path::PathBuf>) -> Sharing {
        Sharing {
            mode: AtomicU8::new(Mode::Paging as u8),
            switch: Mutex::new(Switch {
                closed: false,
                lease: None,
                pins: Vec::new(),
            }),
            child_lease: AtomicI32::new(-1),
            uffd_mode,
            path,
        }
    }

    /// The backing file's path, for a file region.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        match self.mode.load(SeqCst) {
            0 => Mode::Paging,
            1 => Mode::Entering,
            2 => Mode::Shared,
            _ => Mode::Resuming,
        }
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, SeqCst);
    }

    fn switch(&self) -> MutexGuard<'_, Switch> {
        self.switch.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The region is being unmapped: a switch under way ends first, and
    /// none starts after (a resume would map the view again).
    pub fn close(&self) {
        let mut sw = self.switch();
        sw.closed = true;
        // A handle not opened yet may still be: it must find the lease
        // file, told the region is gone (its file is all there is).
        if let Some(lease) = sw.lease.take().filter(Lease::has_pending) {
            let _ = lease.set_state(lease::State::Closed);
            orphans().push(lease);
        }
    }

    /// In a child after `fork` (the only thread): keeps the lease the
    /// parent granted it for this region.
    pub fn keep_in_child(&self, lease: RawFd) {
        self.child_lease.store(lease, SeqCst);
    }

    /// In a child: lets its lease go (the region's handle is closed).
    pub fn release_in_child(&self) {
        let fd = self.child_lease.swap(-1, SeqCst);
        if fd >= 0 {
            // SAFETY: the descriptor inherited at the fork, owned by this
            // region's state in the child and closed only here (swapped out).
            drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        }
    }
}

/// Lease files of unmapped regions with grants not claimed yet.
static ORPHANS: Mutex<Vec<Lease>> = Mutex::new(Vec::new());

fn orphans() -> MutexGuard<'static, Vec<Lease>> {
    ORPHANS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets go the lease files of unmapped regions whose grants are all claimed.
pub fn forget_claimed_orphans() {
    orphans().retain(Lease::has_pending);
}

/// What a fault finds when it takes the region's lock.
pub enum Admit<'a> {
    /// The pager serves it.
    Serve(crate::lock::Locked<'a>),
    /// The region is the file's mapping now: the thread retries there.
    Retry,
}

/// Lets a fault be served only while the pager pages the region; during a
/// switch it waits for the switch's end.
pub fn admit<'a>(sh: &'a Shared, mut g: crate::lock::Locked<'a>, addr: usize) -> Admit<'a> {
    loop {
        match sh.sharing().mode() {
            Mode::Paging => return Admit::Serve(g),
            Mode::Shared => {
                // Raised before the file was mapped: woken by `share`
                // already, or about to be (an event read late).
                let _ = sh.views().uffd().wake(addr & !(PAGE - 1), PAGE);
                return Admit::Retry;
            }
            Mode::Entering | Mode::Resuming => g = sh.wait(g),
        }
    }
}

/// How long a switch sleeps between its checks that no page is in a
/// transition: the ring's windows need reaping, by the switch itself.
const QUIESCE_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// Waits until no page is being read in, evicted or written back; returns
/// the lock. Windows read ahead on the ring are completed here: the
/// threads that would reap them wait for the switch (`admit`).
fn quiesce(sh: &Shared) -> crate::lock::Locked<'_> {
    loop {
        fault::drain_windows(sh);
        let g = sh.lock();
        let busy = g.table.held_pages().into_iter().any(|s| {
            matches!(g.table.state(s), State::Loading | State::Evicting)
                || g.table.flags(s) & FLUSHING != 0
        });
        if !busy {
            return g;
        }
        drop(sh.frames().wait_timeout(g, QUIESCE_POLL));
    }
}

/// Makes `sh` the kernel's mapping of its file (see the module's text) and
/// grants a lease: the descriptor returned, for a child to inherit.
/// Already shared: only the lease. On error the region is paged as before.
pub fn share(sh: &Shared) -> Result<OwnedFd, ShareError> {
    share_with(sh, Lease::grant)
}

/// Grants a lease to a handle another process will claim (a pickled
/// region), sharing the region first: the ticket that process claims.
pub fn share_pending(sh: &Shared) -> Result<Ticket, ShareError> {
    share_with(sh, Lease::grant_pending)
}

/// Shares the region if it is not yet, then grants a lease with `grant`.
fn share_with<T>(
    sh: &Shared,
    grant: impl FnOnce(&Lease) -> std::io::Result<T>,
) -> Result<T, ShareError> {
    let sys_err = |call| move |source| ShareError::Sys { call, source };
    let mut sw = switch_open(sh)?;
    if sw.lease.is_none() {
        sw.lease = Some(Lease::new().map_err(sys_err("lease memfd"))?);
    }
    if sh.sharing().mode() != Mode::Shared {
        enter(sh, &mut sw)?;
        crate::lifecycle::watch_closely();
    }
    let lease = sw.lease.as_ref().expect("made above");
    lease
        .set_state(lease::State::Shared)
        .map_err(sys_err("lease"))?;
    grant(lease).map_err(sys_err("lease"))
}

/// The switch, unless the region is being unmapped.
fn switch_open(sh: &Shared) -> Result<MutexGuard<'_, Switch>, ShareError> {
    let sw = sh.sharing().switch();
    if sw.closed {
        return Err(ShareError::Closed);
    }
    Ok(sw)
}

fn enter(sh: &Shared, sw: &mut Switch) -> Result<(), ShareError> {
    let Some(file) = sh.store().file() else {
        return Err(ShareError::NotAFile);
    };
    // Most of the write-back while faults are still served.
    sh.write_back(None).map_err(ShareError::WriteBack)?;
    fault::settle(sh);
    {
        let _g = sh.lock();
        sh.sharing().set(Mode::Entering);
    }
    let pinned = {
        let g = quiesce(sh);
        let mut pinned: Vec<u32> = g
            .table
            .held_pages()
            .into_iter()
            .filter(|&s| g.table.state(s) == State::Locked)
            .collect();
        pinned.sort_unstable();
        pinned
    };
    for (first, n) in crate::evict::runs(pinned.iter().copied()) {
        let _ = sh.unpin(first, first + n as u32);
    }
    let mut left = 0;
    for _ in 0..ATTEMPTS {
        if let Err(e) = sh.write_back(None) {
            abort(sh, &pinned);
            return Err(ShareError::WriteBack(e));
        }
        fault::settle(sh);
        sh.drop_clean();
        let g = quiesce(sh);
        left = g.table.held();
        if left != 0 {
            continue;
        }
        // SAFETY: the application's view of this region, replaced in one
        // call by the file it pages, with every page of it in the file
        // (written back above; stores wait on write-protection meanwhile).
        let mapped = unsafe {
            sys::map_shared_at(
                sh.views().app(),
                file,
                sh.views().map_len(),
                sh.views().writable(),
            )
        };
        if let Err(source) = mapped {
            drop(g);
            abort(sh, &pinned);
            return Err(ShareError::Sys {
                call: "mmap",
                source,
            });
        }
        sh.sharing().set(Mode::Shared);
        crate::stats::Counters::add(&sh.stats().shares, 1);
        sw.pins = pinned;
        drop(g);
        // Every thread waiting for a fault of the old view retries on the
        // file's (the range is no longer registered: nothing else wakes them).
        sh.views().wake_all();
        sh.frames().notify_all();
        return Ok(());
    }
    abort(sh, &pinned);
    Err(ShareError::Busy(left))
}

/// Pages the region again after a failed `enter`.
fn abort(sh: &Shared, pinned: &[u32]) {
    {
        let _g = sh.lock();
        sh.sharing().set(Mode::Paging);
    }
    sh.views().wake_all();
    sh.frames().notify_all();
    repin(sh, pinned);
}

fn repin(sh: &Shared, pinned: &[u32]) {
    for (first, n) in crate::evict::runs(pinned.iter().copied()) {
        if let Err(e) = sh.pin(first, first + n as u32) {
            eprintln!(
                "pagepilot: region at {:#x}: pages {first}..{} could not be pinned again: {}",
                sh.views().app(),
                first + n as u32,
                pagepilot_policy::chain(&e)
            );
        }
    }
}

/// Pages a shared region under its policy again if no other process
/// holds its lease. Returns whether it did.
pub fn resume(sh: &Shared) -> bool {
    let mut sw = sh.sharing().switch();
    if sw.closed || sh.sharing().mode() != Mode::Shared {
        return false;
    }
    let Some(lease) = sw.lease.as_ref() else {
        return false;
    };
    // A process claiming a pending lease locks, then reads the state: told
    // `Paged` first, and checked again after, it cannot slip in between.
    if lease.held() || lease.set_state(lease::State::Paged).is_err() {
        return false;
    }
    if lease.held() {
        let _ = lease.set_state(lease::State::Shared);
        return false;
    }
    // The file's pages the kernel cached while shared would sit beside the
    // frames paged in again, in one memory cgroup: written now (the view is
    // still the file's mapping), dropped once it is not.
    let _ = sys::msync(sh.views().app(), sh.views().map_len());
    let memfd = sh.views().memfd().as_raw_fd();
    let g = sh.lock();
    if g.table.held() != 0 {
        // Frames a shared region should not have: cutting the memfd would
        // lose them. Never seen; stays shared, which is safe.
        eprintln!(
            "pagepilot: region at {:#x} stays shared: {} page(s) held while shared",
            sh.views().app(),
            g.table.held()
        );
        return false;
    }
    let Some(held) = sigbus::hold(sh.views().app(), sh.views().map_len()) else {
        return false;
    };
    if let Err(e) = sys::set_len(memfd, 0) {
        eprintln!(
            "pagepilot: region at {:#x} stays shared: ftruncate: {e}",
            sh.views().app()
        );
        sigbus::release(held);
        return false;
    }
    sh.sharing().set(Mode::Resuming);
    // SAFETY: the application's view, replaced in one call by the region's
    // memfd; an access before its registration finds the memfd empty and
    // raises SIGBUS, which `sigbus::hold` makes wait.
    let resumed = unsafe {
        sys::map_shared_at(
            sh.views().app(),
            memfd,
            sh.views().map_len(),
            sh.views().writable(),
        )
    }
    .and_then(|()| sys::dont_fork(sh.views().app(), sh.views().map_len()))
    .and_then(|()| {
        sh.views().uffd().register(
            sh.views().app(),
            sh.views().map_len(),
            sh.sharing().uffd_mode,
        )
    })
    .and_then(|_| sys::set_len(memfd, sh.views().map_len()));
    let resumed = match resumed {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "pagepilot: region at {:#x} stays shared: {}",
                sh.views().app(),
                pagepilot_policy::chain(&e)
            );
            let file = sh.store().file().unwrap_or(-1);
            // SAFETY: as above, the file mapped back in the view's place.
            if let Err(e) = unsafe {
                sys::map_shared_at(
                    sh.views().app(),
                    file,
                    sh.views().map_len(),
                    sh.views().writable(),
                )
            } {
                eprintln!(
                    "pagepilot: region at {:#x} is lost: mmap: {e}",
                    sh.views().app()
                );
            }
            false
        }
    };
    sh.sharing()
        .set(if resumed { Mode::Paging } else { Mode::Shared });
    sigbus::release(held);
    drop(g);
    sh.frames().notify_all();
    if resumed {
        if let Some(file) = sh.store().file() {
            let _ = sys::drop_cached(file);
        }
        let pins = std::mem::take(&mut sw.pins);
        drop(sw);
        repin(sh, &pins);
        // Counted once the region is whole again, its pins made.
        crate::stats::Counters::add(&sh.stats().resumes, 1);
    }
    resumed
}

/// While shared: the kernel's mapping is written back by `msync`. `None`
/// when the pager pages the region (its own flush applies).
pub fn flush_if_shared(sh: &Shared) -> Option<Result<(), FlushError>> {
    if sh.sharing().mode() == Mode::Paging {
        return None;
    }
    let _sw = sh.sharing().switch();
    (sh.sharing().mode() == Mode::Shared)
        .then(|| sys::msync(sh.views().app(), sh.views().map_len()).map_err(FlushError::Sync))
}

/// While shared, pins and unpins change the record pinned again at
/// resume. `None` when the pager pages the region.
pub fn pin_if_shared(sh: &Shared, first: u32, end: u32, pin: bool) -> Option<()> {
    if sh.sharing().mode() == Mode::Paging {
        return None;
    }
    // A switch under way ends first.
    let mut sw = sh.sharing().switch();
    if sh.sharing().mode() != Mode::Shared {
        return None;
    }
    sw.pins.retain(|p| !(first..end).contains(p));
    if pin {
        sw.pins.extend(first..end);
        sw.pins.sort_unstable();
    }
    Some(())
}
