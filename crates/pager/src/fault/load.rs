//! Missing faults: the cluster `cluster` plans, the victims that make room
//! for it, the read and its outcome: pages handed to the policy in order
//! and mapped, or, when they cannot be read, forgotten and the faulting
//! thread signalled.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use pagepilot_policy::FaultKind;

use crate::frame_table::{FrameTable, MODIFIED, PROBE, REFERENCED};
use crate::read_job::{Cause, ReadJob};
use crate::region_state::RegionState;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::sys::PAGE;
use crate::tuning::FaultReads;

use super::cluster::{absent_run, plan};
use super::map::zero_flags;
use super::windows::{complete_window, hand_over_sequence, prefetch_ahead, wait_turn};
use super::Outcome;

/// Serves a missing fault on page `s` (absent): plans the cluster, then
/// zero-fills it under the lock, hands it to a reader thread, or reads it
/// here (`fill`), issuing the windows ahead along a sequence first.
/// `queued`: other faults wait behind this one (`FaultReads`).
pub(super) fn load(
    sh: &Shared,
    mut g: crate::lock::Locked<'_>,
    s: u32,
    write: bool,
    queued: bool,
) -> Outcome {
    Counters::add(&sh.stats().fault_events, 1);
    let cluster = plan(sh, &mut g, s);
    let (first, n) = (cluster.first(), cluster.pages());
    let (sequential, probe) = (cluster.sequential(), cluster.probe());
    // A zero cluster within the free frames is filled under the lock. One
    // that needs frames goes through `fill` like a read cluster: its extra
    // pages take victims (`choose_victims`) rather than the cluster being cut
    // to the free room, so a stream over a region larger than its budget
    // keeps its clusters (each evicting, and writing back, up to k pages in
    // one go) and the budget stays exact.
    if !sh.store().has_data(s as usize) && n <= g.table.room() {
        zero_fill(sh, g, s, n, write);
        return Outcome::Served;
    }
    // A missing fault means this sequence's thread is not inside its
    // prefetched windows: the ones it skipped become the policy's (and
    // evictable), as do those of sequences no longer followed.
    let stream = g.readahead.stream();
    hand_over_sequence(&mut g, stream, u32::MAX);
    let hand_off = match sh.tuning().fault_reads {
        FaultReads::Handler => false,
        FaultReads::Readers => true,
        FaultReads::ReadersWhenQueued => queued,
    };
    let (first, n, probe) = read_around_in_pieces(sh, &mut g, s, (first, n, probe));
    let cause = Cause::Fault {
        page: s,
        write,
        probe,
    };
    if !(hand_off && g.readers.is_some() && sh.store().has_data(s as usize)) {
        // The windows ahead are issued first, their victims chosen while
        // the policy does not know this cluster: an MRU-like policy would
        // otherwise give up the pages the application is about to use.
        if sequential {
            prefetch_ahead(sh, &mut g, s);
        }
        g.table.begin_load(first, n);
        return fill(sh, g, first, n, cause, None);
    }
    // A reader thread reads and maps the cluster (waking the faulting
    // thread); this handler goes on with the next fault.
    g.table.begin_load(first, n);
    let victims = choose_victims(sh, &mut g, s);
    let job = ReadJob {
        first,
        pages: n,
        cause,
        victims,
    };
    match g.readers.as_mut().expect("checked above").send(job) {
        Ok(()) => {
            if sequential {
                prefetch_ahead(sh, &mut g, s);
            }
            Outcome::Served
        }
        Err(std::sync::mpsc::SendError(job)) => fill(sh, g, first, n, cause, Some(job.victims)),
    }
}

/// Pages of a read-around cluster read by one job: a cluster larger than
/// this, into free frames, is read in pieces side by side.
const AROUND_PIECE: usize = 512;

