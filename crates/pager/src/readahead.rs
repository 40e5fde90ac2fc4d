//! The read-ahead planner: how many pages a missing fault brings in, and
//! which window is read ahead next along a sequence of faults. It follows
//! the region's sequences of faults (windows doubling along each, several
//! streams at once), sizes the read-around of random faults by use
//! (`around`) and clusters zero-filled first touches along streams, all cut
//! at the first page that is not absent. It keeps its own state and makes
//! no system call: what it needs of the region's pages it asks a
//! [`PageView`], so its rules are tested without a userfaultfd
//! (`readahead_tests.rs`).

use crate::around::ReadAround;
use crate::tuning::Tuning;

/// Sequences of faults followed besides the current one.
pub(crate) const STREAMS: usize = 3;

/// What the planner asks of the region's pages and budget (the frame table
/// and the backing store, or a fake in tests).
pub(crate) trait PageView {
    /// Whether page `s` is absent: neither resident nor in transition.
    fn absent(&self, s: u32) -> bool;
    /// Whether page `s` has data to read (otherwise it is zero-filled).
    fn has_data(&self, s: u32) -> bool;
    /// The region's pages.
    fn pages(&self) -> usize;
    /// Frames the policy's pages may hold: the budget less pinned pages.
    fn usable(&self) -> usize;
    /// Pages that fit in the budget without an eviction.
    fn room(&self) -> usize;
    /// The budget, frames.
    fn budget(&self) -> usize;
}

/// The pages a missing fault brings in: `first..first + pages`, the
/// faulting page among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    first: u32,
    pages: usize,
    sequential: bool,
    probe: bool,
}

impl Plan {
    /// First page of the cluster (the faulting page but for read-around).
    pub(crate) fn first(&self) -> u32 {
        self.first
    }

    /// Pages in the cluster.
    pub(crate) fn pages(&self) -> usize {
        self.pages
    }

    /// Whether the fault continues a sequence (windows ahead are issued).
    pub(crate) fn sequential(&self) -> bool {
        self.sequential
    }

    /// Whether the cluster is read around a random fault: its last page (or
    /// its first, if the last is the faulting page) stays unmapped as a
    /// probe of its use (`around`).
    pub(crate) fn probe(&self) -> bool {
        self.probe
    }
}

/// Names a sequence of faults: the windows read ahead of it carry it
/// (`prefetch.rs`), so that each stream keeps its own windows in flight.
pub(crate) type StreamId = u32;

/// One sequence of faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stream {
    /// Its name; 0 for no sequence.
    id: StreamId,
    /// The page after its last clustered read: a fault there continues it.
    next: u32,
    /// Its read-ahead window, pages.
    window: usize,
    /// Whether it has been continued at least once.
    confirmed: bool,
}

/// No sequence yet: no fault continues it.
const NO_STREAM: Stream = Stream {
    id: 0,
    next: u32::MAX,
    window: 1,
    confirmed: false,
};

/// One region's read-ahead state: the current sequence (the one windows are
/// read ahead for), the others followed recently, and read-around sizing.
#[derive(Clone, Debug)]
pub(crate) struct ReadAhead {
    /// The current sequence. Its window is also the size of the last
    /// read-around cluster (`fault::load` reads large ones in pieces).
    current: Stream,
    /// Other sequences followed recently, most recent first: several
    /// threads streaming through their own parts of a region each keep
    /// their window.
    others: [Stream; STREAMS],
    /// Read-around of faults outside a sequence, sized by use.
    around: ReadAround,
    /// What the application said of its accesses (`madvise`).
    advice: Advice,
    /// The last stream id handed out.
    last_id: StreamId,
}

/// What an application says of its accesses to a region, as `madvise`'s
/// `MADV_NORMAL`, `MADV_RANDOM` and `MADV_SEQUENTIAL` do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Advice {
    /// Read-around and read-ahead as the pager sizes them.
    #[default]
    Normal,
    /// Faults read their page alone: no read-around, no sequence.
    Random,
    /// Every fault continues a sequence: its window grows from the first.
    Sequential,
}

