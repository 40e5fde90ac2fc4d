//! The frame manager as it was before its totals and indexes: every
//! operation walks the holders and the pending orders. Slow (cubic reclaim)
//! but plainly right, it is the reference the manager is checked against.

use std::collections::BTreeMap;

use super::{FrameError, HolderId, HolderStats, Reclaim, DEADLINE_NS};
use crate::Clock;

#[derive(Debug)]
struct Holder {
    stats: HolderStats,
    /// Frames still due to reach its minimum (given as they come free).
    owed: usize,
}

/// The global frame manager.
#[derive(Debug)]
pub(super) struct Model<C: Clock> {
    clock: C,
    total: usize,
    free: usize,
    burst: usize,
    deadline_ns: u64,
    /// The live holders by id, ids given in registration order and never
    /// reused: the container list FAFR follows, its size that of the live
    /// holders however many came and went.
    holders: BTreeMap<u32, Holder>,
    /// The next holder's id.
    next_id: u32,
    pending: Vec<Reclaim>,
}

impl<C: Clock> Model<C> {
    /// A pool of `total` frames, `partition_burst` half of it (HiPEC's
    /// choice), holders given 10 ms to give frames back.
    pub fn new(total: usize, clock: C) -> Result<Self, FrameError> {
        if total == 0 {
            return Err(FrameError::EmptyPool);
        }
        Ok(Model {
            clock,
            total,
            free: total,
            burst: total / 2,
            deadline_ns: DEADLINE_NS,
            holders: BTreeMap::new(),
            next_id: 0,
            pending: Vec::new(),
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

    /// Frames no holder holds.
    pub fn free(&self) -> usize {
        self.free
    }

    /// Reclamations asked and not completed yet.
    pub fn pending(&self) -> &[Reclaim] {
        &self.pending
    }

    /// What `id` holds, and its history.
    pub fn stats(&self, id: HolderId) -> Result<&HolderStats, FrameError> {
        self.holder(id).map(|h| &h.stats)
    }

    fn holder(&self, id: HolderId) -> Result<&Holder, FrameError> {
        self.holders.get(&id.0).ok_or(FrameError::UnknownHolder(id))
    }

    fn holder_mut(&mut self, id: HolderId) -> Result<&mut Holder, FrameError> {
        self.holders
            .get_mut(&id.0)
            .ok_or(FrameError::UnknownHolder(id))
    }

    fn live(&self) -> impl Iterator<Item = (HolderId, &Holder)> {
        self.holders.iter().map(|(&i, h)| (HolderId(i), h))
    }

    /// Registers a holder guaranteed `min` frames (HiPEC's Allocation). What
    /// free frames cannot cover is reclaimed from the others' frames above
    /// their minimums and given to it as they come back. Returns the holder
    /// and the reclamations that asks for.
    pub fn register(&mut self, min: usize) -> Result<(HolderId, Vec<Reclaim>), FrameError> {
        let reserved: usize = self.live().map(|(_, h)| h.stats.min).sum();
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
        self.holders.insert(
            id.0,
            Holder {
                stats: HolderStats {
                    min,
                    held: grant,
                    ..HolderStats::default()
                },
                owed: min - grant,
            },
        );
        let orders = self.ask_back((min - grant).saturating_sub(self.asked_back()));
        Ok((id, orders))
    }

    /// Frames already asked back and not returned.
    fn asked_back(&self) -> usize {
        self.pending.iter().map(|r| r.frames).sum()
    }

    /// Removes holder `id`; its frames return to the pool. Returns how many.
    pub fn unregister(&mut self, id: HolderId) -> Result<usize, FrameError> {
        let held = self.holder(id)?.stats.held;
        self.holders.remove(&id.0);
        self.pending.retain(|r| r.holder != id);
        self.free += held;
        self.settle();
        Ok(held)
    }

    /// `Request(n)`: grants up to `n` free frames (fewer if fewer are free),
    /// then balances. Returns the frames granted and any reclamations the
    /// balance asks for.
    pub fn request(&mut self, id: HolderId, n: usize) -> Result<(usize, Vec<Reclaim>), FrameError> {
        let grant = n.min(self.free);
        let h = self.holder_mut(id)?;
        h.stats.requested += n as u64;
        h.stats.granted += grant as u64;
        h.stats.held += grant;
        self.free -= grant;
        Ok((grant, self.balance()))
    }

    /// `Release(n)`: `id` gives back up to `n` frames. Returns how many.
    pub fn release(&mut self, id: HolderId, n: usize) -> Result<usize, FrameError> {
        let h = self.holder_mut(id)?;
        let n = n.min(h.stats.held);
        h.stats.held -= n;
        h.stats.released += n as u64;
        self.free += n;
        self.settle();
        Ok(n)
    }

    /// HiPEC's Balance: when the frames held above minimums, less those
    /// already asked back, pass `partition_burst`, asks the excess back.
    pub fn balance(&mut self) -> Vec<Reclaim> {
        let above: usize = self
            .live()
            .map(|(_, h)| h.stats.held.saturating_sub(h.stats.min))
            .sum();
        let excess = above
            .saturating_sub(self.asked_back())
            .saturating_sub(self.burst);
        self.ask_back(excess)
    }

    /// Asks `need` frames back, FAFR: holders in registration order, each
    /// for what it holds above its minimum and was not asked for yet.
    fn ask_back(&mut self, mut need: usize) -> Vec<Reclaim> {
        let deadline_ns = self.clock.now_ns().saturating_add(self.deadline_ns);
        let mut orders = Vec::new();
        for (id, h) in self.live() {
            if need == 0 {
                break;
            }
            let asked: usize = self
                .pending
                .iter()
                .filter(|r| r.holder == id)
                .map(|r| r.frames)
                .sum();
            let spare = h.stats.held.saturating_sub(h.stats.min + asked);
            let frames = spare.min(need);
            if frames > 0 {
                need -= frames;
                orders.push(Reclaim {
                    holder: id,
                    frames,
                    deadline_ns,
                });
            }
        }
        self.pending.extend_from_slice(&orders);
        orders
    }

    /// `id` gave back `n` frames it was asked for (its `ReclaimFrame` ran).
    pub fn returned(&mut self, id: HolderId, n: usize) -> Result<(), FrameError> {
        let h = self.holder_mut(id)?;
        let n = n.min(h.stats.held);
        h.stats.held -= n;
        h.stats.reclaimed += n as u64;
        self.free += n;
        let mut left = n;
        for r in self.pending.iter_mut().filter(|r| r.holder == id) {
            let done = r.frames.min(left);
            r.frames -= done;
            left -= done;
        }
        self.pending.retain(|r| r.frames > 0);
        self.settle();
        Ok(())
    }

    /// The reclamations whose deadline has passed: their frames are taken
    /// by force now (the engine must evict that many of the holder's pages,
    /// chosen by its fallback policy) and the incident counted.
    pub fn overdue(&mut self) -> Vec<Reclaim> {
        let now = self.clock.now_ns();
        let (late, on_time): (Vec<Reclaim>, Vec<Reclaim>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|r| r.deadline_ns <= now);
        self.pending = on_time;
        for r in &late {
            if let Some(h) = self.holders.get_mut(&r.holder.0) {
                let n = r.frames.min(h.stats.held);
                h.stats.held -= n;
                h.stats.forced += n as u64;
                h.stats.forced_incidents += 1;
                self.free += n;
            }
        }
        self.settle();
        late
    }

    /// The holders still owed frames, in registration order, with what
    /// they hold.
    pub fn owed(&self) -> Vec<(HolderId, usize)> {
        self.live()
            .filter(|(_, h)| h.owed > 0)
            .map(|(id, h)| (id, h.stats.held))
            .collect()
    }

    /// Live holders.
    pub fn len(&self) -> usize {
        self.holders.len()
    }

    /// Gives free frames to the holders still below their minimum, in
    /// registration order.
    fn settle(&mut self) {
        for h in self.holders.values_mut() {
            let give = h.owed.min(self.free);
            h.owed -= give;
            h.stats.held += give;
            self.free -= give;
        }
    }
}