/// A read-around cluster around the fault at `s` (the aligned cluster of
/// `g.readahead.window()` pages, of which `first..first + n` is the run holding `s`)
/// larger than a piece, whose absent pages fit in the free frames, is read
/// whole, in aligned pieces of its absent runs: the faulting page's piece
/// by this fault, the others by reader threads at the same time, so that
/// clusters read earlier (smaller, before their use was seen) do not cut
/// it into as many faults. Filling fresh frames costs the CPU as much as
/// the device costs the read (each frame is allocated and cleared before
/// the device writes it), and one read at a time leaves one of them idle:
/// `benches/cold_floor.c` measured O_DIRECT reads of 8 MiB clusters into
/// fresh memfd frames at 0.67x the kernel's random mmap faults one at a
/// time, 0.87x two at a time. Returns the faulting page's piece and
/// whether it keeps the cluster's probe (it is the cluster's last).
fn read_around_in_pieces(
    sh: &Shared,
    g: &mut RegionState,
    s: u32,
    (first, n, probe): (u32, usize, bool),
) -> (u32, usize, bool) {
    // Fills that overlap are for reader threads of faults' reads only
    // (policy programs get none).
    if g.readers.is_none() || sh.tuning().fault_reads == FaultReads::Handler {
        return (first, n, probe);
    }
    let window = g.readahead.window();
    if !probe || window <= AROUND_PIECE {
        return (first, n, probe);
    }
    let base = s - s % window as u32;
    let end = (base as usize + window).min(g.table.pages()) as u32;
    let piece = AROUND_PIECE as u32;
    let mine = first.max(s - s % piece)..(first + n as u32).min(s - s % piece + piece);
    // The absent runs with data of the cluster, cut at piece boundaries.
    let mut pieces = Vec::new();
    let mut at = base;
    while at < end {
        let data = sh.store().has_data(at as usize);
        let limit = end.min(at - at % piece + piece);
        let run = if data {
            absent_run(sh, g, at, (limit - at) as usize)
        } else {
            0
        };
        if run == 0 {
            at += 1;
            continue;
        }
        pieces.push(at..at + run as u32);
        at += run as u32;
    }
    if pieces.iter().map(|p| p.len()).sum::<usize>() > g.table.room() {
        return (first, n, probe);
    }
    pieces.retain(|p| p.start != mine.start);
    let last = pieces.last().map_or(0, |p| p.end).max(mine.end);
    for p in pieces {
        g.table.begin_load(p.start, p.len());
        let job = ReadJob {
            first: p.start,
            pages: p.len(),
            cause: Cause::Around {
                probe: p.end == last,
            },
            victims: Vec::new(),
        };
        let sent = g.readers.as_mut().expect("checked above").send(job);
        if let Err(std::sync::mpsc::SendError(job)) = sent {
            // No reader left (cannot happen while the sender lives): the
            // piece stays absent, for a fault of its own.
            g.table.abort_load(job.first, job.pages);
        }
    }
    (mine.start, mine.len(), mine.end == last)
}

/// Fills pages `s..s + n` with zeros and maps them, all under the lock:
/// nothing to read and no victim to evict (they fit in the free frames), so
/// the pages never enter a transition state and nobody waits for them (the
/// fast path of a first touch, or of a stream of them). Each page is handed
/// to the policy as a missing fault, in order.
pub(super) fn zero_fill(
    sh: &Shared,
    mut g: crate::lock::Locked<'_>,
    s: u32,
    n: usize,
    write: bool,
) {
    Counters::add(&sh.stats().missing_faults, n as u64);
    Counters::add(&sh.stats().zero_around_pages, n as u64 - 1);
    for q in s..s + n as u32 {
        g.table.fill_zero(q, zero_flags(write));
        g.tell_fault(q, FaultKind::Missing, write && q == s);
    }
    // Mapped before the cleared referenced bits are zapped (as the lock is
    // let go): a cluster page the policy cleared meanwhile is unmapped
    // again, as its flags say.
    sh.views().map_zeros(s, n, write);
    let queued = take_flushes(&mut g);
    drop(g);
    if let Some(queued) = queued {
        sh.flush_asked(queued);
    }
}

