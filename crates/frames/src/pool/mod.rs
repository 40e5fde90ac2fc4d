//! HiPEC's global frame manager (section 4, "Global Frame Manager"): one
//! pool of frames, holders that draw from it with a guaranteed minimum, and
//! reclamation of what they hold above it.
//!
//! - Allocation: a holder registers with `minFrame`; it is refused when the
//!   pool cannot hold it beside the other holders' minimums. Frames beyond
//!   the minimum are asked for with `Request` and granted from free frames,
//!   partially when fewer are free.
//! - Balance: when the frames held above their minimums pass the
//!   `partition_burst` watermark (HiPEC: half the pool), the excess is
//!   reclaimed.
//! - Reclamation: FAFR, first allocated first reclaimed: holders in the
//!   order they registered, each asked for what it holds above its minimum
//!   ([`Reclaim`], its policy's `ReclaimFrame` event) by a deadline; what is
//!   not given back in time is reclaimed by force ([`FrameManager::overdue`]:
//!   the engine evicts pages its fallback chooses), and counted.
//!
//! The manager only counts frames; which pages leave, and their write-back,
//! are the engine's (HiPEC's flusher).
//!
//! Cost: a root daemon runs it for hostile local users, so no operation
//! walks all holders or all orders. Running totals replace the sums
//! (`ledger.rs`); FAFR walks an ordered set of the holders with frames left
//! to ask, each holder visited either asked in full (it leaves the set) or
//! the last; settling walks the set of holders owed frames the same way;
//! orders are kept per holder and indexed by deadline (`orders.rs`). Each
//! operation is O(log n) in live holders, plus O(log n) per order it
//! creates, answers or forces, plus O(1) amortised per holder it settles.

mod ledger;
mod orders;
mod types;

#[cfg(test)]
mod check;
#[cfg(test)]
mod cost;
#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

pub use types::{FrameError, HolderId, HolderStats, Overdue, Reclaim};

use crate::Clock;
use ledger::{Holder, Ledger};
use orders::{Deadlines, Order};

/// The global frame manager.
#[derive(Debug)]
pub struct FrameManager<C: Clock> {
    clock: C,
    total: usize,
    free: usize,
    burst: usize,
    deadline_ns: u64,
    /// The live holders by id, ids given in registration order and never
    /// reused: the container list FAFR follows, its size that of the live
    /// holders however many came and went; with their totals and sets.
    holders: Ledger,
    /// The next holder's id.
    next_id: u32,
    /// Every pending order by deadline.
    deadlines: Deadlines,
    /// The next order's creation number.
    next_seq: u64,
    /// Holders and orders looked at, for the cost tests.
    steps: Steps,
}

/// How long a holder has to give frames back by default.
const DEADLINE_NS: u64 = 10_000_000;

impl<C: Clock> FrameManager<C> {
    /// A pool of `total` frames, `partition_burst` half of it (HiPEC's
    /// choice), holders given 10 ms to give frames back.
    pub fn new(total: usize, clock: C) -> Result<Self, FrameError> {
        if total == 0 {
            return Err(FrameError::EmptyPool);
        }
        Ok(FrameManager {
            clock,
            total,
            free: total,
            burst: total / 2,
            deadline_ns: DEADLINE_NS,
            holders: Ledger::default(),
            next_id: 0,
            deadlines: Deadlines::new(),
            next_seq: 0,
            steps: Steps::default(),
        })
    }

    /// Sets the `partition_burst` watermark: frames held above minimums.
    pub fn with_partition_burst(mut self, frames: usize) -> Self {
        self.burst = frames;
        self
    }

    /// Changes the `partition_burst` watermark of a running pool.
    pub fn set_partition_burst(&mut self, frames: usize) {
        self.burst = frames;
    }

    /// The `partition_burst` watermark in force.
    pub fn partition_burst(&self) -> usize {
        self.burst
    }

    /// Sets how long a holder has to give frames back.
    pub fn with_deadline_ns(mut self, ns: u64) -> Self {
        self.deadline_ns = ns;
        self
    }

    /// Changes how long a holder has to give frames back, for reclamations
    /// asked from now on.
    pub fn set_deadline_ns(&mut self, ns: u64) {
        self.deadline_ns = ns;
    }

    /// Frames in the pool.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Frames no holder holds.
    pub fn free(&self) -> usize {
        self.free
    }

    /// Frames the holders hold together (`total - free`), O(1).
    pub fn held(&self) -> usize {
        self.total - self.free
    }

