//! The bookkeeping of prefetched windows: issued in ticket order, read by
//! reader threads or the ring in any order, accounted (handed their pages'
//! states) in ticket order, then pending until the application enters them
//! and they are handed to the policy. Pure state, under the region's lock;
//! `fault::windows` does the I/O.

use std::collections::VecDeque;

use crate::read_job::ReadJob;
use crate::readahead::StreamId;

/// A window: its first page and its pages.
pub type Window = (u32, usize);

/// A window read ahead of stream `stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    /// The window.
    pub window: Window,
    /// The sequence it was read ahead of.
    pub stream: StreamId,
}

/// The prefetched windows of a region, of every stream it follows.
#[derive(Default)]
pub struct Prefetches {
    /// Windows read but not entered by the application yet, in ticket
    /// order: their pages are Resident and PENDING.
    pending: VecDeque<Ahead>,
    /// Windows issued but not accounted yet, in ticket order: their pages
    /// are Loading.
    inflight: VecDeque<Ahead>,
    /// Windows issued for the ring under the lock, whose victims are
    /// evicted and reads submitted once it is released.
    queued: Vec<ReadJob>,
    /// Tickets handed out so far.
    issued: u64,
    /// Windows accounted so far (the next ticket to account).
    done: u64,
}

impl Prefetches {
    /// Windows ahead of the application, of every stream: read or being
    /// read.
    pub fn ahead(&self) -> usize {
        self.pending.len() + self.inflight.len()
    }

    /// The windows of `stream` read or being read, counted on both sides
    /// of page `s`: `(reached, ahead)`, the ones its application thread is
    /// in or has passed, and the ones past it.
    pub fn of_stream(&self, stream: StreamId, s: u32) -> (usize, usize) {
        let mine = self.pending.iter().chain(&self.inflight);
        mine.filter(|a| a.stream == stream)
            .fold((0, 0), |(reached, ahead), a| {
                if a.window.0 <= s {
                    (reached + 1, ahead)
                } else {
                    (reached, ahead + 1)
                }
            })
    }

    /// The stream of the window read and not entered that holds page `s`.
    pub fn pending_stream(&self, s: u32) -> Option<StreamId> {
        holding(&self.pending, s)
    }

    /// The stream of the window in flight that holds page `s`.
    pub fn inflight_stream(&self, s: u32) -> Option<StreamId> {
        holding(&self.inflight, s)
    }

    /// The oldest window in flight (the next to be accounted).
    pub fn oldest_in_flight(&self) -> Option<Window> {
        self.inflight.front().map(|a| a.window)
    }

    /// The ticket the next window issued gets.
    pub fn next_ticket(&self) -> u64 {
        self.issued
    }

    /// Window `(first, pages)` of `stream` was issued with
    /// [`Prefetches::next_ticket`].
    pub fn issued(&mut self, first: u32, pages: usize, stream: StreamId) {
        self.issued += 1;
        self.inflight.push_back(Ahead {
            window: (first, pages),
            stream,
        });
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
    pub fn account(&mut self) -> Option<Ahead> {
        let a = self.inflight.pop_front()?;
        self.done += 1;
        Some(a)
    }

    /// Window `a`, accounted, brought its first `pages` pages: they wait
    /// for the application to enter them.
    pub fn read(&mut self, a: Ahead, pages: usize) {
        if pages > 0 {
            self.pending.push_back(Ahead {
                window: (a.window.0, pages),
                ..a
            });
        }
    }

    /// Takes the pending windows `which` picks, in ticket order (entered,
    /// skipped or settled: their pages go to the policy).
    pub fn take_pending(&mut self, which: impl Fn(&Ahead) -> bool) -> Vec<Window> {
        let mut taken = Vec::new();
        self.pending.retain(|a| {
            let take = which(a);
            if take {
                taken.push(a.window);
            }
            !take
        });
        taken
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

/// The stream of the window of `windows` that holds page `s`.
fn holding(windows: &VecDeque<Ahead>, s: u32) -> Option<StreamId> {
    let held = |&(first, pages): &Window| (first..first + pages as u32).contains(&s);
    windows.iter().find(|a| held(&a.window)).map(|a| a.stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_windows_are_accounted_in_ticket_order_then_pending_until_taken() {
        let mut p = Prefetches::default();
        assert_eq!(p.next_ticket(), 0);
        p.issued(10, 4, 1);
        p.issued(14, 8, 1);
        assert_eq!(
            (p.ahead(), p.inflight_stream(15), p.inflight_stream(9)),
            (2, Some(1), None)
        );
        assert!(p.is_turn(0) && !p.is_turn(1));
        let a = p.account().unwrap();
        assert_eq!(a.window, (10, 4));
        p.read(a, 4);
        assert!(p.is_turn(1));
        assert_eq!(
            (p.ahead(), p.pending_stream(13), p.oldest_in_flight()),
            (2, Some(1), Some((14, 8)))
        );
        let b = p.account().unwrap();
        assert_eq!(b.window, (14, 8));
        p.read(b, 0);
        assert_eq!(
            (p.ahead(), p.pending_stream(15)),
            (1, None),
            "a window that brought nothing is not pending"
        );
        assert_eq!(p.take_pending(|_| true), vec![(10, 4)]);
        assert_eq!((p.ahead(), p.account()), (0, None));
        assert_eq!(p.next_ticket(), 2);
    }

    #[test]
    fn test_each_stream_counts_and_gives_up_only_its_own_windows() {
        let mut p = Prefetches::default();
        // Two threads streaming their own halves: windows interleaved.
        for (first, stream) in [(0, 1), (1000, 2), (8, 1), (1008, 2), (16, 1)] {
            p.issued(first, 8, stream);
        }
        for _ in 0..4 {
            let a = p.account().unwrap();
            p.read(a, 8);
        }
        assert_eq!((p.of_stream(1, 3).1, p.of_stream(2, 3).1), (2, 2));
        assert_eq!((p.of_stream(1, 9).1, p.of_stream(2, 1003).1), (1, 1));
        assert_eq!(
            (
                p.of_stream(1, 9).0,
                p.of_stream(2, 1003).0,
                p.of_stream(2, 999).0
            ),
            (2, 1, 0)
        );
        assert_eq!(p.pending_stream(1010), Some(2));
        // Stream 1 enters its second window: its first two go, stream 2's stay.
        assert_eq!(
            p.take_pending(|a| a.stream == 1 && a.window.0 <= 9),
            vec![(0, 8), (8, 8)]
        );
        assert_eq!((p.ahead(), p.of_stream(2, 0).1), (3, 2));
        assert_eq!(p.inflight_stream(20), Some(1));
    }
}
