//! Unit tests of the read-ahead planner (`readahead.rs`): one per planning
//! rule, over a fake view of the region's pages.

use super::*;
use crate::tuning::FaultReads;

/// A region's pages as a test lays them out.
struct Fake {
    /// Per page: absent (neither resident nor in transition).
    absent: Vec<bool>,
    /// Per page: has data to read.
    data: Vec<bool>,
    usable: usize,
    room: usize,
    budget: usize,
}

impl Fake {
    /// `pages` absent pages with data, under a budget that holds them all.
    fn with_data(pages: usize) -> Self {
        Fake {
            absent: vec![true; pages],
            data: vec![true; pages],
            usable: pages,
            room: pages,
            budget: pages,
        }
    }

    /// `pages` absent pages with nothing to read (never written out).
    fn zeros(pages: usize) -> Self {
        Fake {
            data: vec![false; pages],
            ..Fake::with_data(pages)
        }
    }

    fn hold(mut self, s: u32) -> Self {
        self.absent[s as usize] = false;
        self
    }

    fn set_data(mut self, pages: std::ops::Range<u32>, data: bool) -> Self {
        for s in pages {
            self.data[s as usize] = data;
        }
        self
    }
}

impl PageView for Fake {
    fn absent(&self, s: u32) -> bool {
        self.absent[s as usize]
    }
    fn has_data(&self, s: u32) -> bool {
        self.data[s as usize]
    }
    fn pages(&self) -> usize {
        self.absent.len()
    }
    fn usable(&self) -> usize {
        self.usable
    }
    fn room(&self) -> usize {
        self.room
    }
    fn budget(&self) -> usize {
        self.budget
    }
}

fn tuning(fault_around: usize, readahead_max: usize, zero_around_max: usize) -> Tuning {
    Tuning {
        fault_around,
        readahead_max,
        zero_around_max,
        async_readahead: true,
        readahead_depth: 2,
        fault_reads: FaultReads::Handler,
        spin_us: 0,
        copy_windows: true,
        reclaim_event_only: false,
    }
}

/// A planner whose read-around clusters are 32 pages, up to 128 in use.
fn planner() -> ReadAhead {
    ReadAhead::new(ReadAround::new(32, 128))
}

fn cluster(first: u32, pages: usize, sequential: bool, probe: bool) -> Plan {
    Plan {
        first,
        pages,
        sequential,
        probe,
    }
}

/// The `(first, pages)` of the plans for faults at `faults`, in turn.
fn plans(ra: &mut ReadAhead, view: &Fake, t: &Tuning, faults: &[u32]) -> Vec<(u32, usize)> {
    faults
        .iter()
        .map(|&s| {
            let p = ra.plan(s, view, t);
            (p.first(), p.pages())
        })
        .collect()
}

#[test]
fn test_a_fault_continuing_the_sequence_doubles_its_window_up_to_readahead_max() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    assert_eq!(ra.plan(100, &view, &t), cluster(100, 1, false, false));
    assert_eq!(ra.plan(101, &view, &t), cluster(101, 2, true, false));
    assert_eq!(ra.plan(103, &view, &t), cluster(103, 4, true, false));
    assert_eq!(ra.plan(107, &view, &t), cluster(107, 8, true, false));
    assert_eq!(ra.plan(115, &view, &t), cluster(115, 8, true, false));
}

#[test]
fn test_the_current_sequence_is_confirmed_once_continued() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    ra.plan(100, &view, &t);
    assert!(!ra.confirmed());
    ra.plan(101, &view, &t);
    assert!(ra.confirmed());
    // A fault elsewhere starts a new sequence, not confirmed yet.
    ra.plan(500, &view, &t);
    assert!(!ra.confirmed());
}

#[test]
fn test_a_fault_continuing_a_remembered_stream_switches_to_it_with_its_window() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    plans(&mut ra, &view, &t, &[100, 101]);
    // Another thread's fault: the first stream (window 2, next 103) is remembered.
    assert_eq!(ra.plan(500, &view, &t), cluster(500, 1, false, false));
    assert_eq!(ra.plan(103, &view, &t), cluster(103, 4, true, false));
    assert!(ra.confirmed());
    assert_eq!(ra.window(), 4);
}

#[test]
fn test_a_remembered_stream_reads_windows_only_once_continued_twice() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    plans(&mut ra, &view, &t, &[100, 500]);
    // A random fault that happens to land after an earlier one is not a
    // stream yet: its page alone, but the stream is now the current one.
    assert_eq!(ra.plan(101, &view, &t), cluster(101, 1, false, false));
    assert!(ra.confirmed());
    assert_eq!(ra.plan(102, &view, &t), cluster(102, 2, true, false));
}

