//! The live holders, and what the pool needs summed or found among them
//! without walking them all: the sum of their minimums, of what they hold
//! above them and of what is asked back; who has frames above its minimum
//! not asked for yet (FAFR's next victims), and who is still owed frames up
//! to its minimum (the next to settle), both in registration order.
//!
//! Every change to a holder goes through [`Ledger::change`] (or `insert`,
//! `remove`), which takes the holder's share out of the totals and sets
//! before and puts it back after: no call site can forget a total or a set.

use std::collections::{BTreeMap, BTreeSet};

use super::orders::Orders;
use super::HolderStats;

/// A live holder.
#[derive(Debug)]
pub(super) struct Holder {
    pub stats: HolderStats,
    /// Frames still due to reach its minimum (given as they come free).
    pub owed: usize,
    /// Reclamations asked of it and not completed.
    pub orders: Orders,
}

impl Holder {
    /// A holder guaranteed `min` frames, holding `held` of them.
    pub fn new(min: usize, held: usize) -> Holder {
        Holder {
            stats: HolderStats {
                min,
                held,
                ..HolderStats::default()
            },
            owed: min - held,
            orders: Orders::default(),
        }
    }

    /// Frames above its minimum it was not asked for yet (FAFR asks them).
    pub fn spare(&self) -> usize {
        self.stats
            .held
            .saturating_sub(self.stats.min + self.orders.asked())
    }

    fn share(&self) -> Share {
        Share {
            min: self.stats.min,
            above: self.stats.held.saturating_sub(self.stats.min),
            asked: self.orders.asked(),
            spare: self.spare() > 0,
            owed: self.owed > 0,
        }
    }
}

/// What one holder adds to the totals and sets; nothing for none.
#[derive(Clone, Copy, Debug, Default)]
struct Share {
    min: usize,
    above: usize,
    asked: usize,
    spare: bool,
    owed: bool,
}

/// The live holders by id (ids given in registration order, never reused:
/// the order FAFR and settling follow), with their totals and sets.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    holders: BTreeMap<u32, Holder>,
    /// Holders with frames above minimum not asked for yet.
    spare: BTreeSet<u32>,
    /// Holders still owed frames up to their minimum.
    owed: BTreeSet<u32>,
    /// Sum of the minimums.
    reserved: usize,
    /// Sum of the frames held above minimums.
    above: usize,
    /// Sum of the frames asked back and not returned.
    asked_back: usize,
}

impl Ledger {
    /// Live holders (for the tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.holders.len()
    }

    /// Holder `id`, if live.
    pub fn get(&self, id: u32) -> Option<&Holder> {
        self.holders.get(&id)
    }

    /// A new holder `id` (above every id given so far).
    pub fn insert(&mut self, id: u32, holder: Holder) {
        let after = holder.share();
        let before = self
            .holders
            .insert(id, holder)
            .map_or_else(Share::default, |h| h.share());
        self.account(id, before, after);
    }

    /// Holder `id` leaves.
    pub fn remove(&mut self, id: u32) -> Option<Holder> {
        let holder = self.holders.remove(&id)?;
        self.account(id, holder.share(), Share::default());
        Some(holder)
    }

    /// Applies `change` to holder `id` and accounts for it; `None` if `id`
    /// is not live.
    pub fn change<R>(&mut self, id: u32, change: impl FnOnce(&mut Holder) -> R) -> Option<R> {
        let holder = self.holders.get_mut(&id)?;
        let before = holder.share();
        let r = change(holder);
        let after = holder.share();
        self.account(id, before, after);
        Some(r)
    }

    /// Sum of the minimums.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Sum of the frames held above minimums.
    pub fn above(&self) -> usize {
        self.above
    }

    /// Sum of the frames asked back and not returned.
    pub fn asked_back(&self) -> usize {
        self.asked_back
    }

    /// The first holder, in registration order, with frames above its
    /// minimum not asked for yet.
    pub fn first_spare(&self) -> Option<u32> {
        self.spare.first().copied()
    }

    /// The first holder, in registration order, still owed frames.
    pub fn first_owed(&self) -> Option<u32> {
        self.owed.first().copied()
    }

    /// The holders still owed frames, in registration order.
    pub fn owed(&self) -> impl Iterator<Item = (u32, &Holder)> + '_ {
        self.owed
            .iter()
            .filter_map(|&id| Some((id, self.holders.get(&id)?)))
    }

    /// Takes `before` out of the totals and sets, and puts `after` in: the
    /// one place that keeps them true.
    fn account(&mut self, id: u32, before: Share, after: Share) {
        // Out first, then in: each total holds `before`, so neither step
        // can underflow or pass the sum it ends at.
        self.reserved = self.reserved - before.min + after.min;
        self.above = self.above - before.above + after.above;
        self.asked_back = self.asked_back - before.asked + after.asked;
        for (set, was, is) in [
            (&mut self.spare, before.spare, after.spare),
            (&mut self.owed, before.owed, after.owed),
        ] {
            match (was, is) {
                (false, true) => {
                    set.insert(id);
                }
                (true, false) => {
                    set.remove(&id);
                }
                _ => {}
            }
        }
    }

    /// Recomputes every total and set from the holders and compares (for
    /// the tests).
    #[cfg(test)]
    pub fn check(&self) {
        let mut fresh = Ledger::default();
        for (&id, h) in &self.holders {
            fresh.account(id, Share::default(), h.share());
        }
        assert_eq!(
            (fresh.reserved, fresh.above, fresh.asked_back),
            (self.reserved, self.above, self.asked_back),
            "totals (reserved, above, asked back)"
        );
        assert_eq!(fresh.spare, self.spare, "holders with spare frames");
        assert_eq!(fresh.owed, self.owed, "holders owed frames");
    }
}
