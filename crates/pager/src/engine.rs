//! The state one region's handlers share: the frame table and the policy
//! under one lock, waiting for pages in transition, the two views'
//! addresses. Eviction and write-back are in `evict`.
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

use pagepilot_policy::FaultKind;

use crate::frame_table::{FrameTable, State};
use crate::lock::{Locked, RegionLock};
use crate::policy_port::PolicyPort;
use crate::stats::Counters;
use crate::sys;
use pagepilot_dataspace::PageStore;

/// Read-ahead tuning.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Pages read per fault outside a sequence (0: sized by use, `around`).
    pub fault_around: usize,
    /// Largest read-ahead window along a sequence of faults, pages.
    pub readahead_max: usize,
    /// Largest cluster of zero-filled pages along a stream of first touches.
    pub zero_around_max: usize,
    /// Whether sequential faults start asynchronous read-ahead of the next window.
    pub async_readahead: bool,
    /// Prefetched windows kept ahead of the application (reads in flight).
    pub readahead_depth: usize,
    /// Who reads a missing fault's pages: the handler that took the fault,
    /// or a reader thread (the handler going on with the next fault).
    pub fault_reads: FaultReads,
    /// How long a handler keeps polling after a fault before it sleeps, us.
    pub spin_us: u64,
    /// A policy program: the pool's normal reclamation runs only its
    /// ReclaimFrame event (HiPEC); a built-in's victim choice is its own.
    pub reclaim_event_only: bool,
}

/// Who reads a missing fault's pages in handler-thread service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultReads {
    /// The handler that took the fault (the faulting thread in its own
    /// service).
    Handler,
    /// Always a reader thread (`RegionOptions::reader_threads`).
    Readers,
    /// A reader thread when other faults wait in the same batch of events
    /// (several application threads faulting at once: their reads go in
    /// flight together, as each thread's own would under the kernel); the
    /// handler itself otherwise, so a lone thread pays no extra hand-off.
    ReadersWhenQueued,
}

/// Who asked for pages to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A missing fault on one of the pages.
    Fault {
        /// The faulting page.
        page: u32,
        /// The fault was a write.
        write: bool,
        /// A page of the cluster is left unmapped as a probe of its use
        /// (`around`).
        probe: bool,
    },
    /// Asynchronous read-ahead with its ticket (the order in which it is
    /// accounted): the first page is left unmapped as the marker whose
    /// first touch asks for the next window.
    Prefetch(u64),
    /// A piece of a missing fault's read-around cluster read beside the
    /// faulting page's piece (`fault::load`): handed to the policy and
    /// mapped like the fault's own cluster, with no faulting page.
    Around {
        /// The piece's last page stays unmapped as the cluster's probe.
        probe: bool,
    },
}

impl Cause {
    /// A prefetched window's ticket.
    pub fn ticket(self) -> Option<u64> {
        match self {
            Cause::Prefetch(t) => Some(t),
            Cause::Fault { .. } | Cause::Around { .. } => None,
        }
    }
}

/// Pages for a reader thread to read: a prefetched window, or a missing
/// fault's cluster. The pages are `Loading` and the victims making room for
/// them were chosen when the job was issued.
pub struct ReadJob {
    /// First page.
    pub first: u32,
    /// Pages.
    pub pages: usize,
    /// Why they are read.
    pub cause: Cause,
    /// Victims chosen for it (`Evicting`), and whether each is dirty.
    pub victims: Vec<(u32, bool)>,
}

/// Pages brought in by the last missing faults that a page evicted as
/// recently may not evict in turn (`Shared::guard_refault`): more than the
/// pages one instruction or a `memcpy`'s interleaved loads touch at once.
pub const RECENT_FAULTS: usize = 8;

/// What the lock guards.
pub struct Inner {
    /// The frame table (the policy's [`pagepilot_policy::Memory`]).
    pub table: FrameTable,
    /// The region's policy.
    pub policy: PolicyPort,
    /// The read-ahead planner: the sequences of faults followed, their
    /// windows, read-around sized by use.
    pub readahead: crate::readahead::ReadAhead,
    /// The faulting pages of the last missing faults, most recent first
    /// (`RECENT_FAULTS`; `u32::MAX`: none).
    pub recent_faults: [u32; RECENT_FAULTS],
    /// The prefetched windows: in flight, then pending until entered.
    pub prefetch: crate::prefetch::Prefetches,
    /// The region's reader threads, if it has any.
    pub readers: Option<std::sync::mpsc::Sender<ReadJob>>,
    /// Eviction notifications, if a subscriber turned them on (`evictions`).
    pub evictions: Option<crate::evictions::EvictionQueue>,
}

impl Inner {
    /// Tells the policy of a fault on page `s`.
    pub fn tell_fault(&mut self, s: u32, kind: FaultKind, write: bool) {
        self.policy.fault(&mut self.table, s, kind, write);
    }

    /// Takes resident page `s` from the policy to be evicted: it becomes
    /// `Evicting` and the policy forgets it. Returns the victim and whether
    /// it must be written back.
    pub fn give_up(&mut self, s: u32) -> (u32, bool) {
        let dirty = self.table.begin_eviction(s);
        self.policy.forget_page(&mut self.table, s);
        (s, dirty)
    }
}

/// Everything a region's handlers share.
pub struct Shared {
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
            if self.child_view.load(SeqCst) {
                // SAFETY: the child's mapping of the file, made in its place
                // by `lifecycle` and used by nothing once the region is gone.
                unsafe { sys::unmap(self.views.app(), self.views.map_len()) };
            }
            return;
        }
        // SAFETY: both views were mapped by this region and nothing uses them
        // once the last reference to the shared state is gone.
        unsafe {
            sys::unmap(self.views.app(), self.views.map_len());
            sys::unmap(self.views.pager(), self.views.map_len());
        }
    }
}

impl Shared {
    /// Locks the table and policy (`crate::lock`).
    pub fn lock(&self) -> Locked<'_> {
        self.frames.lock()
    }

    /// Waits until page `s` is in no transition state.
    pub fn wait_stable<'a>(&'a self, mut g: Locked<'a>, s: u32) -> Locked<'a> {
        while matches!(g.table.state(s), State::Loading | State::Evicting) {
            g = self.wait(g);
        }
        g
    }

    /// Lets the lock go and waits for the next notification.
    pub fn wait<'a>(&'a self, g: Locked<'a>) -> Locked<'a> {
        self.frames.wait(g)
    }

    /// Wakes the threads waiting for a change not made through the frame
    /// table (whose transitions wake them when the lock is let go).
    pub fn notify(&self) {
        self.frames.notify();
    }

    /// Whether this process is not the one that mapped the region (a child
    /// after `fork`): its faults are not served here.
    pub fn forked(&self) -> bool {
        std::process::id() != self.owner
    }
}
