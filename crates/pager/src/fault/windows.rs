//! Prefetched read-ahead windows: kept ahead of the application along a
//! sequence of faults, entered when it touches one, handed to the policy in
//! order, and read by reader threads where there is no ring.

use std::sync::Arc;

use pagepilot_policy::FaultKind;

use crate::frame_table::{State, PENDING, REFERENCED};
use crate::lock::Locked;
use crate::prefetch::Ahead;
use crate::read_job::{Cause, ReadJob};
use crate::readahead::StreamId;
use crate::region_state::RegionState;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::sys::{self, PAGE};

use super::cluster::next_window;
use super::load::{choose_victims, fill, forget};

/// Most windows read ahead of a region at once, of all its sequences: fewer
/// than the ring's entries.
const MAX_WINDOWS_AHEAD: usize = 16;

/// The application touched page `s` of a prefetched window it had not
/// entered yet (the window's first page is left unmapped for this): its
/// sequence goes on, and becomes the current one. First the windows ahead
/// of it are kept in flight (their victims are chosen now, while the policy
/// does not know the entered window yet, so an MRU-like policy gives up
/// pages the application has finished with, not the ones it is about to
/// use); then the entered window, and any of the same sequence skipped
/// before it, are handed to the policy as missing faults, in order. Other
/// sequences' windows wait for their own threads.
pub(super) fn enter_window(sh: &Shared, g: &mut RegionState, s: u32) {
    let Some(stream) = g.prefetch.pending_stream(s) else {
        return;
    };
    if g.readahead.resume(stream) {
        g.readahead.enter_window(sh.tuning().readahead_max);
        prefetch_ahead(sh, g, s);
    }
    hand_over_sequence(g, stream, s);
}

/// The application reached page `s` of a prefetched window whose read is
/// still in flight: it has finished with every window before it, so their
/// frames go to the next window now, while this one is read, rather than
/// when it is entered (the disk then has `readahead_depth + 1` reads in
/// flight while the application waits, for the same frames). Windows read
/// but skipped are handed to the policy first, as on a missing fault.
pub(super) fn stall(sh: &Shared, g: &mut RegionState, s: u32) {
    let Some(stream) = g.prefetch.inflight_stream(s) else {
        return;
    };
    hand_over_sequence(g, stream, s);
    if g.readahead.resume(stream) {
        prefetch_ahead(sh, g, s);
    }
}

/// Hands over the pending windows of sequence `stream` up to page `s` (its
/// thread is there: it entered them or skipped them), and those of
/// sequences no longer followed, whose threads will not enter them as
/// windows (they would otherwise hold their frames out of the policy's
/// reach until the region settles).
pub(super) fn hand_over_sequence(g: &mut RegionState, stream: StreamId, s: u32) {
    let followed = g.readahead.followed();
    hand_over(g, |a| {
        (a.stream == stream && a.window.0 <= s) || !followed.contains(&a.stream)
    });
}

/// Hands the pending windows `which` picks to the policy, page by page in
/// order, as missing faults.
pub(super) fn hand_over(g: &mut RegionState, which: impl Fn(&Ahead) -> bool) {
    for (first, n) in g.prefetch.take_pending(which) {
        for q in first..first + n as u32 {
            let f = g.table.flags(q);
            if g.table.state(q) != State::Resident || f & PENDING == 0 {
                continue;
            }
            g.table.set_flags(q, (f & !PENDING) | REFERENCED);
            g.tell_fault(q, FaultKind::Missing, false);
        }
    }
}

