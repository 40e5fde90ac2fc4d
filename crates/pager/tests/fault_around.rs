//! Zero clusters along streams of first touches (fault-around for anonymous
//! memory): a sequential stream takes far fewer fault events than pages, a
//! random one none of the clusters, the budget holds at every step, and
//! dirty tracking stays exact (a write cluster is dirty, a read cluster is
//! write-protected), in both fault services, checked against a shadow copy
//! after eviction to swap.

mod common;

use common::Rng;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, RegionStats, PAGE_SIZE};

const SERVICES: [FaultService; 2] = [FaultService::HandlerThreads, FaultService::FaultingThread];

fn anon_region(pages: usize, budget_pages: usize, policy: &str, service: FaultService) -> Region {
    let len = pages * PAGE_SIZE;
    Region::map(
        RegionOptions::new(Backing::Anonymous { len }, budget_pages * PAGE_SIZE, policy)
            .with_fault_service(service),
    )
    .unwrap()
}

/// The value page `p` holds in its first and last words after it was written.
fn stamp(p: usize, salt: u64) -> u64 {
    (p as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt
}

fn write_page(r: &Region, p: usize, salt: u64) {
    let v = stamp(p, salt);
    // SAFETY: p is inside the region; both words are 8-aligned; only this
    // thread touches the region.
    unsafe {
        let base = r.as_ptr().add(p * PAGE_SIZE).cast::<u64>();
        base.write_volatile(v);
        base.add(PAGE_SIZE / 8 - 1).write_volatile(!v);
    }
}

/// Writes page `p` and records it in `shadow`.
fn write_recorded(r: &Region, shadow: &mut [Option<u64>], p: usize, salt: u64) {
    write_page(r, p, salt);
    shadow[p] = Some(salt);
}

fn read_word(r: &Region, p: usize) -> u64 {
    // SAFETY: p is inside the region; the word is 8-aligned.
    unsafe { r.as_ptr().add(p * PAGE_SIZE).cast::<u64>().read_volatile() }
}

/// Reads every page back: `shadow[p]` is the salt page `p` was written with
/// (`None`: never written, all zeros). Returns the pages that disagree.
fn mismatches(r: &Region, shadow: &[Option<u64>]) -> Vec<usize> {
    let mut bad = Vec::new();
    for (p, salt) in shadow.iter().enumerate() {
        // SAFETY: the page is inside the region, which outlives the slice.
        let page = unsafe {
            std::slice::from_raw_parts(r.as_ptr().add(p * PAGE_SIZE).cast::<u64>(), PAGE_SIZE / 8)
        };
        let want = |i: usize| match salt {
            Some(s) if i == 0 => stamp(p, *s),
            Some(s) if i == PAGE_SIZE / 8 - 1 => !stamp(p, *s),
            _ => 0,
        };
        if (0..page.len()).any(|i| page[i] != want(i)) {
            bad.push(p);
        }
    }
    bad
}

fn assert_within_budget(s: &RegionStats, at: usize) {
    assert!(
        s.frames_in_use <= s.budget_frames && s.over_budget == 0,
        "over the budget after page {at}: {s:?}"
    );
}

fn sequential_first_writes_read_back_after_swap(service: FaultService) {
    // 384 pages under a 64-page budget; the stream writes the first 320, so
    // the last clusters reach pages mapped dirty but never written.
    let (pages, written) = (384, 320);
    let r = anon_region(pages, 64, "fifo", service);
    let mut shadow = vec![None; pages];
    for p in 0..written {
        write_recorded(&r, &mut shadow, p, 0x51);
        if p % 16 == 0 {
            assert_within_budget(&r.stats(), p);
        }
    }
    let s = r.stats();
    assert_within_budget(&s, written);
    // Every page counted as a missing fault, most of them served ahead of
    // their touch in clusters: few fault events.
    assert!(s.missing_faults >= written as u64, "{s:?}");
    assert!(s.zero_around_pages >= (written as u64) * 3 / 4, "{s:?}");
    assert!(
        s.fault_events * 8 <= written as u64,
        "a sequential stream of first writes should take few fault events: {s:?}"
    );
    // Clusters mapped writable: no write-protect fault per page.
    assert!(s.wp_faults * 8 <= written as u64, "{s:?}");
    // Most pages went to swap and come back from it.
    assert!(
        s.evictions >= (written - 64) as u64 && s.writebacks > 0,
        "{s:?}"
    );
    assert_eq!(
        mismatches(&r, &shadow),
        Vec::<usize>::new(),
        "{:?}",
        r.stats()
    );
    let s = r.stats();
    assert_within_budget(&s, pages);
    assert_eq!(s.writeback_errors + s.read_errors, 0, "{s:?}");
    r.unmap().unwrap();
}

#[test]
fn test_sequential_first_writes_take_few_faults_and_read_back_after_swap_handler_thread() {
    sequential_first_writes_read_back_after_swap(FaultService::HandlerThreads);
}

#[test]
fn test_sequential_first_writes_take_few_faults_and_read_back_after_swap_faulting_thread() {
    sequential_first_writes_read_back_after_swap(FaultService::FaultingThread);
}

/// A random order of `0..n` in which no page is followed by the next one (a
/// stream of length two would be a sequence).
fn random_order(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = Rng(seed);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    while let Some(i) = (1..n).find(|&i| order[i] == order[i - 1] + 1) {
        order.swap(i, rng.below(n));
    }
    order
}

#[test]
fn test_random_first_touches_are_filled_one_page_per_fault() {
    for service in SERVICES {
        // Over a budget of half the region: random evictions too.
        let pages = 256;
        let r = anon_region(pages, 128, "lru", service);
        let mut shadow = vec![None; pages];
        for (i, p) in random_order(pages, 0xC0FFEE).into_iter().enumerate() {
            // Reads and writes mixed: neither kind makes a cluster.
            if i % 3 == 0 {
                assert_eq!(read_word(&r, p), 0);
            } else {
                write_recorded(&r, &mut shadow, p, 0x77);
            }
            assert_within_budget(&r.stats(), p);
        }
        let s = r.stats();
        assert_eq!(s.zero_around_pages, 0, "{service:?}: {s:?}");
        assert_eq!(s.missing_faults, pages as u64, "{service:?}: {s:?}");
        assert_eq!(s.fault_events, pages as u64, "{service:?}: {s:?}");
        assert_eq!(mismatches(&r, &shadow), Vec::<usize>::new(), "{service:?}");
        r.unmap().unwrap();
    }
}

#[test]
fn test_zero_clusters_never_exceed_a_small_budget() {
    for service in SERVICES {
        // 24 frames: clusters of up to 12 (half the budget) evict for
        // themselves on every fault once the budget is full.
        let (pages, budget) = (200, 24);
        let r = anon_region(pages, budget, "clock", service);
        let mut shadow = vec![None; pages];
        for pass in 0..2u64 {
            for p in 0..pages {
                if pass == 0 && p % 5 == 4 {
                    // A read in the stream: the cluster it makes is clean.
                    assert_eq!(read_word(&r, p), 0);
                } else {
                    write_recorded(&r, &mut shadow, p, pass);
                }
                let s = r.stats();
                assert_within_budget(&s, p);
                assert!(s.frames_in_use <= budget as u64, "{service:?}: {s:?}");
            }
        }
        let s = r.stats();
        assert!(s.zero_around_pages > 0, "{service:?}: {s:?}");
        assert_eq!(mismatches(&r, &shadow), Vec::<usize>::new(), "{service:?}");
        r.unmap().unwrap();
    }
}

#[test]
fn test_pages_written_after_a_read_cluster_are_written_back() {
    for service in SERVICES {
        // The read clusters fit in the budget: nothing is evicted before the
        // writes to them.
        let (pages, budget, hot) = (256, 64, 32);
        let r = anon_region(pages, budget, "fifo", service);
        // A stream of first reads: clusters mapped write-protected.
        for p in 0..hot {
            assert_eq!(read_word(&r, p), 0);
        }
        let s = r.stats();
        assert!(
            s.zero_around_pages > 0 && s.fault_events < hot as u64,
            "{s:?}"
        );
        assert_eq!(s.evictions, 0, "{s:?}");
        let wp_before = s.wp_faults;
        // Writes to them are seen (one write-protect fault each) ...
        let mut shadow = vec![None; pages];
        for p in 0..hot {
            write_recorded(&r, &mut shadow, p, 0xAB);
        }
        let s = r.stats();
        assert!(s.wp_faults >= wp_before + hot as u64, "{service:?}: {s:?}");
        // ... so they are written back when a write stream evicts them, and
        // come back from swap with their data.
        for p in hot..pages {
            write_recorded(&r, &mut shadow, p, 0xCD);
        }
        let s = r.stats();
        assert!(s.writebacks >= hot as u64, "{service:?}: {s:?}");
        assert_eq!(mismatches(&r, &shadow), Vec::<usize>::new(), "{service:?}");
        r.unmap().unwrap();
    }
}

#[test]
fn test_zero_around_of_one_page_fills_every_first_touch_alone() {
    for service in SERVICES {
        let pages = 128;
        let len = pages * PAGE_SIZE;
        let r = Region::map(
            RegionOptions::new(Backing::Anonymous { len }, len, "fifo")
                .with_fault_service(service)
                .with_zero_around(1),
        )
        .unwrap();
        let mut shadow = vec![None; pages];
        for p in 0..pages {
            write_recorded(&r, &mut shadow, p, 3);
        }
        let s = r.stats();
        assert_eq!(s.zero_around_pages, 0, "{s:?}");
        assert_eq!(s.fault_events, pages as u64, "{s:?}");
        assert_eq!(s.missing_faults, pages as u64, "{s:?}");
        assert_eq!(mismatches(&r, &shadow), Vec::<usize>::new());
        r.unmap().unwrap();
    }
}

#[test]
fn test_threads_streaming_through_shared_pages_keep_every_write() {
    use std::sync::atomic::{AtomicU64, Ordering};
    for service in SERVICES {
        // Four threads walk the same pages in order, each reading then
        // writing its own word of every page: a cluster made by one thread's
        // fault (write: writable and dirty; read: write-protected) is used by
        // the others, and the region, four times its budget, is evicted to
        // swap behind them.
        let (pages, budget, threads) = (512, 128, 4);
        let r = anon_region(pages, budget, "clock", service);
        let base = r.as_ptr() as usize;
        let word = |p: usize, t: usize| (base + p * PAGE_SIZE + t * 8) as *const AtomicU64;
        let shadow: Vec<AtomicU64> = (0..pages * threads).map(|_| AtomicU64::new(0)).collect();
        for pass in 1..=2u64 {
            let bad = AtomicU64::new(0);
            std::thread::scope(|sc| {
                for t in 0..threads {
                    let (bad, shadow) = (&bad, &shadow);
                    sc.spawn(move || {
                        for p in 0..pages {
                            // SAFETY: inside the region, 8-aligned; only
                            // thread t writes word t of a page.
                            let cell = unsafe { &*word(p, t) };
                            let want = shadow[p * threads + t].load(Ordering::Relaxed);
                            if cell.load(Ordering::Relaxed) != want {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                            let v = stamp(p * threads + t, pass);
                            cell.store(v, Ordering::Relaxed);
                            shadow[p * threads + t].store(v, Ordering::Relaxed);
                        }
                    });
                }
            });
            let s = r.stats();
            assert_eq!(bad.into_inner(), 0, "{service:?} pass {pass}: {s:?}");
            assert_within_budget(&s, pages);
        }
        let s = r.stats();
        assert!(
            s.zero_around_pages > 0 && s.evictions > 0,
            "{service:?}: {s:?}"
        );
        for p in 0..pages {
            for t in 0..threads {
                // SAFETY: as above; the threads have finished.
                let got = unsafe { &*word(p, t) }.load(Ordering::Relaxed);
                assert_eq!(
                    got,
                    stamp(p * threads + t, 2),
                    "{service:?} page {p} word {t}"
                );
            }
        }
        r.unmap().unwrap();
    }
}
