//! The fault path, top-down: delivery (handler threads reading the
//! region's userfaultfd, or the faulting thread itself, `sigbus`), then
//! service by kind. A missing fault (`load`): lock, plan the cluster
//! (`cluster`, asking `crate::readahead`), begin its load in the frame
//! table, choose victims (`crate::evict`), unlock, evict and read, lock,
//! complete the cluster (handed to the policy through its port) and map it
//! (`crate::views`). Minor faults emulate the referenced bit, write-protect
//! faults track dirty pages. Read-ahead along sequences goes through
//! `windows` (prefetched windows) and `ring_wait` (those read on the
//! io_uring).

mod cluster;
mod copy_in;
mod load;
mod map;
mod ring_wait;
mod windows;

pub use windows::{run_reader, settle, settle_locked};

use std::sync::Arc;
use std::time::Instant;

use pagepilot_policy::FaultKind;

use crate::frame_table::{State, MODIFIED, PENDING, PROBE, REFERENCED};
use crate::shared::Shared;
use crate::sharing::{admit, Admit, Mode};
use crate::stats::Counters;
use crate::sys::{self, UffdMsg, FLAG_MINOR, FLAG_WP, FLAG_WRITE, PAGE};
use crate::threads::Placement;

use load::load;
use ring_wait::{issue_queued, ring_wait};
use windows::{enter_window, stall};

/// Runs one handler thread until the region's stop event fires.
///
/// After serving a batch the thread polls the userfaultfd without sleeping
/// for up to the region's spin time: faults come in streams (a scan, a
/// burst of first touches), and catching the next one awake saves the
/// handler's wake-up, the larger part of a fault's cost on these machines.
///
/// A handler kept to a CPU (`placement`) is freed while windows are read
/// ahead of a stream (`Placement`).
pub fn run(shared: Arc<Shared>, waiter: sys::Waiter, mut placement: Option<Placement>) {
    sys::block_async_signals();
    let mut msgs = [UffdMsg::default(); 16];
    let spin = std::time::Duration::from_micros(shared.tuning().spin_us);
    let mut last_served: Option<Instant> = None;
    loop {
        let spinning = last_served.is_some_and(|t| t.elapsed() < spin);
        if !spinning {
            match waiter.wait() {
                Ok((_, true)) => return,
                Ok((false, false)) => continue,
                Ok((true, false)) => {}
                Err(_) => return,
            }
        }
        let stamp = shared
            .evict_seq()
            .load(std::sync::atomic::Ordering::Acquire);
        let n = match shared.views().uffd().read_msgs(&mut msgs) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if spinning {
                    std::hint::spin_loop();
                } else {
                    last_served = None;
                }
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let last_missing = last_missing_fault(&msgs[..n]);
        for (i, m) in msgs[..n].iter().enumerate() {
            if let Some((addr, flags)) = m.pagefault() {
                let t0 = Instant::now();
                serve(&shared, addr, flags, stamp, last_missing > Some(i));
                shared
                    .stats()
                    .latency
                    .record(t0.elapsed().as_nanos() as u64);
            }
        }
        if n > 0 && !spin.is_zero() {
            last_served = Some(Instant::now());
        }
        if let Some(p) = placement.as_mut().filter(|_| n > 0) {
            // The last missing fault continued a sequence (windows are read
            // ahead of it; entering them keeps it so).
            let streaming = shared.lock().readahead.confirmed();
            p.follow(streaming);
        }
    }
}

/// Runs the region's only handler thread with blocking reads of the
/// userfaultfd (no poll before each read: ~0.35 us less per fault, measured
/// with a C probe). A blocked read cannot be interrupted, so the region stops
/// it with a fault of its own: a thread reads `doorbell`, a page registered
/// for missing faults; the handler maps it (waking that thread) and returns
/// `true` (`false`: the userfaultfd failed).
pub fn run_blocking(shared: Arc<Shared>, doorbell: usize) -> bool {
    sys::block_async_signals();
    let mut msgs = [UffdMsg::default(); 16];
    loop {
        // Read before blocking: an eviction while blocked makes an event
        // look stale, which only costs the faulting thread a retry.
        let stamp = shared
            .evict_seq()
            .load(std::sync::atomic::Ordering::Acquire);
        let n = match shared.views().uffd().read_msgs(&mut msgs) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        let mut stop = false;
        let last_missing = last_missing_fault(&msgs[..n]);
        for (i, m) in msgs[..n].iter().enumerate() {
            let Some((addr, flags)) = m.pagefault() else {
                continue;
            };
            if addr & !(PAGE - 1) == doorbell {
                let _ = shared.views().uffd().zero_page(doorbell, false);
                stop = true;
                continue;
            }
            let t0 = Instant::now();
            serve(&shared, addr, flags, stamp, last_missing > Some(i));
            shared
                .stats()
                .latency
                .record(t0.elapsed().as_nanos() as u64);
        }
        if stop {
            return true;
        }
    }
}

/// Submits the windows queued for the ring, then completes every window
/// in flight and hands the read-ahead to the policy (`settle`), waking the
/// threads that wait for their pages: what a switch of the region
/// (`sharing`) waits for, done by the switching thread itself, as nothing
/// else may be left to reap the ring.
pub fn drain_windows(sh: &Shared) {
    issue_queued(sh);
    settle(sh);
    sh.frames().notify_all();
}

/// How a fault ended for the thread that raised it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The page is mapped (or the thread was woken to fault again).
    Served,
    /// The page cannot be served (beyond the file's end, or its read
    /// failed): the thread gets SIGBUS. The page is poisoned for a thread
    /// waiting on the userfaultfd; a faulting thread serving itself raises
    /// the signal to the application (`sigbus::on_sigbus`).
    Signal,
}