/// Reads pages `first..first + n` (all Loading) into frames, evicting what
/// the budget requires, then completes them under the lock: a prefetched
/// window's in ticket order (`windows::complete_window`), a fault's
/// cluster handed to the policy and mapped (`complete_cluster`).
pub(super) fn fill(
    sh: &Shared,
    mut g: crate::lock::Locked<'_>,
    first: u32,
    n: usize,
    cause: Cause,
    chosen: Option<Vec<(u32, bool)>>,
) -> Outcome {
    let incoming = match cause {
        Cause::Fault { page, .. } => page,
        Cause::Prefetch(_) | Cause::Around { .. } => first,
    };
    let mut victims = match chosen {
        Some(v) => v,
        None => choose_victims(sh, &mut g, incoming),
    };
    drop(g);

    let failed = if victims.is_empty() {
        Vec::new()
    } else {
        sh.evict_io(&mut victims)
    };
    // Pages the store knows to be zero (anonymous memory never written out)
    // are filled and mapped by one ioctl: no read.
    let zero = cause.ticket().is_none() && !sh.store().has_data(first as usize);
    let read = if zero { Ok(n) } else { read(sh, first, n) };

    // Account and tell the policy before the faulting thread resumes, so that
    // what it reads of the statistics includes its own fault.
    let mut g = sh.lock();
    let outcome = if let Cause::Prefetch(ticket) = cause {
        g = wait_turn(sh, g, ticket);
        let window = g
            .prefetch
            .account()
            .expect("a window in flight has its turn");
        sh.finish_evictions(&mut g, &victims, &failed);
        complete_window(sh, &mut g, window, read);
        Outcome::Served
    } else {
        sh.finish_evictions(&mut g, &victims, &failed);
        complete_cluster(sh, &mut g, first, n, cause, zero, read)
    };
    let queued = take_flushes(&mut g);
    drop(g);
    // A prefetched window accounted: the next in ticket order may go on.
    sh.notify();
    if let Some(queued) = queued {
        sh.flush_asked(queued);
    }
    outcome
}

/// Reads pages `first..first + n` (Loading) from the store into their
/// frames: the pages it brought (fewer beyond the file's end). Pages the
/// page cache holds are spliced into the memfd (`PageStore::fill_or_read`:
/// new frames are not cleared first; `fill_ways.c` measures 1.25-1.4x the
/// read into the pager's view) while no other read is in flight (writes to
/// the memfd take its inode's lock, so concurrent splices wait for each
/// other where reads through the view do not: two application threads
/// reading at random ran 0.76x with every fill spliced), the others read
/// into the pager's view.
fn read(sh: &Shared, first: u32, n: usize) -> std::io::Result<usize> {
    let t_read = Instant::now();
    let c = &sh.stats();
    let now = c.reads_in_flight.fetch_add(1, Relaxed) + 1;
    c.reads_in_flight_max.fetch_max(now, Relaxed);
    let (store, dst) = (sh.store(), sh.views().pager_addr(first));
    let frames_off = (first as usize * PAGE) as u64;
    // SAFETY: the pages are Loading: no handler maps them and the
    // application cannot reach them until they are mapped.
    let r = unsafe {
        if now == 1 {
            store.fill_or_read(first as usize, n, dst, sh.views().memfd(), frames_off)
        } else {
            store.read(first as usize, n, dst)
        }
    };
    c.reads_in_flight.fetch_sub(1, Relaxed);
    c.read_latency.record(t_read.elapsed().as_nanos() as u64);
    r
}

