//! Prefetched windows read on the region's io_uring: their victims evicted
//! and reads submitted after the lock is released, and reaped in ticket
//! order when the application reaches a page still being read.

use std::sync::atomic::Ordering::Relaxed;

use crate::frame_table::State;
use crate::region_state::RegionState;
use crate::shared::Shared;
use crate::sys::PAGE;

use super::copy_in::copy_window;
use super::windows::complete_window;

/// Submits the reads of the windows issued for the ring under the lock.
/// Their victims are evicted here first (written back if dirty, punched
/// out), so that the memfd never holds more than the budget; the read then
/// goes to the disk from this thread. A read the ring cannot take is done
/// here and recorded as completed.
pub(super) fn issue_queued(sh: &Shared) {
    let Some(ring) = &sh.ring() else {
        return;
    };
    let jobs = sh.lock().prefetch.take_queued();
    for mut job in jobs {
        let ticket = job.cause.ticket().unwrap_or_default();
        let (first, n) = (job.first as usize, job.pages);
        let dst = sh.views().pager_addr(job.first);
        // Into free frames: a worker fills them (see `Ring`).
        let punt = job.victims.is_empty();
        if !punt {
            sh.evict(&mut job.victims);
        }
        // Pages the page cache holds are copied in here (`copy_in`).
        if let Some(res) = copy_window(sh, job.first, n) {
            ring.lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(ticket, res);
            continue;
        }
        // Where copying in is off (the faulting thread's service), pages the
        // page cache holds, read by this thread (not punted to a worker), are
        // spliced in here and now: the ring's read of them would run inline
        // as well, through a mapping of frames it first faults in and clears
        // (`bench scan`, warm sequential under a budget a quarter of the
        // file: 1.24x the pages per second at one thread; punted windows
        // spliced here instead lost the worker's overlap, 0.85-0.94x).
        let alone = sh.stats().reads_in_flight.load(Relaxed) == 0;
        let filled = (!punt && alone)
            .then(|| {
                let frames_off = (first * PAGE) as u64;
                sh.store().fill(first, n, sh.views().memfd(), frames_off)
            })
            .flatten();
        if let Some(filled) = filled {
            let res = match filled {
                Ok(have) => (have * PAGE) as i32,
                Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
            };
            ring.lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(ticket, res);
            continue;
        }
        let mut r = ring.lock().unwrap_or_else(|p| p.into_inner());
        let submitted = sh.store().read_source(first, n).is_some_and(|(fd, off)| {
            // SAFETY: the window's pages are Loading until the read is
            // reaped: nobody maps or touches their frames. The pager view
            // and the store's descriptor outlive the ring's requests (it is
            // drained when the region closes).
            unsafe { r.read(fd, dst, n * PAGE, off, ticket, punt) }.is_ok()
        });
        if !submitted {
            // SAFETY: as above: the pages are Loading, their frames unused.
            let res = match unsafe { sh.store().read(first, n, dst) } {
                Ok(have) => (have * PAGE) as i32,
                Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
            };
            r.record(ticket, res);
        }
    }
}

/// Whether page `s` waits for the ring: Loading in a prefetched window in
/// flight.
pub(super) fn waits_for_ring(g: &RegionState, s: u32) -> bool {
    g.table.state(s) == State::Loading && g.prefetch.inflight_stream(s).is_some()
}

/// Reaps and completes the ring's windows until page `s` no longer waits
/// for it. Windows complete in ticket order.
pub(super) fn ring_wait<'a>(
    sh: &'a Shared,
    mut g: crate::lock::Locked<'a>,
    s: u32,
) -> crate::lock::Locked<'a> {
    let Some(ring) = &sh.ring() else {
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
pub(super) fn complete_ready(sh: &Shared, g: &mut RegionState) {
    let Some(ring) = &sh.ring() else {
        return;
    };
    while let Some((first, n)) = g.prefetch.oldest_in_flight() {
        let ticket = g.prefetch.turn();
        let mut r = ring.lock().unwrap_or_else(|p| p.into_inner());
        let Some(res) = r.take(ticket) else {
            return;
        };
        drop(r);
        let window = g.prefetch.account().expect("the oldest window in flight");
        let want = n * PAGE;
        // Whole pages the read brought; the rest (end of file, or the
        // kernel stopped early) is read here, as `PageStore::read` would.
        let whole = usize::try_from(res).map_or(0, |b| b.min(want) / PAGE);
        let mut read = if res < 0 {
            Err(std::io::Error::from_raw_os_error(-res))
        } else {
            Ok(whole)
        };
        if read.is_ok() && whole < n {
            let q = first + whole as u32;
            // SAFETY: the window's pages are still Loading: frames unused.
            read = unsafe {
                sh.store()
                    .read(q as usize, n - whole, sh.views().pager_addr(q))
            }
            .map(|have| whole + have);
        }
        complete_window(sh, g, window, read);
    }
}
