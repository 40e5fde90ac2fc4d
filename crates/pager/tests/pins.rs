//! Pinned pages (the Cache Kernel's locked mappings): brought in at once,
//! never evicted by any path until unpinned, counted in the budget, written
//! back by flushes; the limit (the budget less one frame) and bad ranges
//! refused with typed errors.

mod common;

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use common::*;
use pagepilot_pager::{
    Backing, Eviction, FaultService, PinError, Pool, Region, RegionOptions, PAGE_SIZE,
};

fn file_opts(path: &std::path::Path, budget_pages: usize, policy: &str) -> RegionOptions {
    let backing = Backing::File {
        path: path.into(),
        writable: true,
    };
    RegionOptions::new(backing, budget_pages * PAGE_SIZE, policy)
}

fn byte(region: &Region, page: usize) -> u8 {
    assert!(page * PAGE_SIZE < region.len());
    // SAFETY: inside the region.
    unsafe { region.as_ptr().add(page * PAGE_SIZE + 9).read_volatile() }
}

fn set_byte(region: &Region, page: usize, v: u8) {
    assert!(page * PAGE_SIZE < region.len());
    // SAFETY: inside the region, which is writable.
    unsafe { region.as_ptr().add(page * PAGE_SIZE + 9).write_volatile(v) };
}

/// Pages evicted since the last call, from the region's notifications.
fn evicted_pages(region: &Region) -> Vec<usize> {
    let mut out: Vec<Eviction> = Vec::new();
    let d = region.drain_evictions(&mut out);
    assert_eq!(d.lost, 0, "the queue must hold every event of these tests");
    out.iter().map(|e| e.offset as usize / PAGE_SIZE).collect()
}

/// Reads every page `passes` times in order, then writes and reads pages
/// at random (writing none of `keep`): many times the budget.
fn pressure(region: &Region, pages: usize, passes: usize, seed: u64, keep: Range<usize>) {
    for _ in 0..passes {
        for p in 0..pages {
            byte(region, p);
        }
    }
    let mut rng = Rng(seed);
    for _ in 0..4 * pages {
        let p = rng.below(pages);
        if rng.below(3) == 0 && !keep.contains(&p) {
            set_byte(region, p, byte(region, p).wrapping_add(1));
        } else {
            byte(region, p);
        }
    }
}

#[test]
fn test_pinned_pages_are_never_evicted_under_heavy_pressure_by_any_policy() {
    let dir = Scratch::new("pins-pressure");
    let path = dir.file("data");
    let pages = 512;
    let data = random_file(&path, pages * PAGE_SIZE, 11);
    for policy in ["clock", "mru", "fifo", "seq", "arc", "s3fifo", "sieve"] {
        let region = Region::map(file_opts(&path, 32, policy)).unwrap();
        region.subscribe_evictions(1 << 20);
        // Any byte range: pages 100..108 (5 bytes in, 5 bytes short).
        region.pin(100 * PAGE_SIZE + 5, 8 * PAGE_SIZE - 10).unwrap();
        let s = region.stats();
        assert_eq!(s.pinned_pages, 8, "{policy}: {s:?}");
        for p in 100..108 {
            set_byte(&region, p, !data[p * PAGE_SIZE + 9]);
        }
        let before = region.stats().fault_events;
        pressure(&region, pages, 6, 7, 100..108);
        let evicted = evicted_pages(&region);
        let s = region.stats();
        assert!(evicted.len() > 5 * pages, "{policy}: {s:?}");
        assert_eq!(evicted.len() as u64, s.evictions, "{policy}");
        let hit: Vec<_> = evicted.iter().filter(|p| (100..108).contains(*p)).collect();
        assert!(hit.is_empty(), "{policy}: pinned pages evicted: {hit:?}");
        assert!(s.fault_events > before, "{policy}");
        assert_eq!(s.pinned_pages, 8, "{policy}");
        assert!(
            region.allocated_bytes() <= 32 * PAGE_SIZE as u64,
            "{policy}"
        );
        for p in 100..108 {
            assert_eq!(
                byte(&region, p),
                !data[p * PAGE_SIZE + 9],
                "{policy} page {p}"
            );
        }
        region.unpin(100 * PAGE_SIZE, 8 * PAGE_SIZE).unwrap();
        region.unmap().unwrap();
        random_file(&path, pages * PAGE_SIZE, 11);
    }
}

#[test]
fn test_unpinned_pages_are_evicted_again() {
    let dir = Scratch::new("pins-unpin");
    let path = dir.file("data");
    let pages = 256;
    random_file(&path, pages * PAGE_SIZE, 13);
    let region = Region::map(file_opts(&path, 16, "fifo").with_fault_around(1)).unwrap();
    region.subscribe_evictions(1 << 16);
    region.pin(0, 4 * PAGE_SIZE).unwrap();
    pressure(&region, pages, 2, 3, 0..0);
    assert!(evicted_pages(&region).iter().all(|&p| p >= 4));
    region.unpin(0, 4 * PAGE_SIZE).unwrap();
    assert_eq!(region.stats().pinned_pages, 0);
    pressure(&region, pages, 2, 5, 0..0);
    let evicted = evicted_pages(&region);
    for p in 0..4 {
        assert!(evicted.contains(&p), "page {p} was not evicted after unpin");
    }
    region.unmap().unwrap();
}

