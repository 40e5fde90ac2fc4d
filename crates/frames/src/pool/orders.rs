//! Reclamations pending: each holder's own orders, oldest first, and one
//! index of every order by deadline.
//!
//! A holder answers its orders oldest first (`returned`), and an order is
//! forced whole when its deadline passes (`overdue`). Deadlines usually grow
//! with the order's age, but not always (the deadline can be shortened on a
//! running pool, and a clock may be set back), so an order forced may sit
//! behind older ones still running: it is then left in its holder's queue as
//! a tombstone (no frames) and dropped once it reaches the front. Each order
//! is thus pushed once and popped once, and only the deadline index is
//! searched.

use std::collections::{BTreeSet, VecDeque};

/// One reclamation order: its creation number, deadline and frames still
/// due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Order {
    /// Creation order across the pool, never reused: the old pending list's
    /// order, which `pending`, `returned` and `overdue` keep.
    pub seq: u64,
    /// When it is forced, clock nanoseconds.
    pub deadline_ns: u64,
    /// Frames still due; 0 for an order already forced (a tombstone).
    pub frames: usize,
}

/// Every live order (frames still due) by (deadline, creation, holder):
/// the earliest deadline first, and the late ones in one range.
pub(super) type Deadlines = BTreeSet<(u64, u64, u32)>;

/// One holder's orders, in creation order, and the frames they still ask.
#[derive(Debug, Default)]
pub(super) struct Orders {
    queue: VecDeque<Order>,
    asked: usize,
}

impl Orders {
    /// Frames asked of the holder and not returned yet.
    pub fn asked(&self) -> usize {
        self.asked
    }

    /// Appends a new order (the newest: `seq` above every other) for
    /// `frames` > 0, and indexes it.
    pub fn push(&mut self, holder: u32, order: Order, deadlines: &mut Deadlines) {
        debug_assert!(order.frames > 0);
        debug_assert!(!matches!(self.queue.back(), Some(o) if o.seq >= order.seq));
        self.asked += order.frames;
        deadlines.insert((order.deadline_ns, order.seq, holder));
        self.queue.push_back(order);
    }

    /// `n` frames given back answer the orders oldest first; an order
    /// answered in full leaves the index. What exceeds the orders answers
    /// nothing. Returns how many orders were looked at (for the cost tests).
    pub fn answer(&mut self, holder: u32, mut n: usize, deadlines: &mut Deadlines) -> usize {
        let mut visited = 0;
        for o in self.queue.iter_mut() {
            if n == 0 {
                break;
            }
            visited += 1;
            let done = o.frames.min(n);
            if done == 0 {
                continue; // a tombstone
            }
            o.frames -= done;
            n -= done;
            self.asked -= done;
            if o.frames == 0 {
                deadlines.remove(&(o.deadline_ns, o.seq, holder));
            }
        }
        visited + self.trim()
    }

    /// Takes order `seq` whole (its deadline passed; the caller removed it
    /// from the index). Returns its frames, 0 if it is not pending.
    pub fn force(&mut self, seq: u64) -> usize {
        let Ok(i) = self.queue.binary_search_by_key(&seq, |o| o.seq) else {
            return 0;
        };
        let frames = std::mem::take(&mut self.queue[i].frames);
        self.asked -= frames;
        self.trim();
        frames
    }

    /// Frames still due on order `seq`, 0 if it is not pending.
    pub fn frames_of(&self, seq: u64) -> usize {
        self.queue
            .binary_search_by_key(&seq, |o| o.seq)
            .map_or(0, |i| self.queue[i].frames)
    }

    /// The holder leaves: its orders leave the index. Returns how many.
    pub fn forget(&mut self, holder: u32, deadlines: &mut Deadlines) -> usize {
        let n = self.queue.len();
        for o in self.queue.drain(..).filter(|o| o.frames > 0) {
            deadlines.remove(&(o.deadline_ns, o.seq, holder));
        }
        self.asked = 0;
        n
    }

    /// Drops the orders done (answered or forced) at the front. Returns how
    /// many.
    fn trim(&mut self) -> usize {
        let mut n = 0;
        while self.queue.front().is_some_and(|o| o.frames == 0) {
            self.queue.pop_front();
            n += 1;
        }
        n
    }

    /// Orders in the queue, tombstones included (for the tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(seq: u64, deadline_ns: u64, frames: usize) -> Order {
        Order {
            seq,
            deadline_ns,
            frames,
        }
    }

    #[test]
    fn test_frames_given_back_answer_the_oldest_order_first() {
        let (mut o, mut d) = (Orders::default(), Deadlines::new());
        o.push(7, order(1, 100, 3), &mut d);
        o.push(7, order(2, 50, 4), &mut d);
        o.answer(7, 5, &mut d);
        assert_eq!((o.asked(), o.frames_of(1), o.frames_of(2)), (2, 0, 2));
        assert_eq!(d.iter().copied().collect::<Vec<_>>(), vec![(50, 2, 7)]);
        assert_eq!(o.len(), 1, "the answered order left");
        // Beyond what is asked, nothing is owed back.
        o.answer(7, 10, &mut d);
        assert_eq!((o.asked(), o.len(), d.len()), (0, 0, 0));
    }

    #[test]
    fn test_an_order_forced_behind_an_older_one_waits_as_a_tombstone() {
        let (mut o, mut d) = (Orders::default(), Deadlines::new());
        o.push(1, order(1, 100, 3), &mut d);
        o.push(1, order(2, 50, 4), &mut d);
        d.remove(&(50, 2, 1));
        assert_eq!(o.force(2), 4);
        assert_eq!((o.asked(), o.len()), (3, 2));
        assert_eq!(o.force(2), 0, "forced once");
        o.answer(1, 3, &mut d);
        assert_eq!((o.asked(), o.len(), d.len()), (0, 0, 0));
    }

    #[test]
    fn test_a_holder_leaving_takes_its_orders_out_of_the_index() {
        let (mut o, mut d) = (Orders::default(), Deadlines::new());
        d.insert((10, 0, 2));
        o.push(1, order(1, 100, 3), &mut d);
        o.push(1, order(2, 50, 4), &mut d);
        assert_eq!(o.forget(1, &mut d), 2);
        assert_eq!(d.iter().copied().collect::<Vec<_>>(), vec![(10, 0, 2)]);
        assert_eq!(o.asked(), 0);
    }
}
