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

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Clock;

/// A holder of frames: a region live, a process in the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HolderId(pub u32);

/// Refusals of the frame manager.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A pool needs at least one frame.
    #[error("a frame pool needs at least one frame")]
    EmptyPool,
    /// The minimum does not fit beside the other holders' minimums.
    #[error(
        "minFrame of {asked} frames does not fit: the pool holds {total} frames, \
         {reserved} of them other holders' minimums"
    )]
    MinDoesNotFit {
        /// The minimum asked for.
        asked: usize,
        /// Frames in the pool.
        total: usize,
        /// The other holders' minimums.
        reserved: usize,
    },
    /// Every holder id was given out (ids are never reused).
    #[error("this frame pool has registered 2^32 holders: no id is left")]
    IdsExhausted,
    /// No such holder (never registered, or gone).
    #[error("no holder {0:?} in this frame pool")]
    UnknownHolder(HolderId),
}

/// Frames asked back from a holder by a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Reclaim {
    /// Who gives them back.
    pub holder: HolderId,
    /// How many (still) to give back.
    pub frames: usize,
    /// When they are taken by force, clock nanoseconds.
    pub deadline_ns: u64,
}

/// What a holder holds and what happened to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HolderStats {
    /// Its guaranteed minimum.
    pub min: usize,
    /// Frames it holds now.
    pub held: usize,
    /// Frames it asked for with `Request`.
    pub requested: u64,
    /// Of those, frames granted.
    pub granted: u64,
    /// Frames it gave back with `Release`.
    pub released: u64,
    /// Frames it gave back when asked (normal reclamation).
    pub reclaimed: u64,
    /// Frames taken from it by force after a deadline passed.
    pub forced: u64,
    /// Reclamations it did not complete in time.
    pub forced_incidents: u64,
}