    /// Reclamations asked and not completed yet, in the order they were
    /// asked, each with the frames it still asks for.
    ///
    /// Built on demand: O(p log p) in the orders pending. Use
    /// [`asked_of`](Self::asked_of) and
    /// [`next_deadline_ns`](Self::next_deadline_ns) on hot paths.
    pub fn pending(&self) -> Vec<Reclaim> {
        let mut all: Vec<(u64, Reclaim)> = self
            .deadlines
            .iter()
            .filter_map(|&(deadline_ns, seq, id)| {
                let frames = self.holders.get(id)?.orders.frames_of(seq);
                let r = Reclaim {
                    holder: HolderId(id),
                    frames,
                    deadline_ns,
                };
                Some((seq, r))
            })
            .collect();
        all.sort_unstable_by_key(|&(seq, _)| seq);
        all.into_iter().map(|(_, r)| r).collect()
    }

    /// Frames asked of `id` and not returned yet (what its pending orders
    /// still ask together); 0 for a holder not live. O(log n).
    pub fn asked_of(&self, id: HolderId) -> usize {
        self.holders.get(id.0).map_or(0, |h| h.orders.asked())
    }

    /// The earliest deadline of the orders pending, clock nanoseconds;
    /// `None` when none is. O(log p).
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.deadlines
            .first()
            .map(|&(deadline_ns, _, _)| deadline_ns)
    }

    /// The holders still short of their minimum and owed frames to reach
    /// it (registered while the pool had too few free; frames go to them as
    /// they come free), in registration order, with what each holds now.
    /// O(k) in their number.
    ///
    /// A holder that gave frames back below its own minimum (`release`,
    /// or returning more than asked) is not owed them and is not listed.
    pub fn short_of_minimum(&self) -> impl Iterator<Item = (HolderId, usize)> + '_ {
        self.holders
            .owed()
            .map(|(id, h)| (HolderId(id), h.stats.held))
    }

    /// What `id` holds, and its history.
    pub fn stats(&self, id: HolderId) -> Result<&HolderStats, FrameError> {
        self.holders
            .get(id.0)
            .map(|h| &h.stats)
            .ok_or(FrameError::UnknownHolder(id))
    }

    /// Registers a holder guaranteed `min` frames (HiPEC's Allocation). What
    /// free frames cannot cover is reclaimed from the others' frames above
    /// their minimums and given to it as they come back. Returns the holder
    /// and the reclamations that asks for.
    pub fn register(&mut self, min: usize) -> Result<(HolderId, Vec<Reclaim>), FrameError> {
        let reserved = self.holders.reserved();
        if min > self.total - reserved {
            return Err(FrameError::MinDoesNotFit {
                asked: min,
                total: self.total,
                reserved,
            });
        }
        let id = HolderId(self.next_id);
        self.next_id = self
            .next_id
            .checked_add(1)
            .ok_or(FrameError::IdsExhausted)?;
        let grant = min.min(self.free);
        self.free -= grant;
        self.holders.insert(id.0, Holder::new(min, grant));
        let orders = self.ask_back((min - grant).saturating_sub(self.holders.asked_back()));
        Ok((id, orders))
    }

    /// Removes holder `id`; its frames return to the pool. Returns how many.
    pub fn unregister(&mut self, id: HolderId) -> Result<usize, FrameError> {
        let mut h = self
            .holders
            .remove(id.0)
            .ok_or(FrameError::UnknownHolder(id))?;
        let orders = h.orders.forget(id.0, &mut self.deadlines);
        self.steps.add(orders);
        self.free += h.stats.held;
        self.settle();
        Ok(h.stats.held)
    }

    /// `Request(n)`: grants up to `n` free frames (fewer if fewer are free),
    /// then balances. Returns the frames granted and any reclamations the
    /// balance asks for.
    pub fn request(&mut self, id: HolderId, n: usize) -> Result<(usize, Vec<Reclaim>), FrameError> {
        let grant = n.min(self.free);
        self.holders
            .change(id.0, |h| {
                h.stats.requested += n as u64;
                h.stats.granted += grant as u64;
                h.stats.held += grant;
            })
            .ok_or(FrameError::UnknownHolder(id))?;
        self.free -= grant;
        Ok((grant, self.balance()))
    }

    /// `Release(n)`: `id` gives back up to `n` frames. Returns how many.
    pub fn release(&mut self, id: HolderId, n: usize) -> Result<usize, FrameError> {
        let n = self
            .holders
            .change(id.0, |h| {
                let n = n.min(h.stats.held);
                h.stats.held -= n;
                h.stats.released += n as u64;
                n
            })
            .ok_or(FrameError::UnknownHolder(id))?;
        self.free += n;
        self.settle();
        Ok(n)
    }

    /// HiPEC's Balance: when the frames held above minimums, less those
    /// already asked back, pass `partition_burst`, asks the excess back.
    pub fn balance(&mut self) -> Vec<Reclaim> {
        let excess = self
            .holders
            .above()
            .saturating_sub(self.holders.asked_back())
            .saturating_sub(self.burst);
        self.ask_back(excess)
    }

    /// Asks `need` frames back, FAFR: holders in registration order, each
    /// for what it holds above its minimum and was not asked for yet.
    fn ask_back(&mut self, mut need: usize) -> Vec<Reclaim> {
        let deadline_ns = self.clock.now_ns().saturating_add(self.deadline_ns);
        let mut orders = Vec::new();
        // Each holder visited is asked all its spare frames (and leaves the
        // set) or what is left of `need` (and ends the walk).
        while need > 0 {
            let Some(id) = self.holders.first_spare() else {
                break;
            };
            self.steps.add(1);
            let seq = self.next_seq;
            let deadlines = &mut self.deadlines;
            let Some(frames) = self.holders.change(id, |h| {
                let frames = h.spare().min(need);
                let order = Order {
                    seq,
                    deadline_ns,
                    frames,
                };
                h.orders.push(id, order, deadlines);
                frames
            }) else {
                break; // the set holds live holders only
            };
            self.next_seq += 1;
            need -= frames;
            orders.push(Reclaim {
                holder: HolderId(id),
                frames,
                deadline_ns,
            });
        }
        orders
    }

    /// `id` gave back `n` frames it was asked for (its `ReclaimFrame` ran).
    pub fn returned(&mut self, id: HolderId, n: usize) -> Result<(), FrameError> {
        let deadlines = &mut self.deadlines;
        let (n, visited) = self
            .holders
            .change(id.0, |h| {
                let n = n.min(h.stats.held);
                h.stats.held -= n;
                h.stats.reclaimed += n as u64;
                (n, h.orders.answer(id.0, n, deadlines))
            })
            .ok_or(FrameError::UnknownHolder(id))?;
        self.steps.add(visited);
        self.free += n;
        self.settle();
        Ok(())
    }

    /// The reclamations whose deadline has passed: their frames are taken
    /// by force now (the engine must evict that many of the holder's pages,
    /// chosen by its fallback policy) and the incident counted. Oldest
    /// first, each late order once.
    pub fn overdue(&mut self) -> Vec<Reclaim> {
        self.force_overdue().late
    }

    /// [`overdue`](Self::overdue), with the frames taken from each holder.
    /// O(log n) per late order.
    pub fn force_overdue(&mut self) -> Overdue {
        let now = self.clock.now_ns();
        let mut late: Vec<(u64, u32, u64)> = Vec::new();
        while let Some(&(deadline_ns, seq, id)) = self.deadlines.first() {
            if deadline_ns > now {
                break;
            }
            self.deadlines.pop_first();
            late.push((seq, id, deadline_ns));
        }
        // Oldest first, as the orders were asked.
        late.sort_unstable();
        self.steps.add(late.len());
        let mut out = Overdue::default();
        // Where each holder is in `out.forced`.
        let mut slot: BTreeMap<u32, usize> = BTreeMap::new();
        for (seq, id, deadline_ns) in late {
            let taken = self.holders.change(id, |h| {
                let frames = h.orders.force(seq);
                let n = frames.min(h.stats.held);
                h.stats.held -= n;
                h.stats.forced += n as u64;
                h.stats.forced_incidents += 1;
                (frames, n)
            });
            // Every indexed order is a live holder's (unregister unindexes).
            let Some((frames, n)) = taken else { continue };
            self.free += n;
            let holder = HolderId(id);
            out.late.push(Reclaim {
                holder,
                frames,
                deadline_ns,
            });
            match slot.entry(id) {
                Entry::Occupied(i) => out.forced[*i.get()].1 += n,
                Entry::Vacant(v) => {
                    v.insert(out.forced.len());
                    out.forced.push((holder, n));
                }
            }
        }
        self.settle();
        out
    }

    /// Gives free frames to the holders still below their minimum, in
    /// registration order.
    fn settle(&mut self) {
        // Each holder visited is settled in full (and leaves the set) or
        // takes the last free frame (and ends the walk).
        while self.free > 0 {
            let Some(id) = self.holders.first_owed() else {
                break;
            };
            self.steps.add(1);
            let free = self.free;
            let Some(give) = self.holders.change(id, |h| {
                let give = h.owed.min(free);
                h.owed -= give;
                h.stats.held += give;
                give
            }) else {
                break; // the set holds live holders only
            };
            self.free -= give;
        }
    }
}

/// A count of the holders and orders the manager looked at, kept in tests
/// only: the cost tests assert counts, not times.
#[derive(Debug, Default)]
struct Steps(#[cfg(test)] u64);

impl Steps {
    #[inline]
    fn add(&mut self, _n: usize) {
        #[cfg(test)]
        {
            self.0 += _n as u64;
        }
    }
}