#[test]
fn test_pinning_beyond_the_budget_less_one_frame_is_refused_naming_the_numbers() {
    let dir = Scratch::new("pins-limit");
    let path = dir.file("data");
    let pages = 128;
    let data = random_file(&path, pages * PAGE_SIZE, 17);
    let region = Region::map(file_opts(&path, 16, "clock")).unwrap();
    let err = region.pin(0, 16 * PAGE_SIZE).unwrap_err();
    assert_eq!(
        err,
        PinError::OverBudget {
            new: 16,
            pinned: 0,
            budget_frames: 16
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("16 more") && text.contains("16 frames"),
        "{text}"
    );
    assert_eq!(region.stats().pinned_pages, 0, "nothing pinned");
    region.pin(0, 15 * PAGE_SIZE).unwrap();
    let err = region.pin(40 * PAGE_SIZE, 1).unwrap_err();
    assert_eq!(
        err,
        PinError::OverBudget {
            new: 1,
            pinned: 15,
            budget_frames: 16
        }
    );
    // Already pinned pages are not new: pinning them again is fine.
    region.pin(3 * PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    // The last frame serves every other fault.
    for p in (15..pages).rev() {
        assert_eq!(byte(&region, p), data[p * PAGE_SIZE + 9], "page {p}");
    }
    let s = region.stats();
    assert_eq!((s.pinned_pages, s.over_budget), (15, 0), "{s:?}");
    assert!(region.allocated_bytes() <= 16 * PAGE_SIZE as u64);
    region.unmap().unwrap();
}

#[test]
fn test_bad_ranges_and_pages_not_pinned_are_refused_and_change_nothing() {
    let dir = Scratch::new("pins-bad");
    let path = dir.file("data");
    random_file(&path, 64 * PAGE_SIZE, 19);
    let region = Region::map(file_opts(&path, 16, "clock")).unwrap();
    let len = region.len();
    assert_eq!(
        region.pin(len - 1, 2).unwrap_err(),
        PinError::OutOfRange {
            offset: len - 1,
            len: 2,
            region_len: len
        }
    );
    assert!(matches!(
        region.pin(usize::MAX, 2),
        Err(PinError::OutOfRange { .. })
    ));
    assert_eq!(
        region.unpin(0, 1).unwrap_err(),
        PinError::NotPinned { page: 0 }
    );
    region.pin(2 * PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    assert_eq!(
        region.unpin(2 * PAGE_SIZE, 3 * PAGE_SIZE).unwrap_err(),
        PinError::NotPinned { page: 4 }
    );
    assert_eq!(
        region.stats().pinned_pages,
        2,
        "the refused unpin changed nothing"
    );
    // An empty range pins nothing and is no error.
    region.pin(5 * PAGE_SIZE, 0).unwrap();
    region.unpin(5 * PAGE_SIZE, 0).unwrap();
    // A page pinned twice counts once and one unpin releases it.
    region.pin(3 * PAGE_SIZE, 1).unwrap();
    assert_eq!(region.stats().pinned_pages, 2);
    region.unpin(2 * PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    assert_eq!(region.stats().pinned_pages, 0);
    region.unmap().unwrap();
}

#[test]
fn test_pinning_brings_pages_in_so_touching_them_takes_no_fault() {
    let dir = Scratch::new("pins-in");
    let path = dir.file("data");
    let data = random_file(&path, 64 * PAGE_SIZE, 23);
    for service in [FaultService::HandlerPerCpu, FaultService::FaultingThread] {
        let opts = file_opts(&path, 16, "clock")
            .with_fault_around(1)
            .with_readahead(1)
            .with_fault_service(service);
        let region = Region::map(opts).unwrap();
        region.pin(20 * PAGE_SIZE, 6 * PAGE_SIZE).unwrap();
        let s = region.stats();
        assert_eq!(
            (s.pinned_pages, s.missing_faults),
            (6, 6),
            "{service:?}: {s:?}"
        );
        for p in 20..26 {
            assert_eq!(byte(&region, p), data[p * PAGE_SIZE + 9]);
        }
        // Reads: no fault at all; the first write of each: a write-protect
        // fault (dirty tracking), no missing or minor fault.
        for p in 20..26 {
            set_byte(&region, p, 1);
        }
        let t = region.stats();
        assert_eq!(
            (t.missing_faults, t.minor_faults, t.fault_events),
            (s.missing_faults, s.minor_faults, s.fault_events),
            "{service:?}: {t:?}"
        );
        assert_eq!(t.wp_faults - s.wp_faults, 6, "{service:?}: {t:?}");
        region.unmap().unwrap();
        random_file(&path, 64 * PAGE_SIZE, 23);
    }
}

#[test]
fn test_dirty_pinned_pages_are_written_back_by_flush_and_stay_pinned() {
    let dir = Scratch::new("pins-flush");
    let path = dir.file("data");
    let pages = 64;
    let data = random_file(&path, pages * PAGE_SIZE, 29);
    let region = Region::map(file_opts(&path, 8, "clock")).unwrap();
    region.subscribe_evictions(1 << 16);
    region.pin(0, 4 * PAGE_SIZE).unwrap();
    for p in 0..4 {
        set_byte(&region, p, !data[p * PAGE_SIZE + 9]);
    }
    pressure(&region, pages, 1, 9, 0..4);
    let [_, _, dirty] = region.daemon_fds_for_tests().unwrap();
    let marked = common::daemon::dirty_pages(dirty);
    assert!((0..4).all(|p| marked.contains(&p)), "{marked:?}");
    region.flush().unwrap();
    let file = std::fs::File::open(&path).unwrap();
    for p in 0..4 {
        let mut b = [0u8];
        file.read_exact_at(&mut b, (p * PAGE_SIZE + 9) as u64)
            .unwrap();
        assert_eq!(b[0], !data[p * PAGE_SIZE + 9], "page {p} in the file");
    }
    let s = region.stats();
    assert_eq!(s.pinned_pages, 4, "{s:?}");
    assert!(evicted_pages(&region).iter().all(|&p| p >= 4));
    assert!(common::daemon::dirty_pages(dirty).is_empty());
    region.unmap().unwrap();
}

#[test]
fn test_a_smaller_budget_never_reaches_below_the_pinned_pages() {
    let dir = Scratch::new("pins-budget");
    let path = dir.file("data");
    let pages = 128;
    random_file(&path, pages * PAGE_SIZE, 31);
    let mut region = Region::map(file_opts(&path, 32, "lru")).unwrap();
    region.subscribe_evictions(1 << 16);
    pressure(&region, pages, 1, 1, 0..0);
    region.pin(50 * PAGE_SIZE, 8 * PAGE_SIZE).unwrap();
    evicted_pages(&region);
    region.set_budget(2 * PAGE_SIZE).unwrap();
    let s = region.stats();
    assert_eq!((s.budget_frames, s.pinned_pages), (9, 8), "{s:?}");
    pressure(&region, pages, 2, 2, 0..0);
    assert!(evicted_pages(&region).iter().all(|p| !(50..58).contains(p)));
    assert!(region.allocated_bytes() <= 9 * PAGE_SIZE as u64);
    region.unmap().unwrap();
}

#[test]
fn test_a_pools_normal_and_forced_reclamation_never_take_pinned_pages() {
    let dir = Scratch::new("pins-pool");
    let program = dir.file("keeps.hp");
    std::fs::write(&program, KEEPS_EVERYTHING).unwrap();
    let pages = 256;
    for (name, policy) in [("normal", "clock"), ("forced", program.to_str().unwrap())] {
        let path = dir.file(name);
        let data = random_file(&path, pages * PAGE_SIZE, 37);
        let pool = Pool::new(256 * PAGE_SIZE)
            .unwrap()
            .with_partition_burst(256 * PAGE_SIZE)
            .with_deadline(Duration::from_millis(20));
        let opts = file_opts(&path, 200, policy)
            .with_pool(&pool)
            .with_min_frames(50)
            .with_fault_around(1)
            .with_readahead(1);
        let a = Region::map(opts).unwrap();
        a.subscribe_evictions(1 << 16);
        for p in 0..200 {
            set_byte(&a, p, !data[p * PAGE_SIZE + 9]);
        }
        a.pin(10 * PAGE_SIZE, 20 * PAGE_SIZE).unwrap();
        // B's minimum of 150 takes 94 of A's frames.
        let b = Region::map(
            RegionOptions::new(
                Backing::Anonymous {
                    len: 256 * PAGE_SIZE,
                },
                150 * PAGE_SIZE,
                "clock",
            )
            .with_pool(&pool),
        )
        .unwrap();
        eventually("B holds its minimum", || b.stats().budget_frames == 150);
        eventually("A down to 106", || a.stats().budget_frames == 106);
        let evicted = evicted_pages(&a);
        assert!(evicted.len() >= 94, "{name}: {}", evicted.len());
        assert!(
            evicted.iter().all(|p| !(10..30).contains(p)),
            "{name}: a pinned page was reclaimed"
        );
        let s = a.stats();
        assert_eq!(s.pinned_pages, 20, "{name}: {s:?}");
        if name == "forced" {
            assert!(s.forced_reclaim_frames >= 94, "{s:?}");
        }
        for p in 0..pages {
            let want = data[p * PAGE_SIZE + 9] ^ if p < 200 { 0xff } else { 0 };
            assert_eq!(byte(&a, p), want, "{name} page {p}");
        }
        a.unmap().unwrap();
        b.unmap().unwrap();
    }
}
