//! Everything a region's handlers share: its views, its backing store,
//! its state under the lock (`region_state`, `lock`), its statistics and
//! options, and how the region is used across `fork` (`sharing`).
//!
//! Locking: one mutex per region guards the frame table and the policy.
//! System calls that change what the application sees of a page that is
//! not in a transition state (CONTINUE, WRITEPROTECT, zap) are made under
//! it; I/O is not: a page being read in is `Loading`, one being written back
//! and freed is `Evicting`, and a fault on either waits on the region's
//! condition variable until the transition ends.

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Mutex;

use crate::lock::{Locked, RegionLock};
use crate::stats::Counters;
use crate::sys;
use crate::tuning::Tuning;
use pagepilot_dataspace::PageStore;

/// Everything a region's handlers share. Made once when the region is
/// mapped (`Shared::new`) and never replaced: its parts are read through
/// the methods below, and the ones that change keep their own rules
/// (the region's lock, the atomics, `Sharing`).
pub struct Shared {
    /// What the region is made of (private: read through the methods).
    parts: SharedParts,
}

/// What a region is made of when it is mapped: handed to [`Shared::new`],
/// which owns it from then on.
pub struct SharedParts {
    /// The region's fault limit (RAPHA), if it has one.
    pub fault_limit: Option<crate::limit::FaultLimit>,
    /// The application's and the pager's views of the region's memfd.
    pub views: crate::views::Views,
    /// The memfd of the dirty map shared with the daemon (writable file
    /// regions; the table keeps the map, `dirty`).
    pub dirty_memfd: Option<OwnedFd>,
    /// Serialises pin and unpin calls (`pins`): their check of the limit
    /// and their pages' pinning are one step.
    pub pins: Mutex<()>,
    /// The backing store.
    pub store: Box<dyn PageStore>,
    /// The dataspaces attached, by offset in the region.
    pub attached: Vec<crate::backing::Mapped>,
    /// Frame table and policy, under the region's lock.
    pub frames: RegionLock,
    /// Statistics.
    pub stats: Counters,
    /// Read-ahead tuning.
    pub tuning: Tuning,
    /// How the userfaultfd was opened (user-mode-only: the kernel's own
    /// accesses to an unmapped page fail with EFAULT).
    pub uffd_access: crate::sys::UffdAccess,
    /// Stops the handler threads.
    pub stop: OwnedFd,
    /// Evictions so far (a page's eviction stamp is its number in this sequence).
    pub evict_seq: std::sync::atomic::AtomicU64,
    /// The ring prefetched windows are read on, if any (else reader threads).
    pub ring: Option<Mutex<crate::ring::Ring>>,
    /// The process that mapped the region: in another (a child after
    /// `fork`) nothing serves its faults and this state is a stale copy.
    pub owner: u32,
    /// In a child after `fork`: the backing file is mapped in the region's
    /// place (`lifecycle`).
    pub child_view: std::sync::atomic::AtomicBool,
    /// Whether the pager pages the region or other processes share the
    /// kernel's mapping of its file (`sharing`).
    pub sharing: crate::sharing::Sharing,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.forked() {
            if self.child_view().load(SeqCst) {
                // SAFETY: the child's mapping of the file, made in its place
                // by `lifecycle` and used by nothing once the region is gone.
                unsafe { sys::unmap(self.views().app(), self.views().map_len()) };
            }
            return;
        }
        // SAFETY: both views were mapped by this region and nothing uses them
        // once the last reference to the shared state is gone.
        unsafe {
            sys::unmap(self.views().app(), self.views().map_len());
            sys::unmap(self.views().pager(), self.views().map_len());
        }
    }
}

impl Shared {
    /// The shared state of a region made of `parts`.
    pub fn new(parts: SharedParts) -> Self {
        Shared { parts }
    }

    /// The region's fault limit (RAPHA), if it has one.
    pub fn fault_limit(&self) -> Option<&crate::limit::FaultLimit> {
        self.parts.fault_limit.as_ref()
    }

    /// The application's and the pager's views of the region's memfd.
    pub fn views(&self) -> &crate::views::Views {
        &self.parts.views
    }

    /// The memfd of the dirty map shared with the daemon (writable file
    /// regions; the table keeps the map, `dirty`).
    pub fn dirty_memfd(&self) -> Option<&OwnedFd> {
        self.parts.dirty_memfd.as_ref()
    }

    /// Serialises pin and unpin calls (`pins`): their check of the limit
    /// and their pages' pinning are one step.
    pub fn pins(&self) -> &Mutex<()> {
        &self.parts.pins
    }

    /// The backing store.
    pub fn store(&self) -> &dyn PageStore {
        &*self.parts.store
    }

    /// The dataspaces attached, by offset in the region.
    pub fn attached(&self) -> &[crate::backing::Mapped] {
        &self.parts.attached
    }

    /// Frame table and policy, under the region's lock.
    pub fn frames(&self) -> &RegionLock {
        &self.parts.frames
    }

    /// Statistics.
    pub fn stats(&self) -> &Counters {
        &self.parts.stats
    }

    /// Read-ahead tuning.
    pub fn tuning(&self) -> &Tuning {
        &self.parts.tuning
    }

    /// How the userfaultfd was opened (user-mode-only: the kernel's own
    /// accesses to an unmapped page fail with EFAULT).
    pub fn uffd_access(&self) -> crate::sys::UffdAccess {
        self.parts.uffd_access
    }

    /// Stops the handler threads.
    pub fn stop(&self) -> &OwnedFd {
        &self.parts.stop
    }

    /// Evictions so far (a page's eviction stamp is its number in this sequence).
    pub fn evict_seq(&self) -> &std::sync::atomic::AtomicU64 {
        &self.parts.evict_seq
    }

    /// The ring prefetched windows are read on, if any (else reader threads).
    pub fn ring(&self) -> Option<&Mutex<crate::ring::Ring>> {
        self.parts.ring.as_ref()
    }

    /// The process that mapped the region: in another (a child after
    /// `fork`) nothing serves its faults and this state is a stale copy.
    pub fn owner(&self) -> u32 {
        self.parts.owner
    }

    /// In a child after `fork`: the backing file is mapped in the region's
    /// place (`lifecycle`).
    pub fn child_view(&self) -> &std::sync::atomic::AtomicBool {
        &self.parts.child_view
    }

    /// Whether the pager pages the region or other processes share the
    /// kernel's mapping of its file (`sharing`).
    pub fn sharing(&self) -> &crate::sharing::Sharing {
        &self.parts.sharing
    }

    /// Locks the table and policy (`crate::lock`).
    pub fn lock(&self) -> Locked<'_> {
        self.frames().lock()
    }

    /// Lets the lock go and waits for the next notification.
    pub fn wait<'a>(&'a self, g: Locked<'a>) -> Locked<'a> {
        self.frames().wait(g)
    }

    /// Wakes the threads waiting for a change not made through the frame
    /// table (whose transitions wake them when the lock is let go).
    pub fn notify(&self) {
        self.frames().notify();
    }

    /// Whether this process is not the one that mapped the region (a child
    /// after `fork`): its faults are not served here.
    pub fn forked(&self) -> bool {
        std::process::id() != self.owner()
    }
}