/// The last missing-fault event of a batch read from the userfaultfd: the
/// missing faults before it have another waiting behind them.
fn last_missing_fault(msgs: &[UffdMsg]) -> Option<usize> {
    msgs.iter().rposition(|m| {
        m.pagefault()
            .is_some_and(|(_, flags)| flags & (FLAG_MINOR | FLAG_WP) == 0)
    })
}

/// Serves one fault at `addr`. `stamp` is the region's eviction sequence
/// number read before the fault was (tells a stale event, see
/// `serve_access`); `queued`: other missing faults wait behind this one.
pub fn serve(sh: &Shared, addr: usize, flags: u64, stamp: u64, queued: bool) -> Outcome {
    let Some(slot) = sh.views().page_at(addr) else {
        return Outcome::Served;
    };
    if let Some(limit) = &sh.fault_limit() {
        if flags & (FLAG_MINOR | FLAG_WP) == 0 {
            limit.wait_turn();
        }
    }
    let outcome = if flags & FLAG_WP != 0 {
        serve_wp(sh, slot);
        Outcome::Served
    } else {
        serve_access(sh, slot, flags, stamp, queued)
    };
    // Windows queued for the ring are evicted for and submitted now, after
    // the faulting thread was woken: that work overlaps its run.
    issue_queued(sh);
    outcome
}

/// The lock, once page `s` is in no transition, while the pager pages the
/// region: checked under the same hold of the lock as the page's state
/// (the waits let a switch through, `sharing`). `None`: the region is the
/// file's mapping now, and the thread retries there. With `stall`, a page
/// still being read ahead first moves the windows on (`windows::stall`).
///
/// A page read on the ring is reaped here, by this thread, after every wait:
/// while it waited for another thread's read of the page, the page may have
/// been evicted and issued again as a window on the ring, and in the
/// faulting thread nobody else may be left to reap it (a writer hung so,
/// the other thread done and joining it).
fn stable_while_paged(sh: &Shared, s: u32, stall_loading: bool) -> Option<crate::lock::Locked<'_>> {
    let mut g = sh.lock();
    loop {
        g = match admit(sh, g, sh.views().app_addr(s)) {
            Admit::Serve(g) => g,
            Admit::Retry => return None,
        };
        if stall_loading && g.table.state(s) == State::Loading {
            stall(sh, &mut g, s);
        }
        g = ring_wait(sh, g, s);
        if matches!(g.table.state(s), State::Loading | State::Evicting) {
            g = sh.wait(g);
            continue;
        }
        if sh.sharing().mode() == Mode::Paging {
            return Some(g);
        }
    }
}

pub(super) fn serve_wp(sh: &Shared, s: u32) {
    Counters::add(&sh.stats().wp_faults, 1);
    let Some(mut g) = stable_while_paged(sh, s, false) else {
        return;
    };
    match g.table.state(s) {
        State::Resident | State::Unwritten | State::Locked => {
            // MODIFIED (and the page's bit in the dirty map) before the
            // write is let through.
            let f = g.table.flags(s) | MODIFIED;
            g.table.set_flags(s, f);
            // Un-protecting wakes the writer.
            sh.views().unprotect(s);
        }
        _ => {
            // Evicted meanwhile: the retry raises a missing fault.
            sh.views().wake(s, 1);
        }
    }
}

pub(super) fn serve_access(sh: &Shared, s: u32, flags: u64, stamp: u64, queued: bool) -> Outcome {
    let write = flags & FLAG_WRITE != 0;
    let Some(mut g) = stable_while_paged(sh, s, true) else {
        return Outcome::Served;
    };
    match g.table.state(s) {
        State::Resident => {
            if g.table.flags(s) & PENDING != 0 {
                enter_window(sh, &mut g, s);
            }
            let f = g.table.flags(s);
            if f & PROBE != 0 {
                Counters::add(&sh.stats().probe_hits, 1);
                g.readahead.probe_hit();
            }
            let nf = (f & !PROBE) | REFERENCED | if write { MODIFIED } else { 0 };
            g.table.set_flags(s, nf);
            map_access(sh, s, write, sh.views().writable() && nf & MODIFIED == 0);
            if f & REFERENCED == 0 {
                Counters::add(&sh.stats().minor_faults, 1);
                g.tell_fault(s, FaultKind::Minor, write);
            }
        }
        // Held outside the policy: mapped again, told to nobody.
        State::Unwritten | State::Locked => {
            let f = g.table.flags(s) | REFERENCED | if write { MODIFIED } else { 0 };
            g.table.set_flags(s, f);
            map_access(sh, s, write, sh.views().writable() && f & MODIFIED == 0);
        }
        State::Absent if flags & FLAG_MINOR != 0 || g.table.evicted_at(s) > stamp => {
            // The page was in memory when the fault was raised, or was
            // evicted after it was read: its thread may have been woken by
            // the mapping that came in between, and reading the page now
            // could be a page-in nobody asked for. Wake the thread instead;
            // if it still needs the page it faults again, as a missing fault.
            Counters::add(&sh.stats().retried_faults, 1);
            sh.views().wake(s, 1);
        }
        State::Absent => return load(sh, g, s, write, queued),
        State::Loading | State::Evicting => {
            unreachable!("stable_while_paged returned a transition")
        }
    }
    Outcome::Served
}

/// Maps resident page `s` for an access (see `Views::map_access`),
/// counting a write-protect fault.
fn map_access(sh: &Shared, s: u32, write: bool, wp: bool) {
    if sh.views().map_access(s, write, wp) == crate::views::Mapped::Unprotected {
        Counters::add(&sh.stats().wp_faults, 1);
    }
}