#[test]
fn test_streams_are_kept_most_recent_first_and_the_oldest_is_forgotten() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    plans(&mut ra, &view, &t, &[100, 200, 300, 400, 500]);
    let nexts = |ra: &ReadAhead| ra.others.map(|o| o.next);
    assert_eq!(ra.current.next, 501);
    assert_eq!(nexts(&ra), [401, 301, 201]);
    // The stream at 100 was forgotten: a fault at 101 starts a new one.
    assert!(!ra.plan(101, &view, &t).sequential());
    assert_eq!(nexts(&ra), [501, 401, 301]);
    // Taking one out puts the current one in front; the rest keep their order.
    ra.plan(401, &view, &t);
    assert_eq!(ra.current.next, 402);
    assert_eq!(nexts(&ra), [102, 501, 301]);
}

#[test]
fn test_a_random_fault_over_data_reads_an_aligned_cluster_sized_by_use_ending_in_a_probe() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(0, 128, 4), planner());
    assert_eq!(ra.plan(70, &view, &t), cluster(64, 32, false, true));
    // The window is the cluster's size, for reading it in pieces.
    assert_eq!(ra.window(), 32);
    // The fault after the cluster continues it: a sequence, no probe.
    assert_eq!(ra.plan(96, &view, &t), cluster(96, 64, true, false));
}

#[test]
fn test_read_around_extends_before_the_fault_only_over_absent_pages_with_data() {
    let t = tuning(0, 8, 4);
    let zero_before = Fake::with_data(1000).set_data(68..69, false);
    assert_eq!(
        planner().plan(70, &zero_before, &t),
        cluster(69, 27, false, true)
    );
    let held_before = Fake::with_data(1000).hold(67);
    assert_eq!(
        planner().plan(70, &held_before, &t),
        cluster(68, 28, false, true)
    );
    // Never before the aligned cluster.
    let view = Fake::with_data(1000);
    assert_eq!(planner().plan(64, &view, &t), cluster(64, 32, false, true));
}

#[test]
fn test_a_fault_outside_a_sequence_reads_fault_around_pages() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(4, 8, 4), planner());
    assert_eq!(ra.plan(70, &view, &t), cluster(70, 4, false, false));
    assert_eq!(ra.window(), 4);
}

#[test]
fn test_a_zero_page_outside_a_sequence_is_filled_alone() {
    // Whatever the fault-around: a random first touch has no stream to
    // amortise a cluster over.
    for fault_around in [0, 1, 4] {
        let t = tuning(fault_around, 8, 4);
        let plan = planner().plan(70, &Fake::zeros(1000), &t);
        assert_eq!(plan, cluster(70, 1, false, false));
    }
}

#[test]
fn test_zero_pages_along_a_stream_cluster_up_to_zero_around_max() {
    let (view, t, mut ra) = (Fake::zeros(1000), tuning(0, 64, 4), planner());
    let got = plans(&mut ra, &view, &t, &[100, 101, 103, 107, 111]);
    assert_eq!(got, [(100, 1), (101, 2), (103, 4), (107, 4), (111, 4)]);
}

#[test]
fn test_a_cluster_stops_at_the_first_page_not_absent() {
    let view = Fake::with_data(1000).hold(103);
    assert_eq!(planner().plan(100, &view, &tuning(8, 8, 4)).pages(), 3);
}

#[test]
fn test_a_cluster_stops_where_its_kind_changes() {
    let t = tuning(8, 8, 8);
    let data_then_zeros = Fake::with_data(1000).set_data(104..1000, false);
    assert_eq!(planner().plan(100, &data_then_zeros, &t).pages(), 4);
    let zeros_then_data = Fake::zeros(1000).set_data(105..1000, true);
    let mut ra = planner();
    let got = plans(&mut ra, &zeros_then_data, &t, &[100, 101, 103]);
    assert_eq!(got, [(100, 1), (101, 2), (103, 2)]);
}

#[test]
fn test_a_cluster_stops_at_the_region_end() {
    let view = Fake::with_data(104);
    assert_eq!(planner().plan(100, &view, &tuning(8, 8, 4)).pages(), 4);
}

#[test]
fn test_a_cluster_takes_at_most_half_the_usable_budget() {
    let t = tuning(8, 8, 4);
    let view = Fake {
        usable: 6,
        ..Fake::with_data(1000)
    };
    assert_eq!(planner().plan(100, &view, &t).pages(), 3);
    // A budget of one frame still reads the faulting page.
    let view = Fake {
        usable: 1,
        ..Fake::with_data(1000)
    };
    assert_eq!(planner().plan(100, &view, &t).pages(), 1);
}

