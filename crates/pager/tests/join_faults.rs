//! The nested-loops join's page-in counts live: an outer table of O pages
//! scanned Loop times with M frames faults O*Loop times under LRU (CLOCK
//! live) and O + (O-M)(Loop-1) times under MRU (hipec section 5.3), with
//! read-ahead on.

mod common;

use common::*;
use pagepilot_pager::{Backing, Region, RegionOptions, PAGE_SIZE};

fn scan_faults(
    policy: &str,
    outer: usize,
    frames: usize,
    loops: usize,
    readahead: usize,
    async_ra: bool,
) -> u64 {
    let d = Scratch::new("join");
    let path = d.file("outer");
    random_file(&path, outer * PAGE_SIZE, 11);
    let opts = RegionOptions::new(
        Backing::File {
            path,
            writable: false,
        },
        frames * PAGE_SIZE,
        policy,
    )
    .with_readahead(readahead)
    .with_async_readahead(async_ra)
    .with_handler_threads(
        std::env::var("PP_H")
            .map(|v| v.parse().unwrap())
            .unwrap_or(2),
    );
    let region = Region::map(opts).unwrap();
    let mut sum = 0u64;
    for _ in 0..loops {
        for off in (0..outer * PAGE_SIZE).step_by(64) {
            // SAFETY: inside the region.
            sum = sum.wrapping_add(unsafe { region.as_ptr().add(off).read_volatile() } as u64);
        }
    }
    std::hint::black_box(sum);
    let s = region.stats();
    println!(
        "{policy} O={outer} M={frames} Loop={loops} ra={readahead}: {}",
        region.stats_json()
    );
    assert!(s.frames_in_use <= frames as u64);
    region.unmap().unwrap();
    s.missing_faults
}

fn within(got: u64, want: u64, tolerance: f64) -> bool {
    (got as f64 - want as f64).abs() <= want as f64 * tolerance
}

#[test]
fn test_lru_join_matches_analytic_faults() {
    let (o, m, l) = (1500, 1000, 4);
    for (ra, async_ra) in [(1, false), (16, false), (16, true)] {
        let got = scan_faults("lru", o, m, l, ra, async_ra);
        assert!(
            within(got, (o * l) as u64, 0.01),
            "ra {ra}: {got} vs {}",
            o * l
        );
    }
}

#[test]
fn test_mru_join_matches_analytic_faults() {
    // The paper's ratio of outer table to memory (60 MB : 40 MB), scaled down.
    let (o, m, l) = (3000, 2000, 4);
    let paper = (o + (o - m) * (l - 1)) as u64;
    for ra in [1, 16] {
        let got = scan_faults("mru", o, m, l, ra, false);
        assert!(within(got, paper, 0.01), "ra {ra}: {got} vs {paper}");
        // Exactly: each pass after the first re-reads what the policy gave up,
        // O - M pages, plus the frames that held the read-ahead window.
        assert_eq!(got, (o + (o - m + ra) * (l - 1)) as u64, "ra {ra}");
    }
}

#[test]
fn test_seq_join_faults_like_mru_live() {
    let (o, m, l) = (3000, 2000, 4);
    let paper_mru = (o + (o - m) * (l - 1)) as u64;
    let got = scan_faults("seq", o, m, l, 16, false);
    // SEQ detects the scan as one sequence and replaces MRU-like inside it
    // (M pages behind the head): MRU's page-ins, not LRU's O*Loop.
    assert!(within(got, paper_mru, 0.02), "{got} vs PF_m {paper_mru}");
}

#[test]
fn test_policy_program_runs_live_like_the_built_in() {
    // HiPEC policy programs (policies/*.hp) are specs like any other.
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/mru.hp");
    let (o, m, l) = (3000, 2000, 4);
    let built_in = scan_faults("mru", o, m, l, 16, false);
    let from_program = scan_faults(program, o, m, l, 16, false);
    assert_eq!(from_program, built_in);
}