impl ReadAhead {
    /// No sequence followed yet; random faults read around as `around` says.
    pub(crate) fn new(around: ReadAround) -> Self {
        ReadAhead {
            current: NO_STREAM,
            others: [NO_STREAM; STREAMS],
            around,
            advice: Advice::Normal,
            last_id: 0,
        }
    }

    /// Takes the application's advice for the faults to come.
    pub(crate) fn advise(&mut self, advice: Advice) {
        self.advice = advice;
    }

    /// How many pages to bring in for a missing fault at `s`: the
    /// fault-around size, or a window doubling along a sequence of faults,
    /// cut at the first page that is not absent or not of `s`'s kind, at the
    /// region's end and at half the budget. Where the options leave
    /// fault-around to the pager, a random fault reads the absent pages
    /// around it within an aligned cluster sized by use (`around`): aligned,
    /// so that the first fault in a cluster reads all of it and clusters
    /// read earlier never cut a later one short. A page with nothing to read
    /// (anonymous memory never written out) is zero-filled: alone outside a
    /// sequence (a random first touch has no stream to amortise over), in
    /// clusters of up to `zero_around_max` pages along one (a stream of
    /// first touches: the fault at `s` continues the previous fill).
    pub(crate) fn plan(&mut self, s: u32, pages: &impl PageView, tuning: &Tuning) -> Plan {
        if self.advice == Advice::Random {
            self.current = NO_STREAM;
            return Plan {
                first: s,
                pages: absent_run(pages, s, 1),
                sequential: false,
                probe: false,
            };
        }
        let sequential = self.follow(s) || self.advice == Advice::Sequential;
        let data = pages.has_data(s);
        let (max, alone) = if data {
            (tuning.readahead_max, tuning.fault_around)
        } else {
            (tuning.zero_around_max, 1)
        };
        let around = data && !sequential && alone == 0;
        let (first, n) = if around {
            // A region larger than its budget fills its free frames and then
            // displaces: its clusters count from the first.
            let displacing = pages.room() == 0 || pages.pages() > pages.budget();
            let window = self.around.on_fault(displacing);
            self.current.window = window;
            let base = s - s % window as u32;
            // The cluster must hold `s`: it starts no further back than
            // `absent_run` reaches (half the usable budget). The window is
            // sized from the budget at map time; a region in a pool may hold
            // far less (before its minimum is granted, or after
            // reclamation), and a cluster that missed the faulting page
            // would leave it unserved.
            let reach = (pages.usable() / 2).max(1) - 1;
            let back = ((s - base) as usize).min(reach);
            let first = s - absent_before(pages, s, back) as u32;
            let end = (base as usize + window).min(pages.pages());
            (first, absent_run(pages, first, end - first as usize))
        } else {
            self.current.window = if sequential {
                (self.current.window * 2).clamp(1, max.max(1))
            } else {
                alone.max(1)
            };
            (s, absent_run(pages, s, self.current.window))
        };
        debug_assert!(
            (first..first + n as u32).contains(&s),
            "cluster misses page {s}"
        );
        self.current.next = first + n as u32;
        Plan {
            first,
            pages: n,
            sequential,
            probe: around && n > 1,
        }
    }

    /// The application entered a prefetched window: the sequence goes on,
    /// its window doubles up to `readahead_max`.
    pub(crate) fn enter_window(&mut self, readahead_max: usize) {
        self.current.window = (self.current.window * 2).clamp(1, readahead_max.max(1));
    }

    /// The next window to read ahead of the current sequence, `(first,
    /// pages)`: the absent run of pages with data from its next expected
    /// page on, at most a window. None when there is nothing to read: a
    /// stream of first touches gets zero clusters at its faults instead.
    pub(crate) fn next_window(&self, pages: &impl PageView) -> Option<(u32, usize)> {
        let first = self.current.next;
        if first as usize >= pages.pages() || !pages.has_data(first) {
            return None;
        }
        let n = absent_run(pages, first, self.current.window.max(1));
        (n > 0).then_some((first, n))
    }

