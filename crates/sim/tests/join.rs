//! The nested-loops join of HiPEC section 5.3: the outer table of O pages is
//! scanned Loop times with M < O frames. LRU faults on every reference
//! (PF_l = O * Loop); MRU keeps M - 1 pages of the table across scans
//! (PF_m = O + (O - M)(Loop - 1)).
//!
//! PF_m is also a lower bound for any policy (a scan of O distinct pages
//! hits at most the M pages resident when it starts), so MRU is optimal on
//! the join. It is exact while Loop <= M, the paper's regime (Loop = 64,
//! M = 10240 pages): exact MRU keeps pages shifting by one per scan, and
//! after M scans the kept block wraps and a scan costs one fault more.

use pagepilot_policy::registry::{self, Setup};
use pagepilot_sim::{simulate, Counters, Trace};

/// (O, M, Loop) shapes with 2 <= M < O and Loop <= M: a small one, a
/// one-frame gap, a single scan, and the paper's proportions scaled down (60
/// MB table, 40 MB memory, 64 loops).
const SHAPES: [(u64, u64, u64); 5] = [
    (10, 4, 3),
    (9, 8, 7),
    (7, 2, 1),
    (40, 30, 16),
    (150, 100, 64),
];

/// Shapes outside PF_m's regime: a single frame, and more scans than frames.
const OTHER_SHAPES: [(u64, u64, u64); 3] = [(6, 1, 4), (10, 4, 5), (12, 3, 9)];

fn all_shapes() -> impl Iterator<Item = (u64, u64, u64)> {
    SHAPES.into_iter().chain(OTHER_SHAPES)
}

fn analytic_mru(o: u64, m: u64, loops: u64) -> u64 {
    o + (o - m) * (loops - 1)
}

fn join_trace(outer: u64, loops: u64) -> Trace {
    Trace::from_pages((0..loops).flat_map(|_| 0..outer))
}

fn run(spec: &str, trace: &Trace, frames: u64) -> Counters {
    let frames = frames as usize;
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    let c = simulate(trace, registry::build(spec, &setup).unwrap(), frames);
    assert_eq!(c.overruled, 0, "{spec} named an invalid victim");
    assert_eq!(c.cold_faults, trace.distinct() as u64);
    c
}

#[test]
fn test_lru_join_faults_on_every_reference() {
    for (o, m, loops) in all_shapes() {
        let trace = join_trace(o, loops);
        assert_eq!(run("lru", &trace, m).faults, o * loops, "O={o} M={m}");
    }
}

#[test]
fn test_mru_join_matches_analytic_faults() {
    for (o, m, loops) in SHAPES {
        let trace = join_trace(o, loops);
        let analytic = analytic_mru(o, m, loops);
        assert_eq!(
            run("mru", &trace, m).faults,
            analytic,
            "O={o} M={m} Loop={loops}"
        );
        assert_eq!(
            run("opt", &trace, m).faults,
            analytic,
            "OPT O={o} M={m} Loop={loops}"
        );
    }
}

/// The live MRU sees only faults: the M - 1 pages kept across a scan hit
/// invisibly, so the page it loaded last (page O) still looks most recent
/// when the next scan faults, and it evicts that one instead of page M - 1:
/// one fault more per scan after the first. It keeps the same M - 1 pages
/// for ever, so unlike exact MRU this holds for any number of scans.
#[test]
fn test_live_mru_join_faults_once_more_per_scan_than_exact_mru() {
    for (o, m, loops) in all_shapes() {
        let trace = join_trace(o, loops);
        let expected = o + (o - m + 1) * (loops - 1);
        let c = run("mru-live", &trace, m);
        assert_eq!(c.faults, expected, "O={o} M={m} Loop={loops}");
    }
}

/// With every page referenced once per scan, CLOCK's second chance clears
/// all bits and degenerates to FIFO: as bad as LRU on the join.
#[test]
fn test_clock_and_fifo_join_fault_like_lru() {
    for (o, m, loops) in all_shapes() {
        let trace = join_trace(o, loops);
        for spec in ["clock", "fifo"] {
            assert_eq!(run(spec, &trace, m).faults, o * loops, "{spec} O={o} M={m}");
        }
    }
}

/// No policy beats PF_m; past Loop = M even OPT and exact MRU exceed it.
#[test]
fn test_no_policy_faults_less_than_analytic_mru_on_join() {
    for (o, m, loops) in all_shapes() {
        let trace = join_trace(o, loops);
        for name in registry::available() {
            let c = run(name, &trace, m);
            assert!(
                c.faults >= analytic_mru(o, m, loops),
                "{name} O={o} M={m} Loop={loops}"
            );
        }
        let (mru, opt) = (run("mru", &trace, m).faults, run("opt", &trace, m).faults);
        assert!(opt <= mru);
    }
    let (o, m, loops) = (10, 4, 5);
    let trace = join_trace(o, loops);
    assert!(run("mru", &trace, m).faults > analytic_mru(o, m, loops));
}

/// When the outer table fits in memory, every policy faults once per page.
#[test]
fn test_join_that_fits_faults_once_per_page_under_every_policy() {
    let (o, loops) = (12, 5);
    let trace = join_trace(o, loops);
    for name in registry::available() {
        for m in [o, o + 3] {
            assert_eq!(run(name, &trace, m).faults, o, "{name} M={m}");
        }
    }
}