/// Completes a fault's cluster `first..first + n` (or a piece of it read
/// beside it) whose read brought `read` pages: they are handed to the
/// policy as missing faults in order and mapped (all but a probe); pages
/// it did not bring are absent again. The faulting page not brought (its
/// read failed, or it lies beyond the file's end) is signalled.
fn complete_cluster(
    sh: &Shared,
    g: &mut RegionState,
    first: u32,
    n: usize,
    cause: Cause,
    zero: bool,
    read: std::io::Result<usize>,
) -> Outcome {
    let (fault, write, probe) = match cause {
        Cause::Fault { page, write, probe } => (Some(page), write, probe),
        Cause::Around { probe } => (None, false, probe),
        Cause::Prefetch(_) => unreachable!("a prefetched window is completed as a window"),
    };
    let have = match read {
        Ok(have) => have,
        Err(_) => {
            Counters::add(&sh.stats().read_errors, 1);
            0
        }
    };
    // Pages beyond the file's end (truncated while mapped) are not brought in.
    forget(sh, &mut g.table, first + have as u32, n - have);
    let end = first + have as u32;
    if have > 0 {
        if !zero {
            Counters::add(&sh.stats().bytes_read, (have * PAGE) as u64);
        }
        Counters::add(&sh.stats().missing_faults, have as u64);
        let kind = if zero {
            &sh.stats().zero_around_pages
        } else {
            &sh.stats().readahead_pages
        };
        let brought = fault.filter(|&f| f < end);
        Counters::add(kind, (have - usize::from(brought.is_some())) as u64);
        if let Some(f) = brought {
            g.recent_faults.rotate_right(1);
            g.recent_faults[0] = f;
        }
        let probe = probe && have > 1 && !zero;
        let probe_page = if Some(end - 1) != fault {
            end - 1
        } else {
            first
        };
        for q in first..end {
            // A zero cluster is mapped writable for a write: all dirty.
            let dirty = if write && (zero || Some(q) == fault) {
                MODIFIED
            } else {
                0
            };
            let seen = if probe && q == probe_page {
                PROBE
            } else {
                REFERENCED
            };
            g.table.complete_load(q, seen | dirty);
            g.tell_fault(q, FaultKind::Missing, write && Some(q) == fault);
        }
        // Mapped under the lock: the pages are Resident now and could
        // otherwise be chosen as victims and zapped before they are mapped.
        // Pages whose referenced bit the policy cleared are zapped again as
        // the lock is let go.
        if zero {
            sh.views().map_zeros(first, have, write);
        } else {
            map_cluster(sh, first, end, fault, write, probe.then_some(probe_page));
        }
    }
    match fault {
        // The cluster holds the faulting page (`ReadAhead::plan`): not
        // brought, its read failed or it lies beyond the file's end.
        Some(f) if f >= end => signal(sh, f),
        _ => Outcome::Served,
    }
}

/// The pages the policy asked to flush, and the pool that writes them back
/// if the region is in one; none (the usual case, kept cheap on the fault
/// path) if it asked for none.
fn take_flushes(g: &mut RegionState) -> Option<crate::evict::Flushes> {
    let pages = g.table.take_flush_requests()?;
    Some(crate::evict::Flushes {
        pages,
        pool: g.table.source().and_then(|s| s.flusher()),
    })
}

/// Maps a missing fault's cluster `first..end` read from the store: the
/// faulting page `f` (if it was read) write-protected unless the fault was a
/// write, the others write-protected (clean) where the region is writable,
/// for dirty tracking; `skip` (a probe) stays unmapped.
fn map_cluster(sh: &Shared, first: u32, end: u32, f: Option<u32>, write: bool, skip: Option<u32>) {
    let f = f.unwrap_or(end);
    let mut runs = [(first, f.min(end)), (f + 1, end)];
    if let Some(p) = skip {
        for r in &mut runs {
            if (r.0..r.1).contains(&p) {
                // The probe is the first or last page of the cluster.
                *r = if p == r.0 { (p + 1, r.1) } else { (r.0, p) };
            }
        }
    }
    if f < end {
        sh.views().map(f, 1, sh.views().writable() && !write);
    }
    for (a, b) in runs {
        if b > a {
            sh.views().map(a, (b - a) as usize, sh.views().writable());
        }
    }
}

/// Victims making room in the budget for pages now `Loading` from `s` on
/// (`RegionState::choose_victims`).
pub(super) fn choose_victims(sh: &Shared, g: &mut RegionState, s: u32) -> Vec<(u32, bool)> {
    g.choose_victims(s, sh.evictions_so_far(), sh.stats())
}

/// Pages `first..first + n`, being read, were not (the read failed, or
/// they lie beyond the file's end): they become absent again and their
/// frames are freed.
pub(super) fn forget(sh: &Shared, table: &mut FrameTable, first: u32, n: usize) {
    if n == 0 {
        return;
    }
    table.abort_load(first, n);
    sh.views().punch(first, n);
}

/// The fault at page `s` cannot be served (its read failed, or it lies
/// beyond the file's end): the faulting thread gets SIGBUS, as it would
/// from the kernel's `MAP_SHARED` mapping, instead of wrong data or a wait
/// that never ends. The page is poisoned, so that a thread waiting on the
/// userfaultfd retries its access into SIGBUS (without UFFDIO_POISON it is
/// woken and faults again: the read is retried).
pub(super) fn signal(sh: &Shared, s: u32) -> Outcome {
    Counters::add(&sh.stats().signalled_faults, 1);
    sh.views().poison(s);
    Outcome::Signal
}
