//! The fault loop: handler threads read the region's userfaultfd and serve
//! missing faults (clustered reads from the dataspace into the pager's view,
//! then UFFDIO_CONTINUE), minor faults (reference-bit emulation) and
//! write-protect faults (dirty tracking).

use std::os::fd::AsRawFd;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use pagepilot_policy::{Fault, FaultKind, Page};

use crate::engine::{Inner, ReadJob, Shared};
use crate::resident::{State, Table, MODIFIED, PENDING, REFERENCED};
use crate::stats::Counters;
use crate::sys::{self, UffdMsg, FLAG_MINOR, FLAG_WP, FLAG_WRITE, PAGE};

/// Runs one handler thread until the region's stop event fires.
///
/// After serving a batch the thread polls the userfaultfd without sleeping
/// for up to the region's spin time: faults come in streams (a scan, a
/// burst of first touches), and catching the next one awake saves the
/// handler's wake-up, the larger part of a fault's cost on these machines.
pub fn run(shared: Arc<Shared>, waiter: sys::Waiter) {
    sys::block_async_signals();
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
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
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
        let stamp = shared.evict_seq.load(std::sync::atomic::Ordering::Acquire);
        let n = match shared.uffd.read_msgs(&mut msgs) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        let mut stop = false;
        for m in &msgs[..n] {
            let Some((addr, flags)) = m.pagefault() else {
                continue;
            };
            if addr & !(PAGE - 1) == doorbell {
                let _ = shared.uffd.zero_page(doorbell, false);
                stop = true;
                continue;
            }
            let t0 = Instant::now();
            serve(&shared, addr, flags, stamp);
            shared.stats.latency.record(t0.elapsed().as_nanos() as u64);
        }
        if stop {
            return true;
        }
    }
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

/// Serves one fault at `addr`. `stamp` is the region's eviction sequence
/// number read before the fault was (tells a stale event, see `serve_access`).
pub fn serve(sh: &Shared, addr: usize, flags: u64, stamp: u64) -> Outcome {
    if addr < sh.app || addr >= sh.app + sh.map_len {
        return Outcome::Served;
    }
    let slot = ((addr - sh.app) / PAGE) as u32;
    let outcome = if flags & FLAG_WP != 0 {
        serve_wp(sh, slot);
        Outcome::Served
    } else {
        serve_access(sh, slot, flags, stamp)
    };
    // Windows queued for the ring are evicted for and submitted now, after
    // the faulting thread was woken: that work overlaps its run.
    issue_queued(sh);
    outcome
}

/// Submits the reads of the windows issued for the ring under the lock.
/// Their victims are evicted here first (written back if dirty, punched
/// out), so that the memfd never holds more than the budget; the read then
/// goes to the disk from this thread. A read the ring cannot take is done
/// here and recorded as completed.
fn issue_queued(sh: &Shared) {
    let Some(ring) = &sh.ring else {
        return;
    };
    let jobs = std::mem::take(&mut sh.lock().queued);
    for mut job in jobs {
        let ticket = job.ticket.unwrap_or_default();
        let (first, n) = (job.first as usize, job.pages);
        let dst = sh.pager_addr(job.first);
        if !job.victims.is_empty() {
            let failed = sh.evict_io(&mut job.victims);
            let mut g = sh.lock();
            sh.finish_evictions(&mut g, &job.victims, &failed);
            drop(g);
            sh.notify();
        }
        let mut r = ring.lock().unwrap_or_else(|p| p.into_inner());
        let submitted = sh.store.read_source(first, n).is_some_and(|(fd, off)| {
            // SAFETY: the window's pages are Loading until the read is
            // reaped: nobody maps or touches their frames. The pager view
            // and the store's descriptor outlive the ring's requests (it is
            // drained when the region closes).
            unsafe { r.read(fd, dst, n * PAGE, off, ticket) }.is_ok()
        });
        if !submitted {
            // SAFETY: as above: the pages are Loading, their frames unused.
            let res = match unsafe { sh.store.read(first, n, dst) } {
                Ok(have) => (have * PAGE) as i32,
                Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
            };
            r.record(ticket, res);
        }
    }
}

/// Whether page `s` waits for the ring: Loading in a prefetched window in
/// flight.
fn waits_for_ring(g: &Inner, s: u32) -> bool {
    g.table.state(s) == State::Loading
        && g.inflight
            .iter()
            .any(|&(f, n)| (f..f + n as u32).contains(&s))
}

