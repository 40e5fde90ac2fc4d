//! How many pages a missing fault brings in: the sequences of faults the
//! region follows (windows doubling along each), read-around of random
//! faults sized by use (`around`), zero clusters along streams of first
//! touches, all cut at the first page that is not absent.

use crate::engine::{Inner, Shared};
use crate::frame_table::State;

/// The pages a missing fault brings in: `first..first + pages`, the
/// faulting page among them.
pub(super) struct Plan {
    /// First page of the cluster (the faulting page but for read-around).
    pub first: u32,
    /// Pages in the cluster.
    pub pages: usize,
    /// The fault continues a sequence (windows ahead are issued).
    pub sequential: bool,
    /// The cluster is read around a random fault: its last page (or its
    /// first, if the last is the faulting page) stays unmapped as a probe of
    /// its use (`around`).
    pub probe: bool,
}

/// How many pages to bring in for a missing fault at `s`: the fault-around
/// size, or a window doubling along a sequence of faults, cut at the first
/// page that is not absent or not of `s`'s kind, at the region's end and at
/// half the budget. Where the options leave fault-around to the pager, a
/// random fault reads the absent pages around it within an aligned cluster
/// sized by use (`around`): aligned, so that the first fault in a cluster
/// reads all of it and clusters read earlier never cut a later one short.
/// A page with nothing to read (anonymous memory never
/// written out) is zero-filled: alone outside a sequence (a random first
/// touch has no stream to amortise over), in clusters of up to
/// `zero_around_max` pages along one (a stream of first touches: the fault
/// at `s` continues the previous fill, i.e. the last fault was at `s - 1`
/// or the stream has run through the last cluster).
pub(super) fn plan(sh: &Shared, g: &mut Inner, s: u32) -> Plan {
    let sequential = follow_stream(g, s);
    let data = sh.store.has_data(s as usize);
    let (max, alone) = if data {
        (sh.tuning.readahead_max, sh.tuning.fault_around)
    } else {
        (sh.tuning.zero_around_max, 1)
    };
    let around = data && !sequential && alone == 0;
    let (first, n) = if around {
        // A region larger than its budget fills its free frames and then
        // displaces: its clusters count from the first.
        let displacing = g.table.room() == 0 || g.table.pages() > g.table.budget();
        g.window = g.around.on_fault(displacing);
        let base = s - s % g.window as u32;
        let before = absent_before(sh, g, s, (s - base) as usize);
        let first = s - before as u32;
        let end = (base as usize + g.window).min(g.table.pages());
        (first, absent_run(sh, g, first, end - first as usize))
    } else {
        g.window = if sequential {
            (g.window * 2).clamp(1, max.max(1))
        } else {
            alone.max(1)
        };
        (s, absent_run(sh, g, s, g.window))
    };
    g.next_expected = first + n as u32;
    Plan {
        first,
        pages: n,
        sequential,
        probe: around && n > 1,
    }
}

/// Absent pages with data right before `s`, at most `want`.
fn absent_before(sh: &Shared, g: &Inner, s: u32, want: usize) -> usize {
    (1..=want as u32)
        .take_while(|&d| {
            g.table.state(s - d) == State::Absent && sh.store.has_data((s - d) as usize)
        })
        .count()
}

/// Makes the sequence a fault at `s` continues the current one, if one of
/// the others does (the current one is remembered in its place), and says
/// whether the fault continues a sequence. A fault that continues none
/// starts a new current sequence; the current one is remembered, the least
/// recent other forgotten. A remembered sequence counts once it has been
/// continued twice: a random fault that happens to land after an earlier
/// one is not a stream.
fn follow_stream(g: &mut Inner, s: u32) -> bool {
    if s == g.next_expected && s != 0 {
        g.confirmed = true;
        return true;
    }
    let current = (g.next_expected, g.window, g.confirmed);
    let found = g.streams.iter().position(|&(next, ..)| next == s && s != 0);
    // The most recent others first: the current one goes in front, the
    // others keep their order (the one taken out, or the oldest, leaves).
    let leaving = found.unwrap_or(g.streams.len() - 1);
    let (next, window, confirmed) = g.streams[leaving];
    g.streams.copy_within(0..leaving, 1);
    g.streams[0] = current;
    match found {
        Some(_) => {
            (g.next_expected, g.window, g.confirmed) = (next, window, true);
            confirmed
        }
        None => {
            g.confirmed = false;
            false
        }
    }
}

/// Absent pages from `s` on of `s`'s kind (all to be read, or all with
/// nothing to read, to be zero-filled), at most `want`, at most half the
/// budget the pinned pages leave (a cluster never evicts most of the
/// resident set).
pub(super) fn absent_run(sh: &Shared, g: &Inner, s: u32, want: usize) -> usize {
    if g.table.state(s) != State::Absent {
        return 0;
    }
    let data = sh.store.has_data(s as usize);
    let limit = want
        .min(g.table.pages() - s as usize)
        .min((g.table.usable() / 2).max(1));
    let mut n = 1;
    while n < limit
        && g.table.state(s + n as u32) == State::Absent
        && sh.store.has_data((s + n as u32) as usize) == data
    {
        n += 1;
    }
    n
}