#[test]
fn test_issuing_a_prefetched_window_moves_the_next_expected_page_past_it() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    plans(&mut ra, &view, &t, &[100, 101]);
    assert_eq!(ra.next_window(&view), Some((103, 2)));
    ra.window_issued(103, 2);
    assert_eq!(ra.next_window(&view), Some((105, 2)));
    // A fault past the issued window continues the sequence.
    assert!(ra.plan(105, &view, &t).sequential());
}

#[test]
fn test_no_window_is_read_ahead_over_zero_pages_held_pages_or_past_the_region() {
    let t = tuning(1, 8, 4);
    let next_after = |view: &Fake| {
        let mut ra = planner();
        plans(&mut ra, view, &t, &[100, 101]);
        ra.next_window(view)
    };
    assert_eq!(next_after(&Fake::with_data(1000)), Some((103, 2)));
    assert_eq!(
        next_after(&Fake::with_data(1000).set_data(103..1000, false)),
        None
    );
    assert_eq!(next_after(&Fake::with_data(1000).hold(103)), None);
    assert_eq!(next_after(&Fake::with_data(103)), None);
    // Cut like a cluster: at the first page not absent.
    assert_eq!(next_after(&Fake::with_data(1000).hold(104)), Some((103, 1)));
}

#[test]
fn test_entering_a_window_doubles_it_up_to_readahead_max() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    plans(&mut ra, &view, &t, &[100, 101]);
    ra.enter_window(8);
    assert_eq!(ra.window(), 4);
    assert_eq!(ra.next_window(&view), Some((103, 4)));
    ra.enter_window(8);
    ra.enter_window(8);
    assert_eq!(ra.window(), 8);
}

/// Pages read by `faults` random faults (far apart, never a sequence).
fn random_reads(view: &Fake, faults: u32) -> Vec<usize> {
    let (t, mut ra) = (tuning(0, 8, 4), planner());
    (0..faults)
        .map(|i| ra.plan(i * 500 + 250, view, &t).pages())
        .collect()
}

#[test]
fn test_read_around_counts_misses_only_while_displacing_resident_pages() {
    // Into free frames of a region that fits its budget: always clusters.
    let fits = Fake::with_data(20_000);
    assert!(random_reads(&fits, 40).iter().all(|&n| n == 32));
    // Budget full, or a region larger than its budget: unused clusters
    // shrink to single pages.
    let full = Fake {
        room: 0,
        ..Fake::with_data(20_000)
    };
    let larger = Fake {
        budget: 1000,
        usable: 1000,
        ..Fake::with_data(20_000)
    };
    for view in [full, larger] {
        let read = random_reads(&view, 40);
        assert_eq!(read[0], 32);
        assert_eq!(read[39], 1, "{read:?}");
    }
}

#[test]
fn test_a_probe_hit_keeps_read_around_clusters_on() {
    let t = tuning(0, 8, 4);
    let view = Fake {
        room: 0,
        ..Fake::with_data(20_000)
    };
    let mut ra = planner();
    for i in 0..40 {
        let plan = ra.plan(i * 500 + 250, &view, &t);
        assert!(plan.probe(), "fault {i}: {plan:?}");
        ra.probe_hit();
    }
}

#[test]
fn test_a_read_around_cluster_under_a_budget_smaller_than_its_window_still_holds_the_fault() {
    // A region in a contended pool: its window was sized from the budget
    // at map time (32 pages), it holds 1 frame, then 6 (runs cut at 3).
    for usable in [1, 6] {
        let view = Fake {
            usable,
            room: usable,
            budget: usable,
            ..Fake::with_data(4096)
        };
        let mut ra = planner();
        for s in [1111, 2047, 31, 77] {
            let p = ra.plan(s, &view, &tuning(0, 32, 8));
            assert!(
                (p.first()..p.first() + p.pages() as u32).contains(&s),
                "usable {usable}: the cluster {}+{} misses the fault at {s}",
                p.first(),
                p.pages()
            );
            assert!(p.pages() <= (usable / 2).max(1));
        }
    }
}

#[test]
fn test_random_advice_reads_each_faulting_page_alone_even_along_a_sequence() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(0, 8, 4), planner());
    ra.advise(Advice::Random);
    for s in [100, 101, 102, 500] {
        assert_eq!(ra.plan(s, &view, &t), cluster(s, 1, false, false));
    }
    // Normal advice brings read-around back.
    ra.advise(Advice::Normal);
    assert!(ra.plan(700, &view, &t).pages() > 1);
}

#[test]
fn test_sequential_advice_grows_the_window_from_the_first_fault() {
    let (view, t, mut ra) = (Fake::with_data(1000), tuning(1, 8, 4), planner());
    ra.advise(Advice::Sequential);
    assert_eq!(ra.plan(100, &view, &t), cluster(100, 2, true, false));
    assert_eq!(ra.plan(300, &view, &t), cluster(300, 4, true, false));
}
