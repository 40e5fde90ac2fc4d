//! Eviction notifications: the Cache Kernel writes a mapping back to the
//! kernel that owns it with its referenced and modified bits; a region
//! tells a subscriber of each page it evicts, with the page's bits as they
//! were when it was chosen.
//!
//! Off by default: the eviction path then costs one branch. A subscriber
//! ([`Region::subscribe_evictions`]) gets a bounded queue; when it is full
//! the oldest events are dropped and counted, so a subscriber that falls
//! behind learns how many it missed ([`Drained::lost`], and
//! `RegionStats::evictions_lost` in total).
//!
//! Every path that frees a page's frame after it held data reports it:
//! victims of the policy (and the engine's fallback when it overrules the
//! policy), pages given back to a pool or taken by its forced reclamation,
//! a smaller budget ([`Region::set_budget`]), clean pages dropped by
//! [`Region::invalidate`], and pages whose write-back had failed once a
//! flush wrote them and freed their frame. Not reported: pages that were
//! never brought in (a failed read), and the pages still in memory when
//! the region is unmapped.

use std::collections::VecDeque;

use crate::frame_table::REFERENCED;
use crate::region_state::RegionState;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::sys::PAGE;
use crate::Region;

/// One page a region evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// The page's byte offset in the region.
    pub offset: u64,
    /// The page's referenced bit: accessed (mapped in the application's
    /// view) since the policy last cleared it. Pages mapped by a cluster
    /// read around a fault count as referenced; pages read ahead and never
    /// entered do not.
    pub referenced: bool,
    /// Written since its last write-back: its data was written back to the
    /// store before its frame was freed.
    pub modified: bool,
}

/// What one drain of the queue took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Events moved to the caller's vector.
    pub taken: usize,
    /// Events dropped since the previous drain because the queue was full
    /// (the oldest go first).
    pub lost: u64,
}

/// The bounded queue of a region's eviction events, under its lock.
pub struct EvictionQueue {
    events: VecDeque<Eviction>,
    capacity: usize,
    /// Dropped since the last drain.
    lost: u64,
}

impl EvictionQueue {
    fn new(capacity: usize) -> Self {
        EvictionQueue {
            events: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
            lost: 0,
        }
    }

    /// Queues `e`, dropping the oldest event if the queue is full. Returns
    /// whether one was dropped.
    fn push(&mut self, e: Eviction) -> bool {
        let full = self.events.len() >= self.capacity;
        if full {
            self.events.pop_front();
            self.lost += 1;
        }
        self.events.push_back(e);
        full
    }
}

impl Shared {
    /// Turns eviction events on with a queue of `capacity` events (0 turns
    /// them off and drops what is queued). A queue already on keeps its
    /// newest events that fit.
    pub(crate) fn subscribe_evictions(&self, capacity: usize) {
        let mut g = self.lock();
        if capacity == 0 {
            g.evictions = None;
            return;
        }
        let q = g
            .evictions
            .get_or_insert_with(|| EvictionQueue::new(capacity));
        q.capacity = capacity;
        while q.events.len() > capacity {
            q.events.pop_front();
            q.lost += 1;
            Counters::add(&self.stats().evictions_lost, 1);
        }
    }

    /// Moves up to `max` queued events, oldest first, to `out`.
    pub(crate) fn drain_evictions(&self, out: &mut Vec<Eviction>, max: usize) -> Drained {
        let mut g = self.lock();
        let Some(q) = g.evictions.as_mut() else {
            return Drained::default();
        };
        let taken = max.min(q.events.len());
        out.extend(q.events.drain(..taken));
        Drained {
            taken,
            lost: std::mem::take(&mut q.lost),
        }
    }

    /// Page `page` was evicted (it is Absent now): stamps its eviction,
    /// counts it and tells the subscriber, if any. `flags` are its flags
    /// when it was chosen, `modified` whether it was written back.
    pub(crate) fn evicted(&self, g: &mut RegionState, page: u32, flags: u8, modified: bool) {
        self.stamp_eviction(g, page);
        Counters::add(&self.stats().evictions, 1);
        if let Some(q) = g.evictions.as_mut() {
            let e = Eviction {
                offset: page as u64 * PAGE as u64,
                referenced: flags & REFERENCED != 0,
                modified,
            };
            if q.push(e) {
                Counters::add(&self.stats().evictions_lost, 1);
            }
        }
    }
}

impl Region {
    /// Turns on eviction notifications: every page the region evicts from
    /// now on is queued as an [`Eviction`] with its referenced and modified
    /// bits, for [`Region::drain_evictions`]. At most `capacity` events are
    /// kept: when the queue is full the oldest is dropped and counted
    /// ([`Drained::lost`], `RegionStats::evictions_lost`). Calling it again
    /// changes the capacity (keeping the newest events that fit); 0 turns
    /// notifications off. Off by default. In a child after `fork` it does
    /// nothing (the region is the kernel's mapping of the file there).
    pub fn subscribe_evictions(&self, capacity: usize) {
        if !self.shared.forked() {
            self.shared.subscribe_evictions(capacity);
        }
    }

    /// Moves every queued eviction event, oldest first, to `out`; says how
    /// many, and how many were dropped since the previous drain because the
    /// queue was full.
    pub fn drain_evictions(&self, out: &mut Vec<Eviction>) -> Drained {
        self.drain_evictions_up_to(out, usize::MAX)
    }

    /// [`Region::drain_evictions`], taking at most `max` events (the rest
    /// stay queued).
    pub fn drain_evictions_up_to(&self, out: &mut Vec<Eviction>, max: usize) -> Drained {
        if self.shared.forked() {
            return Drained::default();
        }
        self.shared.drain_evictions(out, max)
    }
}