#[derive(Debug)]
struct Holder {
    stats: HolderStats,
    /// Frames still due to reach its minimum (given as they come free).
    owed: usize,
}

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
    /// holders however many came and went.
    holders: BTreeMap<u32, Holder>,
    /// The next holder's id.
    next_id: u32,
    pending: Vec<Reclaim>,
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
        let deadline_ns = self.clock.now_ns() + self.deadline_ns;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn pool(total: usize, burst: usize) -> FrameManager<ManualClock> {
        FrameManager::new(total, ManualClock::at(0))
            .unwrap()
            .with_partition_burst(burst)
            .with_deadline_ns(1_000)
    }

    #[test]
    fn test_a_minimum_that_does_not_fit_beside_the_others_is_refused_at_the_boundary() {
        let mut p = pool(100, 100);
        p.register(60).unwrap();
        assert!(p.register(40).is_ok());
        assert_eq!(
            p.register(1).unwrap_err(),
            FrameError::MinDoesNotFit {
                asked: 1,
                total: 100,
                reserved: 100
            }
        );
        assert_eq!(
            FrameManager::new(0, ManualClock::at(0)).unwrap_err(),
            FrameError::EmptyPool
        );
    }

    #[test]
    fn test_holders_that_come_and_go_leave_nothing_behind_and_ids_are_not_reused() {
        let mut m = pool(100, 50);
        let (first, _) = m.register(10).unwrap();
        for _ in 0..10_000 {
            let (id, _) = m.register(5).unwrap();
            assert_eq!(m.unregister(id).unwrap(), 5);
        }
        assert_eq!(m.holders.len(), 1, "only the live holder is kept");
        assert_eq!(m.free(), 90);
        // A newcomer gets a fresh id, after the first in FAFR order.
        let (late, _) = m.register(10).unwrap();
        assert!(late > first && late.0 >= 10_001, "{late:?}");
        m.request(first, 40).unwrap();
        let (granted, orders) = m.request(late, 40).unwrap();
        assert_eq!(granted, 40);
        assert_eq!(orders.first().map(|r| r.holder), Some(first), "{orders:?}");
    }

    #[test]
    fn test_a_request_beyond_the_free_frames_is_granted_partially() {
        let mut p = pool(100, 100);
        let (a, _) = p.register(10).unwrap();
        assert_eq!(p.request(a, 200).unwrap().0, 90);
        assert_eq!(p.free(), 0);
        assert_eq!(p.request(a, 5).unwrap().0, 0);
        let s = p.stats(a).unwrap();
        assert_eq!((s.held, s.requested, s.granted), (100, 205, 90));
    }

    #[test]
    fn test_passing_partition_burst_reclaims_the_excess_first_allocated_first() {
        let mut p = pool(100, 20);
        let (a, _) = p.register(10).unwrap();
        let (b, _) = p.register(10).unwrap();
        assert!(p.request(a, 15).unwrap().1.is_empty());
        // 15 + 15 above minimums > 20: 10 asked back, A's first (it came first).
        let (granted, orders) = p.request(b, 15).unwrap();
        assert_eq!(granted, 15);
        let asked: Vec<(HolderId, usize)> = orders.iter().map(|r| (r.holder, r.frames)).collect();
        assert_eq!(asked, vec![(a, 10)]);
        // Once A gives them back, nothing more is asked.
        p.returned(a, 10).unwrap();
        assert!(p.pending().is_empty() && p.balance().is_empty());
        assert_eq!(p.stats(a).unwrap().reclaimed, 10);
    }

    #[test]
    fn test_fafr_takes_from_each_holder_in_registration_order_down_to_its_minimum() {
        let mut p = pool(100, 0);
        let (a, _) = p.register(5).unwrap();
        let (b, _) = p.register(5).unwrap();
        let (c, _) = p.register(5).unwrap();
        // Each request is balanced at once (burst 0), so grow with burst off first.
        p.burst = 100;
        for id in [a, b, c] {
            p.request(id, 10).unwrap();
        }
        p.burst = 15;
        let orders = p.balance();
        let asked: Vec<(HolderId, usize)> = orders.iter().map(|r| (r.holder, r.frames)).collect();
        assert_eq!(asked, vec![(a, 10), (b, 5)]);
        assert_eq!(p.balance(), Vec::new(), "asked once");
    }

    #[test]
    fn test_a_holder_missing_its_deadline_is_reclaimed_by_force_and_reported() {
        let clock = ManualClock::at(0);
        let mut p = FrameManager::new(100, clock)
            .unwrap()
            .with_partition_burst(0)
            .with_deadline_ns(1_000);
        let (a, _) = p.register(10).unwrap();
        let (_, orders) = p.request(a, 30).unwrap();
        assert_eq!(orders[0].frames, 30);
        p.returned(a, 12).unwrap();
        assert!(p.overdue().is_empty(), "before the deadline");
        p.clock.advance(1_000);
        let forced = p.overdue();
        assert_eq!(forced.len(), 1);
        assert_eq!((forced[0].holder, forced[0].frames), (a, 18));
        let s = p.stats(a).unwrap();
        assert_eq!(
            (s.held, s.reclaimed, s.forced, s.forced_incidents),
            (10, 12, 18, 1)
        );
        assert_eq!(p.free(), 90);
    }

    #[test]
    fn test_a_newcomer_short_of_its_minimum_gets_frames_as_the_others_give_them_back() {
        let mut p = pool(100, 100);
        let (a, _) = p.register(10).unwrap();
        p.request(a, 80).unwrap();
        let (b, orders) = p.register(30).unwrap();
        assert_eq!(p.stats(b).unwrap().held, 10);
        assert_eq!(orders.iter().map(|r| r.frames).sum::<usize>(), 20);
        p.returned(a, 20).unwrap();
        assert_eq!(p.stats(b).unwrap().held, 30);
        assert_eq!(p.unregister(a).unwrap(), 70);
        assert_eq!(p.free(), 70);
        assert_eq!(p.stats(a).unwrap_err(), FrameError::UnknownHolder(a));
    }
}
