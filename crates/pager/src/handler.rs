//! The fault loop: handler threads read the region's userfaultfd and serve
//! missing faults (clustered reads from the dataspace into the pager's view,
//! then UFFDIO_CONTINUE), minor faults (reference-bit emulation) and
//! write-protect faults (dirty tracking).

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use pagepilot_policy::{Fault, FaultKind, Page};

use crate::engine::{Inner, Shared};
use crate::resident::{State, MODIFIED, REFERENCED};
use crate::stats::Counters;
use crate::sys::{self, UffdMsg, FLAG_MINOR, FLAG_WP, FLAG_WRITE, PAGE};

/// Runs one handler thread until the region's stop event fires.
///
/// After serving a batch the thread polls the userfaultfd without sleeping
/// for up to the region's spin time: faults come in streams (a scan, a
/// burst of first touches), and catching the next one awake saves the
/// handler's wake-up, the larger part of a fault's cost on these machines.
pub fn run(shared: Arc<Shared>, waiter: sys::Waiter) {
    let mut msgs = [UffdMsg::default(); 16];
    let spin = std::time::Duration::from_micros(shared.tuning.spin_us);
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
        let stamp = shared.evict_seq.load(std::sync::atomic::Ordering::Acquire);
        let n = match shared.uffd.read_msgs(&mut msgs) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if spinning {
                    std::hint::spin_loop();
                } else {
                    last_served = None;
                }
                continue;
            }
            Err(_) => return,
        };
        for m in &msgs[..n] {
            if let Some((addr, flags)) = m.pagefault() {
                let t0 = Instant::now();
                serve(&shared, addr, flags, stamp);
                shared.stats.latency.record(t0.elapsed().as_nanos() as u64);
            }
        }
        if n > 0 && !spin.is_zero() {
            last_served = Some(Instant::now());
        }
    }
}

/// Serves one fault at `addr`. `stamp` is the region's eviction sequence
/// number read before the fault was (tells a stale event, see `serve_access`).
pub fn serve(sh: &Shared, addr: usize, flags: u64, stamp: u64) {
    if addr < sh.app || addr >= sh.app + sh.map_len {
        return;
    }
    let slot = ((addr - sh.app) / PAGE) as u32;
    if flags & FLAG_WP != 0 {
        serve_wp(sh, slot);
    } else {
        serve_access(sh, slot, flags, stamp);
    }
}

fn serve_wp(sh: &Shared, s: u32) {
    Counters::add(&sh.stats.wp_faults, 1);
    let g = sh.lock();
    let mut g = sh.wait_stable(g, s);
    let addr = sh.app_addr(s);
    match g.table.state(s) {
        State::Resident | State::Pinned => {
            let f = g.table.flags(s) | MODIFIED;
            g.table.set_flags(s, f);
            // Un-protecting wakes the writer.
            if sh.uffd.writeprotect(addr, PAGE, false).is_err() {
                let _ = sh.uffd.wake(addr, PAGE);
            }
        }
        _ => {
            // Evicted meanwhile: the retry raises a missing fault.
            let _ = sh.uffd.wake(addr, PAGE);
        }
    }
}

/// Maps a page that is in the memfd into the application's view.
fn map(sh: &Shared, s: u32, n: usize, wp: bool) {
    let addr = sh.app_addr(s);
    if sh.uffd.continue_range(addr, n * PAGE, wp).is_err() {
        // Already mapped (another thread's fault on the same page was served
        // first): only the wake is missing. Pages after the first mapped one
        // stay unmapped and are mapped by their own (minor) fault.
        let _ = sh.uffd.wake(addr, n * PAGE);
    }
}

/// Maps a resident page for an access. If it is mapped already and this
/// is a write, the fault was a write-protect fault: un-protect the page.
fn map_access(sh: &Shared, s: u32, write: bool, wp: bool) {
    let addr = sh.app_addr(s);
    match sh.uffd.continue_range(addr, PAGE, wp) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) && write && sh.writable => {
            Counters::add(&sh.stats.wp_faults, 1);
            if sh.uffd.writeprotect(addr, PAGE, false).is_err() {
                let _ = sh.uffd.wake(addr, PAGE);
            }
        }
        Err(_) => {
            let _ = sh.uffd.wake(addr, PAGE);
        }
    }
}