/// Reaps and completes the ring's windows until page `s` no longer waits
/// for it. Windows complete in ticket order.
fn ring_wait<'a>(sh: &'a Shared, mut g: MutexGuard<'a, Inner>, s: u32) -> MutexGuard<'a, Inner> {
    let Some(ring) = &sh.ring else {
        return g;
    };
    while waits_for_ring(&g, s) {
        drop(g);
        issue_queued(sh);
        let reaped = ring.lock().unwrap_or_else(|p| p.into_inner()).reap(true);
        if reaped.is_err() {
            // Not a wait (EBUSY and the like): the reads still complete.
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        g = sh.lock();
        complete_ready(sh, &mut g);
    }
    g
}

/// Completes, in ticket order, the windows whose reads the ring has reaped:
/// their pages become Resident and PENDING, mapped but for the marker, as a
/// reader thread would leave them.
fn complete_ready(sh: &Shared, g: &mut Inner) {
    let Some(ring) = &sh.ring else {
        return;
    };
    while let Some(&(first, n)) = g.inflight.front() {
        let ticket = g.prefetch_done;
        let mut r = ring.lock().unwrap_or_else(|p| p.into_inner());
        let Some(res) = r.take(ticket) else {
            return;
        };
        drop(r);
        g.prefetch_done += 1;
        g.inflight.pop_front();
        let want = n * PAGE;
        // Whole pages the read brought; the rest (end of file, or the
        // kernel stopped early) is read here, as `Dataspace::read` would.
        let whole = usize::try_from(res).map_or(0, |b| b.min(want) / PAGE);
        let mut read = if res < 0 {
            Err(std::io::Error::from_raw_os_error(-res))
        } else {
            Ok(whole)
        };
        if read.is_ok() && whole < n {
            let q = first + whole as u32;
            // SAFETY: the window's pages are still Loading: frames unused.
            read = unsafe { sh.store.read(q as usize, n - whole, sh.pager_addr(q)) }
                .map(|have| whole + have);
        }
        match read {
            Ok(have) => {
                // Pages beyond the file's end (truncated meanwhile) are not
                // read ahead: a touch faults and gets SIGBUS.
                forget(sh, &mut g.table, first + have as u32, n - have);
                let n = have;
                Counters::add(&sh.stats.bytes_read, (n * PAGE) as u64);
                Counters::add(&sh.stats.missing_faults, n as u64);
                Counters::add(&sh.stats.readahead_pages, n as u64);
                for q in first..first + n as u32 {
                    g.table.set(q, State::Resident, PENDING);
                }
                if n > 0 {
                    g.pending.push_back((first, n));
                }
                if n > 1 {
                    map(sh, first + 1, n - 1, sh.writable);
                }
            }
            Err(_) => {
                Counters::add(&sh.stats.read_errors, 1);
                forget(sh, &mut g.table, first, n);
            }
        }
    }
}

/// Pages `first..first + n`, being read, were not (the read failed, or
/// they lie beyond the file's end): they become absent again and their
/// frames are freed.
fn forget(sh: &Shared, table: &mut Table, first: u32, n: usize) {
    if n == 0 {
        return;
    }
    for q in first..first + n as u32 {
        table.set(q, State::Absent, 0);
    }
    let _ = sys::punch_hole(sh.memfd.as_raw_fd(), first as usize * PAGE, n * PAGE);
}

/// The fault at page `s` cannot be served (its read failed, or it lies
/// beyond the file's end): the faulting thread gets SIGBUS, as it would
/// from the kernel's `MAP_SHARED` mapping, instead of wrong data or a wait
/// that never ends. The page is poisoned, so that a thread waiting on the
/// userfaultfd retries its access into SIGBUS (without UFFDIO_POISON it is
/// woken and faults again: the read is retried).
fn signal(sh: &Shared, s: u32) -> Outcome {
    Counters::add(&sh.stats.signalled_faults, 1);
    let addr = sh.app_addr(s);
    let poisoned = sh.poison
        && (sh.uffd.poison(addr, PAGE).is_ok()
            // EEXIST: the empty PTE holds a write-protect marker, which
            // un-protecting clears.
            || (sh.uffd.writeprotect(addr, PAGE, false).is_ok()
                && sh.uffd.poison(addr, PAGE).is_ok()));
    if !poisoned {
        let _ = sh.uffd.wake(addr, PAGE);
    }
    Outcome::Signal
}

fn serve_wp(sh: &Shared, s: u32) {
    Counters::add(&sh.stats.wp_faults, 1);
    let g = ring_wait(sh, sh.lock(), s);
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

fn serve_access(sh: &Shared, s: u32, flags: u64, stamp: u64) -> Outcome {
    let write = flags & FLAG_WRITE != 0;
    let mut g = sh.lock();
    if g.table.state(s) == State::Loading {
        stall(sh, &mut g, s);
    }
    let g = ring_wait(sh, g, s);
    let mut g = sh.wait_stable(g, s);
    match g.table.state(s) {
        State::Resident => {
            if g.table.flags(s) & PENDING != 0 {
                enter_window(sh, &mut g, s);
            }
            let f = g.table.flags(s);
            let nf = f | REFERENCED | if write { MODIFIED } else { 0 };
            g.table.set_flags(s, nf);
            map_access(sh, s, write, sh.writable && nf & MODIFIED == 0);
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
        State::Absent => return load(sh, g, s, write),
        State::Loading | State::Evicting => unreachable!("wait_stable returned a transition"),
    }
    Outcome::Served
}

fn page(s: u32) -> Page {
    Page {
        slot: s,
        vpn: u64::from(s),
    }
}

/// How many pages to bring in for a missing fault at `s`: the fault-around
/// size, or a window doubling along a sequence of faults, cut at the first
/// page that is not absent or not of `s`'s kind, at the region's end and at
/// half the budget. A page with nothing to read (anonymous memory never
/// written out) is zero-filled: alone outside a sequence (a random first
/// touch has no stream to amortise over), in clusters of up to
/// `zero_around_max` pages along one (a stream of first touches: the fault
/// at `s` continues the previous fill, i.e. the last fault was at `s - 1`
/// or the stream has run through the last cluster).
fn plan(sh: &Shared, g: &mut Inner, s: u32) -> (usize, bool) {
    let sequential = s == g.next_expected && s != 0;
    let (max, alone) = if sh.store.has_data(s as usize) {
        (sh.tuning.readahead_max, sh.tuning.fault_around)
    } else {
        (sh.tuning.zero_around_max, 1)
    };
    g.window = if sequential {
        (g.window * 2).clamp(1, max.max(1))
    } else {
        alone.max(1)
    };
    let n = absent_run(sh, g, s, g.window);
    g.next_expected = s + n as u32;
    (n, sequential)
}

/// Absent pages from `s` on of `s`'s kind (all to be read, or all with
/// nothing to read, to be zero-filled), at most `want`, at most half the
/// budget (a cluster never evicts most of the resident set).
fn absent_run(sh: &Shared, g: &Inner, s: u32, want: usize) -> usize {
    if g.table.state(s) != State::Absent {
        return 0;
    }
    let data = sh.store.has_data(s as usize);
    let limit = want
        .min(g.table.pages() - s as usize)
        .min((g.table.capacity / 2).max(1));
    let mut n = 1;
    while n < limit
        && g.table.state(s + n as u32) == State::Absent
        && sh.store.has_data((s + n as u32) as usize) == data
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
    /// Asynchronous read-ahead with its ticket: the first page is left
    /// unmapped as the marker whose first touch asks for the next window.
    Prefetch(u64),
}

/// The application touched page `s` of a prefetched window it had not
/// entered yet (the window's first page is left unmapped for this): the
/// sequence goes on. First the windows ahead are kept in flight (their
/// victims are chosen now, while the policy does not know the entered
/// window yet, so an MRU-like policy gives up pages the application has
/// finished with, not the ones it is about to use); then the entered window,
/// and any skipped before it, are handed to the policy as missing faults,
/// in order.
fn enter_window(sh: &Shared, g: &mut Inner, s: u32) {
    let Some(i) = g
        .pending
        .iter()
        .position(|&(f, n)| (f..f + n as u32).contains(&s))
    else {
        return;
    };
    g.window = (g.window * 2).clamp(1, sh.tuning.readahead_max.max(1));
    prefetch_ahead(sh, g, i + 1);
    hand_over(g, i + 1);
}

/// The application reached page `s` of a prefetched window whose read is
/// still in flight: it has finished with every window before it, so their
/// frames go to the next window now, while this one is read, rather than
/// when it is entered (the disk then has `readahead_depth + 1` reads in
/// flight while the application waits, for the same frames). Windows read
/// but skipped are handed to the policy first, as on a missing fault.
fn stall(sh: &Shared, g: &mut Inner, s: u32) {
    let Some(j) = g
        .inflight
        .iter()
        .position(|&(f, n)| (f..f + n as u32).contains(&s))
    else {
        return;
    };
    let all = g.pending.len();
    hand_over(g, all);
    prefetch_ahead(sh, g, j + 1);
}

/// Hands the first `count` pending windows to the policy, page by page in
/// order, as missing faults.
fn hand_over(g: &mut Inner, count: usize) {
    for _ in 0..count {
        let Some((first, n)) = g.pending.pop_front() else {
            return;
        };
        for q in first..first + n as u32 {
            let f = g.table.flags(q);
            if g.table.state(q) != State::Resident || f & PENDING == 0 {
                continue;
            }
            g.table.set_flags(q, (f & !PENDING) | REFERENCED);
            g.time += 1;
            let fault = Fault {
                page: page(q),
                kind: FaultKind::Missing,
                write: false,
                time: g.time,
            };
            let Inner { table, policy, .. } = &mut *g;
            policy.on_fault(fault, table);
            table.zap_cleared();
        }
    }
}

fn load(sh: &Shared, mut g: std::sync::MutexGuard<'_, Inner>, s: u32, write: bool) -> Outcome {
    Counters::add(&sh.stats.fault_events, 1);
    let (n, sequential) = plan(sh, &mut g, s);
    // A zero cluster within the free frames is filled under the lock. One
    // that needs frames goes through `fill` like a read cluster: its extra
    // pages take victims (`choose_victims`) rather than the cluster being cut
    // to the free room, so a stream over a region larger than its budget
    // keeps its clusters (each evicting, and writing back, up to k pages in
    // one go) and the budget stays exact.
    if !sh.store.has_data(s as usize) && n <= g.table.room() {
        zero_fill(sh, g, s, n, write);
        return Outcome::Served;
    }
    // A missing fault means the application is not inside prefetched
    // windows: the ones it skipped become the policy's (and evictable).
    let all = g.pending.len();
    hand_over(&mut g, all);
    let tx = g.readers.clone().filter(|_| sh.tuning.fault_reads);
    let Some(tx) = tx.filter(|_| sh.store.has_data(s as usize)) else {
        // The windows ahead are issued first, their victims chosen while
        // the policy does not know this cluster: an MRU-like policy would
        // otherwise give up the pages the application is about to use.
        if sequential {
            prefetch_ahead(sh, &mut g, 0);
        }
        return fill(sh, g, s, n, Cause::Fault(write), None);
    };
    // A reader thread reads and maps the cluster (waking the faulting
    // thread); this handler goes on with the next fault.
    for q in s..s + n as u32 {
        g.table.set(q, State::Loading, 0);
    }
    let victims = choose_victims(sh, &mut g, s);
    let job = ReadJob {
        first: s,
        pages: n,
        ticket: None,
        write,
        victims,
    };
    match tx.send(job) {
        Ok(()) => {
            if sequential {
                prefetch_ahead(sh, &mut g, 0);
            }
            Outcome::Served
        }
        Err(std::sync::mpsc::SendError(job)) => {
            fill(sh, g, s, n, Cause::Fault(write), Some(job.victims))
        }
    }
}

/// Fills pages `s..s + n` with zeros and maps them, all under the lock:
/// nothing to read and no victim to evict (they fit in the free frames), so
/// the pages never enter a transition state and nobody waits for them (the
/// fast path of a first touch, or of a stream of them). Each page is handed
/// to the policy as a missing fault, in order.
fn zero_fill(sh: &Shared, mut g: std::sync::MutexGuard<'_, Inner>, s: u32, n: usize, write: bool) {
    Counters::add(&sh.stats.missing_faults, n as u64);
    Counters::add(&sh.stats.zero_around_pages, n as u64 - 1);
    for q in s..s + n as u32 {
        g.table.set(q, State::Resident, zero_flags(write));
        g.time += 1;
        let fault = Fault {
            page: page(q),
            kind: FaultKind::Missing,
            write: write && q == s,
            time: g.time,
        };
        let Inner { table, policy, .. } = &mut *g;
        policy.on_fault(fault, table);
    }
    // Mapped before the cleared referenced bits are zapped: a cluster page
    // the policy cleared meanwhile is unmapped again, as its flags say.
    map_zeros(sh, s, n, write);
    g.table.zap_cleared();
    let queued = std::mem::take(&mut g.table.flush_queue);
    drop(g);
    if !queued.is_empty() {
        let _ = sh.flush(Some(&queued));
    }
}

/// The flags of a zero-filled page: referenced, and modified if the fault
/// was a write. A write fault's whole cluster is mapped writable, so every
/// page of it must count as modified (the stream is writing them): one
/// written back while still all zeros is correct, one written but thought
/// clean would be lost.
fn zero_flags(write: bool) -> u8 {
    REFERENCED | if write { MODIFIED } else { 0 }
}

/// Maps pages `s..s + n` (absent from the memfd) as zero pages in one call:
/// writable for a write fault, else write-protected where dirty tracking is
/// on, so a later write to any of them is seen (a stream of reads then
/// writes pays one write-protect fault per page, as it did unclustered).
fn map_zeros(sh: &Shared, s: u32, n: usize, write: bool) {
    let wp = sh.writable && !write;
    if sh.uffd.zero_range(sh.app_addr(s), n * PAGE, wp).is_err() {
        // Some page has a frame already (or the ioctl is unavailable): fill
        // the holes through the pager's view and map what is not mapped.
        let _ = sys::populate(sh.pager_addr(s) as usize, n * PAGE);
        map(sh, s, n, wp);
    }
}

/// Keeps up to `readahead_depth` windows ahead of the application, from
/// `next_expected` on: windows in flight plus windows read but not touched
/// yet, less the first `behind` of them (pending first, then in flight: the
/// ones the application is in or has passed). All of them fit in half the
/// budget, or they would evict each other.
fn prefetch_ahead(sh: &Shared, g: &mut Inner, behind: usize) {
    if !sh.tuning.async_readahead {
        return;
    }
    let tx = g.readers.clone();
    if tx.is_none() && sh.ring.is_none() {
        return;
    }
    let w = g.window.max(1);
    let room = (g.table.capacity / 2 / w).saturating_sub(1).max(1);
    let depth = sh.tuning.readahead_depth.min(room);
    while (g.pending.len() + g.inflight.len()).saturating_sub(behind) < depth {
        let first = g.next_expected;
        if first as usize >= g.table.pages() || !sh.store.has_data(first as usize) {
            // Nothing to read ahead: a stream of first touches gets zero
            // clusters at its faults instead.
            break;
        }
        // The pages are Loading from now on: a fault on them waits for the
        // read instead of racing the prefetcher with a read of its own.
        let n = absent_run(sh, g, first, w);
        if n == 0 {
            break;
        }
        for q in first..first + n as u32 {
            g.table.set(q, State::Loading, 0);
        }
        let victims = choose_victims(sh, g, first);
        let job = ReadJob {
            first,
            pages: n,
            ticket: Some(g.prefetch_issued),
            write: false,
            victims,
        };
        let sent = match &tx {
            Some(tx) => tx.send(job),
            None => {
                // Evicted for and submitted after the lock is released.
                g.queued.push(job);
                Ok(())
            }
        };
        if let Err(std::sync::mpsc::SendError(job)) = sent {
            // No prefetcher left (cannot happen while the sender lives):
            // give the frames back and forget the window.
            let mut victims = job.victims;
            let failed = sh.evict_io(&mut victims);
            sh.finish_evictions(g, &victims, &failed);
            for q in first..first + n as u32 {
                g.table.set(q, State::Absent, 0);
            }
            break;
        }
        g.prefetch_issued += 1;
        g.inflight.push_back((first, n));
        g.next_expected = first + n as u32;
    }
}

/// Waits until prefetch `ticket` is the next to be accounted.
fn wait_turn<'a>(
    sh: &'a Shared,
    mut g: std::sync::MutexGuard<'a, Inner>,
    ticket: u64,
) -> std::sync::MutexGuard<'a, Inner> {
    while g.prefetch_done != ticket {
        g = sh.wait(g);
    }
    g
}

/// Runs one of a region's prefetchers until the channel closes.
pub fn run_reader(
    shared: Arc<Shared>,
    rx: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<ReadJob>>>,
) {
    sys::block_async_signals();
    loop {
        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(job) = next else {
            return;
        };
        // The window's pages were made Loading when it was issued.
        let g = shared.lock();
        let cause = match job.ticket {
            Some(t) => Cause::Prefetch(t),
            None => Cause::Fault(job.write),
        };
        let _ = fill(&shared, g, job.first, job.pages, cause, Some(job.victims));
    }
}

/// Victims making room in the budget for pages now `Loading` from `s` on.
fn choose_victims(sh: &Shared, g: &mut Inner, s: u32) -> Vec<(u32, bool)> {
    // Frames for the pages read ahead are taken back first (ReclaimFrame: a
    // policy program names them without queueing anything), then the
    // faulting page's own victim (PageFault, which queues the page). A
    // built-in policy answers no reclaim and names every victim. Either way
    // all victims are chosen before the cluster is read, so an MRU-like
    // policy gives up pages it has used, not the ones being read.
    let excess = g.table.excess();
    let mut victims = if excess > 1 {
        sh.take_reclaimed(g, excess - 1)
    } else {
        Vec::new()
    };
    while victims.len() < excess {
        match sh.take_victim(g, s) {
            Some(v) => victims.push(v),
            None => {
                Counters::add(&sh.stats.over_budget, 1);
                break;
            }
        }
    }
    victims
}

/// Reads pages `s..s+n` (all Absent) into frames, evicting what the budget
/// requires, hands them to the policy as missing faults in order and maps them.
fn fill(
    sh: &Shared,
    mut g: std::sync::MutexGuard<'_, Inner>,
    s: u32,
    n: usize,
    cause: Cause,
    chosen: Option<Vec<(u32, bool)>>,
) -> Outcome {
    for q in s..s + n as u32 {
        g.table.set(q, State::Loading, 0);
    }
    let mut victims = match chosen {
        Some(v) => v,
        None => choose_victims(sh, &mut g, s),
    };
    drop(g);

    let failed = if victims.is_empty() {
        Vec::new()
    } else {
        sh.evict_io(&mut victims)
    };
    // Pages the store knows to be zero (anonymous memory never written out)
    // are filled and mapped by one ioctl below: no read.
    let prefetch = matches!(cause, Cause::Prefetch(_));
    let zero = !prefetch && !sh.store.has_data(s as usize);
    let read = if zero {
        Ok(n)
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
    if let Cause::Prefetch(ticket) = cause {
        g = wait_turn(sh, g, ticket);
        g.prefetch_done += 1;
        g.inflight.pop_front();
    }
    sh.finish_evictions(&mut g, &victims, &failed);
    // Pages beyond the file's end (truncated while mapped) are not brought in.
    let read = read.inspect(|&have| forget(sh, &mut g.table, s + have as u32, n - have));
    let mut outcome = Outcome::Served;
    match read {
        Ok(have) if have > 0 => {
            let n = have;
            if !zero {
                Counters::add(&sh.stats.bytes_read, (n * PAGE) as u64);
            }
            Counters::add(&sh.stats.missing_faults, n as u64);
            let ahead = if prefetch { n } else { n - 1 };
            let kind = if zero {
                &sh.stats.zero_around_pages
            } else {
                &sh.stats.readahead_pages
            };
            Counters::add(kind, ahead as u64);
            if prefetch {
                // Handed to the policy when the application enters the window.
                for q in s..s + n as u32 {
                    g.table.set(q, State::Resident, PENDING);
                }
                g.pending.push_back((s, n));
            }
            for q in (s..s + n as u32).filter(|_| !prefetch) {
                // A zero cluster is mapped writable for a write: all dirty.
                let dirty = if write && (zero || q == s) {
                    MODIFIED
                } else {
                    0
                };
                g.table.set(q, State::Resident, REFERENCED | dirty);
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
            if prefetch {
                // The first page stays unmapped: its touch enters the window.
            } else if zero {
                map_zeros(sh, s, n, write);
            } else {
                map(sh, s, 1, sh.writable && !write);
            }
            if n > 1 && !zero {
                map(sh, s + 1, n - 1, sh.writable);
            }
        }
        Ok(_) => {
            // The faulting page itself lies beyond the file's end.
            if !prefetch {
                outcome = signal(sh, s);
            }
        }
        Err(_) => {
            Counters::add(&sh.stats.read_errors, 1);
            forget(sh, &mut g.table, s, n);
            if !prefetch {
                outcome = signal(sh, s);
            }
        }
    }
    let queued = std::mem::take(&mut g.table.flush_queue);
    drop(g);
    sh.notify();
    if !queued.is_empty() {
        let _ = sh.flush(Some(&queued));
    }
    outcome
}