    /// Window `first..first + pages` was issued: the sequence is expected to
    /// go on after it.
    pub(crate) fn window_issued(&mut self, first: u32, pages: usize) {
        self.current.next = first + pages as u32;
    }

    /// The current window (also the size of the last read-around cluster).
    pub(crate) fn window(&self) -> usize {
        self.current.window
    }

    /// The current sequence's name (0: none yet).
    pub(crate) fn stream(&self) -> StreamId {
        self.current.id
    }

    /// The sequences followed, the current one first (0 where none is).
    pub(crate) fn followed(&self) -> [StreamId; STREAMS + 1] {
        let mut ids = [self.current.id; STREAMS + 1];
        for (id, o) in ids[1..].iter_mut().zip(&self.others) {
            *id = o.id;
        }
        ids
    }

    /// Makes sequence `id` the current one, as a fault continuing it would
    /// (the application entered one of its windows); false if it is no
    /// longer followed.
    pub(crate) fn resume(&mut self, id: StreamId) -> bool {
        if id == 0 {
            return false;
        }
        if self.current.id == id {
            return true;
        }
        let Some(found) = self.others.iter().position(|o| o.id == id) else {
            return false;
        };
        let taken = self.others[found];
        self.others.copy_within(0..found, 1);
        self.others[0] = self.current;
        self.current = taken;
        true
    }

    /// Whether the current sequence has been continued at least once
    /// (windows are read ahead of it).
    pub(crate) fn confirmed(&self) -> bool {
        self.current.confirmed
    }

    /// The probe of a read-around cluster was touched: the cluster was used.
    pub(crate) fn probe_hit(&mut self) {
        self.around.on_probe_hit();
    }

    /// Makes the sequence a fault at `s` continues the current one, if one
    /// of the others does (the current one is remembered in its place), and
    /// says whether the fault continues a sequence. A fault that continues
    /// none starts a new current sequence; the current one is remembered,
    /// the least recent other forgotten. A remembered sequence counts once
    /// it has been continued twice: a random fault that happens to land
    /// after an earlier one is not a stream.
    fn follow(&mut self, s: u32) -> bool {
        if s == self.current.next && s != 0 {
            self.current.confirmed = true;
            return true;
        }
        let found = self.others.iter().position(|o| o.next == s && s != 0);
        // The most recent others first: the current one goes in front, the
        // others keep their order (the one taken out, or the oldest, leaves).
        let leaving = found.unwrap_or(STREAMS - 1);
        let taken = self.others[leaving];
        self.others.copy_within(0..leaving, 1);
        self.others[0] = self.current;
        match found {
            Some(_) => {
                self.current = Stream {
                    confirmed: true,
                    ..taken
                };
                taken.confirmed
            }
            None => {
                self.last_id = self.last_id.wrapping_add(1).max(1);
                self.current.id = self.last_id;
                self.current.confirmed = false;
                false
            }
        }
    }
}

/// Absent pages with data right before `s`, at most `want`.
fn absent_before(pages: &impl PageView, s: u32, want: usize) -> usize {
    (1..=want as u32)
        .take_while(|&d| pages.absent(s - d) && pages.has_data(s - d))
        .count()
}

/// Absent pages from `s` on of `s`'s kind (all to be read, or all with
/// nothing to read, to be zero-filled), at most `want`, at most half the
/// budget the pinned pages leave (a cluster never evicts most of the
/// resident set).
pub(crate) fn absent_run(pages: &impl PageView, s: u32, want: usize) -> usize {
    if !pages.absent(s) {
        return 0;
    }
    let data = pages.has_data(s);
    let limit = want
        .min(pages.pages() - s as usize)
        .min((pages.usable() / 2).max(1));
    let mut n = 1;
    while n < limit && pages.absent(s + n as u32) && pages.has_data(s + n as u32) == data {
        n += 1;
    }
    n
}

#[cfg(test)]
#[path = "readahead_tests.rs"]
mod tests;