fn serve_access(sh: &Shared, s: u32, flags: u64, stamp: u64) {
    let write = flags & FLAG_WRITE != 0;
    let g = sh.lock();
    let mut g = sh.wait_stable(g, s);
    match g.table.state(s) {
        State::Resident => {
            let f = g.table.flags(s);
            let nf = f | REFERENCED | if write { MODIFIED } else { 0 };
            g.table.set_flags(s, nf);
            map_access(sh, s, write, sh.writable && nf & MODIFIED == 0);
            if g.marker == s {
                // The first touch of a prefetched window: read the next one.
                g.marker = u32::MAX;
                let next = g.next_expected;
                prefetch(sh, &mut g, next);
            }
            if f & REFERENCED == 0 {
                Counters::add(&sh.stats.minor_faults, 1);
                g.time += 1;
                let fault = Fault {
                    page: page(s),
                    kind: FaultKind::Minor,
                    write,
                    time: g.time,
                };
                let Inner { table, policy, .. } = &mut *g;
                policy.on_fault(fault, table);
                table.zap_cleared();
            }
        }
        State::Pinned => {
            let f = g.table.flags(s) | REFERENCED | if write { MODIFIED } else { 0 };
            g.table.set_flags(s, f);
            map_access(sh, s, write, sh.writable && f & MODIFIED == 0);
        }
        State::Absent if flags & FLAG_MINOR != 0 || g.table.evicted_at(s) > stamp => {
            // The page was in memory when the fault was raised, or was
            // evicted after it was read: its thread may have been woken by
            // the mapping that came in between, and reading the page now
            // could be a page-in nobody asked for. Wake the thread instead;
            // if it still needs the page it faults again, as a missing fault.
            Counters::add(&sh.stats.retried_faults, 1);
            let _ = sh.uffd.wake(sh.app_addr(s), PAGE);
        }
        State::Absent => load(sh, g, s, write),
        State::Loading | State::Evicting => unreachable!("wait_stable returned a transition"),
    }
}

fn page(s: u32) -> Page {
    Page {
        slot: s,
        vpn: u64::from(s),
    }
}

/// How many pages to read for a missing fault at `s`: the fault-around size,
/// or a window doubling along a sequence of faults, cut at the first page
/// that is not absent, at the region's end and at half the budget.
fn plan(sh: &Shared, g: &mut Inner, s: u32) -> (usize, bool) {
    let sequential = s == g.next_expected && s != 0;
    g.window = if sequential {
        (g.window * 2).clamp(1, sh.tuning.readahead_max.max(1))
    } else {
        sh.tuning.fault_around.max(1)
    };
    let n = absent_run(sh, g, s, g.window);
    g.next_expected = s + n as u32;
    (n, sequential)
}

/// Absent pages from `s` on that must be read, at most `want`, at most half
/// the budget. A page with nothing to read (anonymous memory never written
/// out) is filled alone: there is no I/O to amortise, and a cluster would map
/// its other pages write-protected, so a stream of first writes would pay a
/// write-protect fault per page instead of one zero-fill fault.
fn absent_run(sh: &Shared, g: &Inner, s: u32, want: usize) -> usize {
    if g.table.state(s) != State::Absent {
        return 0;
    }
    if !sh.store.has_data(s as usize) {
        return 1;
    }
    let limit = want
        .min(g.table.pages() - s as usize)
        .min((g.table.capacity / 2).max(1));
    let mut n = 1;
    while n < limit
        && g.table.state(s + n as u32) == State::Absent
        && sh.store.has_data((s + n as u32) as usize)
    {
        n += 1;
    }
    n
}

/// Who asked for a fill.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A missing fault on the first page, a write if `true`.
    Fault(bool),
    /// Asynchronous read-ahead: the first page is left unmapped as the
    /// marker whose first touch asks for the next window.
    Prefetch,
}

fn load(sh: &Shared, mut g: std::sync::MutexGuard<'_, Inner>, s: u32, write: bool) {
    Counters::add(&sh.stats.fault_events, 1);
    let (n, sequential) = plan(sh, &mut g, s);
    fill(sh, g, s, n, Cause::Fault(write));
    if sequential && sh.tuning.async_readahead {
        prefetch(sh, &mut sh.lock(), s + n as u32);
    }
}

/// Asks the region's prefetcher for the window starting at `first`.
fn prefetch(_sh: &Shared, g: &mut Inner, first: u32) {
    if (first as usize) < g.table.pages() {
        if let Some(tx) = &g.prefetcher {
            let _ = tx.send((first, g.window));
        }
    }
}

/// Runs a region's prefetcher until its channel closes.
pub fn run_prefetcher(shared: Arc<Shared>, rx: std::sync::mpsc::Receiver<(u32, usize)>) {
    while let Ok((first, want)) = rx.recv() {
        let mut g = shared.lock();
        let n = absent_run(&shared, &g, first, want);
        if n == 0 {
            continue;
        }
        g.next_expected = first + n as u32;
        fill(&shared, g, first, n, Cause::Prefetch);
    }
}