/// Keeps up to `readahead_depth` windows ahead of the current sequence's
/// thread, at page `s`, from the sequence's next expected page on: its
/// windows in flight plus its windows read but not touched yet, past `s`.
/// Each sequence followed keeps its own (several threads streaming through
/// their own parts of a region each have their reads in flight, as under
/// the kernel), and the windows of all of them fit in half the budget, or
/// they would evict each other, and in the ring.
pub(super) fn prefetch_ahead(sh: &Shared, g: &mut RegionState, s: u32) {
    if !sh.tuning().async_readahead {
        return;
    }
    // Windows go to the ring where there is one (reader threads may be
    // there for faults' reads only).
    let to_readers = sh.ring().is_none();
    if to_readers && g.readers.is_none() {
        return;
    }
    let w = g.readahead.window().max(1);
    let room = (g.table.usable() / 2 / w)
        .saturating_sub(1)
        .clamp(1, MAX_WINDOWS_AHEAD);
    let depth = sh.tuning().readahead_depth.min(room);
    let stream = g.readahead.stream();
    // Windows of this sequence the thread has reached count against the
    // room no longer: they are handed to the policy right after.
    let (behind, mut mine) = g.prefetch.of_stream(stream, s);
    let mut all = g.prefetch.ahead() - behind;
    while mine < depth && all < room {
        let Some((first, n)) = next_window(sh, g) else {
            break;
        };
        // The pages are Loading from now on: a fault on them waits for the
        // read instead of racing the prefetcher with a read of its own.
        g.table.begin_load(first, n);
        let victims = choose_victims(sh, g, first);
        let job = ReadJob {
            first,
            pages: n,
            cause: Cause::Prefetch(g.prefetch.next_ticket()),
            victims,
        };
        let sent = match g.readers.as_mut().filter(|_| to_readers) {
            Some(readers) => readers.send(job),
            None => {
                // Evicted for and submitted after the lock is released.
                g.prefetch.queue(job);
                Ok(())
            }
        };
        if let Err(std::sync::mpsc::SendError(job)) = sent {
            // No prefetcher left (cannot happen while the sender lives):
            // give the frames back and forget the window.
            let mut victims = job.victims;
            let failed = sh.evict_io(&mut victims);
            sh.finish_evictions(g, &victims, &failed);
            g.table.abort_load(first, n);
            break;
        }
        g.prefetch.issued(first, n, stream);
        g.readahead.window_issued(first, n);
        (mine, all) = (mine + 1, all + 1);
    }
    let ahead = all as u64;
    sh.stats()
        .windows_ahead_max
        .fetch_max(ahead, std::sync::atomic::Ordering::Relaxed);
}

/// Waits until prefetch `ticket` is the next to be accounted.
pub(super) fn wait_turn<'a>(
    sh: &'a Shared,
    mut g: crate::lock::Locked<'a>,
    ticket: u64,
) -> crate::lock::Locked<'a> {
    while !g.prefetch.is_turn(ticket) {
        g = sh.wait(g);
    }
    g
}

/// Runs one of a region's prefetchers until the channel closes.
pub fn run_reader(
    shared: Arc<Shared>,
    rx: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<ReadJob>>>,
    outstanding: &std::sync::atomic::AtomicUsize,
) {
    sys::block_async_signals();
    loop {
        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(job) = next else {
            return;
        };
        // The window's pages were made Loading when it was issued.
        let g = shared.lock();
        let _ = fill(
            &shared,
            g,
            job.first,
            job.pages,
            job.cause,
            Some(job.victims),
        );
        outstanding.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Waits until no prefetched window is in flight, then hands every window
/// read ahead to the policy: each page of the region is then absent or the
/// policy's, and none holds data read before this call that a fault would
/// not read again (`Region::invalidate`).
pub fn settle(sh: &Shared) {
    drop(settle_locked(sh, sh.lock()));
}

/// [`settle`], with the lock held on entry and on return.
pub fn settle_locked<'a>(sh: &'a Shared, mut g: Locked<'a>) -> Locked<'a> {
    while let Some((first, _)) = g.prefetch.oldest_in_flight() {
        g = if sh.ring().is_some() {
            super::ring_wait::ring_wait(sh, g, first)
        } else {
            // A reader thread completes the window and notifies.
            sh.wait(g)
        };
    }
    hand_over(&mut g, |_| true);
    g
}

/// A prefetched window's read ended, its turn come (`read`: the pages it
/// brought): they are Resident and PENDING, handed to the policy when the
/// application enters the window, and mapped but for the first, whose touch
/// enters it. Pages it did not bring (beyond the file's end, truncated
/// meanwhile; all of them if the read failed) are absent again: a touch
/// faults and gets SIGBUS.
pub(super) fn complete_window(
    sh: &Shared,
    g: &mut RegionState,
    window: Ahead,
    read: std::io::Result<usize>,
) {
    let (first, n) = window.window;
    let Ok(have) = read else {
        Counters::add(&sh.stats().read_errors, 1);
        forget(sh, &mut g.table, first, n);
        return;
    };
    forget(sh, &mut g.table, first + have as u32, n - have);
    Counters::add(&sh.stats().bytes_read, (have * PAGE) as u64);
    Counters::add(&sh.stats().missing_faults, have as u64);
    Counters::add(&sh.stats().readahead_pages, have as u64);
    for q in first..first + have as u32 {
        g.table.complete_load(q, PENDING);
    }
    g.prefetch.read(window, have);
    if have > 1 {
        sh.views().map(first + 1, have - 1, sh.views().writable());
    }
}
