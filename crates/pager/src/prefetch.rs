//! The bookkeeping of prefetched windows: issued in ticket order, read by
//! reader threads or the ring in any order, accounted (handed their pages'
//! states) in ticket order, then pending until the application enters them
//! and they are handed to the policy. Pure state, under the region's lock;
//! `fault::windows` does the I/O.

use std::collections::VecDeque;

use crate::read_job::ReadJob;

/// A window: its first page and its pages.
pub type Window = (u32, usize);

/// The prefetched windows of a region.
#[derive(Default)]
pub struct Prefetches {
    /// Windows read but not entered by the application yet, in ticket
    /// order: their pages are Resident and PENDING.
    pending: VecDeque<Window>,
    /// Windows issued but not accounted yet, in ticket order: their pages
    /// are Loading.
    inflight: VecDeque<Window>,
    /// Windows issued for the ring under the lock, whose victims are
    /// evicted and reads submitted once it is released.
    queued: Vec<ReadJob>,
    /// Tickets handed out so far.
    issued: u64,
    /// Windows accounted so far (the next ticket to account).
    done: u64,
}

impl Prefetches {
    /// Windows ahead of the application: read or being read.
    pub fn ahead(&self) -> usize {
        self.pending.len() + self.inflight.len()
    }

    /// Windows read and not entered yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The position among the pending windows of the one holding page `s`.
    pub fn pending_index(&self, s: u32) -> Option<usize> {
        self.pending.iter().position(|&w| holds(w, s))
    }

    /// The position among the windows in flight of the one holding page `s`.
    pub fn inflight_index(&self, s: u32) -> Option<usize> {
        self.inflight.iter().position(|&w| holds(w, s))
    }

    /// The oldest window in flight (the next to be accounted).
    pub fn oldest_in_flight(&self) -> Option<Window> {
        self.inflight.front().copied()
    }

    /// The ticket the next window issued gets.
    pub fn next_ticket(&self) -> u64 {
        self.issued
    }

    /// Window `(first, pages)` was issued with [`Prefetches::next_ticket`].
    pub fn issued(&mut self, first: u32, pages: usize) {
        self.issued += 1;
        self.inflight.push_back((first, pages));
    }

    /// Whether the window of `ticket` is the next to be accounted.
    pub fn is_turn(&self, ticket: u64) -> bool {
        self.done == ticket
    }

    /// The ticket of the next window to account.
    pub fn turn(&self) -> u64 {
        self.done
    }

    /// Accounts the oldest window in flight (its read ended): returns it.
    pub fn account(&mut self) -> Option<Window> {
        let w = self.inflight.pop_front()?;
        self.done += 1;
        Some(w)
    }

    /// Window `(first, pages)`, read, waits for the application to enter it.
    pub fn read(&mut self, first: u32, pages: usize) {
        if pages > 0 {
            self.pending.push_back((first, pages));
        }
    }

    /// Takes the oldest pending window (entered, skipped or settled: its
    /// pages go to the policy).
    pub fn take_pending(&mut self) -> Option<Window> {
        self.pending.pop_front()
    }

    /// Queues `job` for the ring, submitted once the lock is released.
    pub fn queue(&mut self, job: ReadJob) {
        self.queued.push(job);
    }

    /// The jobs queued for the ring.
    pub fn take_queued(&mut self) -> Vec<ReadJob> {
        std::mem::take(&mut self.queued)
    }
}

/// Whether window `(first, pages)` holds page `s`.
fn holds((first, pages): Window, s: u32) -> bool {
    (first..first + pages as u32).contains(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_windows_are_accounted_in_ticket_order_then_pending_until_taken() {
        let mut p = Prefetches::default();
        assert_eq!(p.next_ticket(), 0);
        p.issued(10, 4);
        p.issued(14, 8);
        assert_eq!(
            (p.ahead(), p.inflight_index(15), p.inflight_index(9)),
            (2, Some(1), None)
        );
        assert!(p.is_turn(0) && !p.is_turn(1));
        assert_eq!(p.account(), Some((10, 4)));
        p.read(10, 4);
        assert!(p.is_turn(1));
        assert_eq!(
            (p.pending(), p.pending_index(13), p.oldest_in_flight()),
            (1, Some(0), Some((14, 8)))
        );
        assert_eq!(p.account(), Some((14, 8)));
        p.read(14, 0);
        assert_eq!(
            p.pending(),
            1,
            "a window that brought nothing is not pending"
        );
        assert_eq!(p.take_pending(), Some((10, 4)));
        assert_eq!((p.ahead(), p.account()), (0, None));
        assert_eq!(p.next_ticket(), 2);
    }
}