/// Reads pages `s..s+n` (all Absent) into frames, evicting what the budget
/// requires, hands them to the policy as missing faults in order and maps them.
fn fill(sh: &Shared, mut g: std::sync::MutexGuard<'_, Inner>, s: u32, n: usize, cause: Cause) {
    for q in s..s + n as u32 {
        g.table.set(q, State::Loading, 0);
    }
    // Frames for the pages read ahead are taken back first (ReclaimFrame: a
    // policy program names them without queueing anything), then the
    // faulting page's own victim (PageFault, which queues the page). A
    // built-in policy answers no reclaim and names every victim. Either way
    // all victims are chosen before the cluster is read, so an MRU-like
    // policy gives up pages it has used, not the ones being read.
    let excess = g.table.excess();
    let mut victims = if excess > 1 {
        sh.take_reclaimed(&mut g, excess - 1)
    } else {
        Vec::new()
    };
    while victims.len() < excess {
        match sh.take_victim(&mut g, s) {
            Some(v) => victims.push(v),
            None => {
                Counters::add(&sh.stats.over_budget, 1);
                break;
            }
        }
    }
    drop(g);

    let failed = if victims.is_empty() {
        Vec::new()
    } else {
        sh.evict_io(&mut victims)
    };
    // A single page the store knows to be zero (anonymous memory never
    // written out) is filled and mapped by one UFFDIO_COPY below: no read.
    let zero = n == 1 && cause != Cause::Prefetch && !sh.store.has_data(s as usize);
    let read = if zero {
        Ok(())
    } else {
        let t_read = Instant::now();
        // SAFETY: pages s..s+n are Loading: no handler maps them and the
        // application cannot reach them until the CONTINUE below.
        let r = unsafe { sh.store.read(s as usize, n, sh.pager_addr(s)) };
        sh.stats
            .read_latency
            .record(t_read.elapsed().as_nanos() as u64);
        r
    };

    // Account and tell the policy before the faulting thread resumes, so that
    // what it reads of the statistics includes its own fault.
    let write = cause == Cause::Fault(true);
    let mut g = sh.lock();
    sh.finish_evictions(&mut g, &victims, &failed);
    match read {
        Ok(()) => {
            if !zero {
                Counters::add(&sh.stats.bytes_read, (n * PAGE) as u64);
            }
            Counters::add(&sh.stats.missing_faults, n as u64);
            let ahead = if cause == Cause::Prefetch { n } else { n - 1 };
            Counters::add(&sh.stats.readahead_pages, ahead as u64);
            for q in s..s + n as u32 {
                let dirty = if q == s && write { MODIFIED } else { 0 };
                let referenced = if q == s && cause == Cause::Prefetch {
                    0
                } else {
                    REFERENCED
                };
                g.table.set(q, State::Resident, referenced | dirty);
                g.time += 1;
                let fault = Fault {
                    page: page(q),
                    kind: FaultKind::Missing,
                    write: write && q == s,
                    time: g.time,
                };
                let Inner { table, policy, .. } = &mut *g;
                policy.on_fault(fault, table);
                table.zap_cleared();
            }
            // Mapped under the lock: the pages are Resident now and could
            // otherwise be chosen as victims and zapped before they are mapped.
            if cause == Cause::Prefetch {
                g.marker = s;
            } else if zero {
                let wp = sh.writable && !write;
                if sh.uffd.zero_page(sh.app_addr(s), wp).is_err() {
                    let _ = sys::populate(sh.pager_addr(s) as usize, PAGE);
                    map(sh, s, 1, wp);
                }
            } else {
                map(sh, s, 1, sh.writable && !write);
            }
            if n > 1 {
                map(sh, s + 1, n - 1, sh.writable);
            }
        }
        Err(_) => {
            Counters::add(&sh.stats.read_errors, 1);
            for q in s..s + n as u32 {
                g.table.set(q, State::Absent, 0);
            }
            let _ = sys::punch_hole(sh.memfd.as_raw_fd(), s as usize * PAGE, n * PAGE);
            if cause != Cause::Prefetch {
                // The faulting thread gets SIGBUS rather than wrong data.
                let addr = sh.app_addr(s);
                if !sh.poison || sh.uffd.poison(addr, PAGE).is_err() {
                    let _ = sh.uffd.wake(addr, PAGE);
                }
            }
        }
    }
    let queued = std::mem::take(&mut g.table.flush_queue);
    drop(g);
    sh.cv.notify_all();
    if !queued.is_empty() {
        let _ = sh.flush(Some(&queued));
    }
}
