//! Asynchronous read-ahead with several windows in flight: the data the
//! application reads is the file's, whichever prefetcher finished first, and
//! every page read is one page-in.

mod common;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

fn scan_and_compare(
    policy: &str,
    depth: usize,
    loops: usize,
    threads: usize,
    service: FaultService,
) {
    let d = Scratch::new("readahead");
    let path = d.file("data");
    let pages = 1024;
    let data = random_file(&path, pages * PAGE_SIZE, 5);
    let region = Region::map(
        RegionOptions::new(
            Backing::File {
                path,
                writable: false,
            },
            pages * PAGE_SIZE / 4,
            policy,
        )
        .with_readahead(32)
        .with_async_readahead(true)
        .with_readahead_depth(depth)
        .with_handler_threads(threads)
        .with_fault_service(service),
    )
    .unwrap();
    let mut mismatches = 0;
    for _ in 0..loops {
        for p in 0..pages {
            // SAFETY: inside the region, which is mapped for pages * PAGE_SIZE bytes.
            let got = unsafe {
                std::slice::from_raw_parts(region.as_ptr().add(p * PAGE_SIZE), PAGE_SIZE)
            };
            mismatches += diff(got, &data[p * PAGE_SIZE..(p + 1) * PAGE_SIZE]);
        }
    }
    let s = region.stats();
    println!("{policy} depth={depth}: {}", region.stats_json());
    assert_eq!(mismatches, 0);
    assert!(s.frames_in_use <= (pages / 4) as u64);
    // LRU and FIFO re-read every page of a cyclic scan 4x the budget; MRU
    // keeps most of it.
    let passes = if policy == "mru" { 1 } else { loops };
    assert!(s.bytes_read >= (pages * passes * PAGE_SIZE) as u64);
    assert_eq!(s.bytes_read, s.missing_faults * PAGE_SIZE as u64);
    region.unmap().unwrap();
}

#[test]
fn test_prefetch_windows_in_flight_deliver_file_contents() {
    scan_and_compare("lru", 4, 3, 1, FaultService::HandlerThreads);
    scan_and_compare("fifo", 8, 2, 2, FaultService::HandlerThreads);
    // Markers touched in the faulting thread's SIGBUS handler.
    scan_and_compare("mru", 4, 2, 1, FaultService::FaultingThread);
}

#[test]
fn test_prefetch_depth_out_of_range_is_refused() {
    let d = Scratch::new("readahead-bad");
    let path = d.file("data");
    random_file(&path, 16 * PAGE_SIZE, 1);
    // 0 is the default: the pager chooses (see the defaults test).
    for depth in [17, 1000] {
        let opts = RegionOptions::new(
            Backing::File {
                path: path.clone(),
                writable: false,
            },
            4 * PAGE_SIZE,
            "lru",
        )
        .with_async_readahead(true)
        .with_readahead_depth(depth);
        assert!(matches!(
            Region::map(opts),
            Err(pagepilot_pager::MapError::BadOption {
                name: "readahead_depth",
                ..
            })
        ));
    }
}

#[test]
fn test_writes_to_prefetched_pages_reach_the_file() {
    let d = Scratch::new("readahead-write");
    let path = d.file("data");
    let pages = 512;
    let mut data = random_file(&path, pages * PAGE_SIZE, 9);
    let region = Region::map(
        RegionOptions::new(
            Backing::File {
                path: path.clone(),
                writable: true,
            },
            pages * PAGE_SIZE / 4,
            "mru",
        )
        .with_readahead(16)
        .with_async_readahead(true),
    )
    .unwrap();
    for p in 0..pages {
        // Write into the middle of each page: pages of prefetched windows
        // are mapped write-protected before the policy knows them.
        let off = p * PAGE_SIZE + 100 + p % 7;
        // SAFETY: inside the region.
        unsafe { region.as_ptr().add(off).write_volatile(p as u8) };
        data[off] = p as u8;
    }
    region.unmap().unwrap();
    let back = std::fs::read(&path).unwrap();
    assert_eq!(diff(&back, &data), 0);
}

#[test]
fn test_fault_reads_by_reader_threads_keep_data() {
    // One handler hands the reads of missing faults to four reader threads:
    // four application threads' faults are read concurrently.
    let out = hammer_file_region("readers", 3, 1024 * PAGE_SIZE, "clock", 4, 200_000, |o| {
        o.with_reader_threads(4)
    });
    let stats = out.stats;
    assert_eq!(stats.overruled, 0, "{stats:?}");
    assert!(stats.evictions > 500, "{stats:?}");
    assert!(out.allocated_bytes <= (stats.budget_frames as usize * PAGE_SIZE) as u64);
}

/// With no option but the policy, a region reads ahead asynchronously, in
/// windows the pager sizes from the policy, the region and the budget
/// (docs/pager.md, "Defaults"): a sequential scan is served by windows read
/// ahead, within the budget throughout; a policy program reads ahead
/// synchronously.
#[test]
fn test_defaults_read_ahead_asynchronously_in_windows_sized_from_the_budget() {
    let d = Scratch::new("readahead-defaults");
    let path = d.file("data");
    let pages = 2048;
    let data = random_file(&path, pages * PAGE_SIZE, 12);
    let budget = pages / 4 * PAGE_SIZE;
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/mru.hp");
    // (policy, window, depth, asynchronous): MRU spends a twentieth of the
    // pages beyond the budget on two windows, capped at a quarter of the
    // budget; CLOCK gets 128 x 4, capped likewise; a program reads
    // synchronously.
    for (policy, window, depth, ahead) in [
        ("mru", (pages - pages / 4) / 20 / 2, 1, true),
        ("clock", pages / 4 / 4 / 5, 4, true),
        (program, 16, 1, false),
    ] {
        let region = Region::map_file(&path, false, budget, policy).unwrap();
        let s = region.stats();
        assert_eq!(
            (s.readahead_max_pages, s.readahead_depth, s.async_readahead),
            (window as u64, depth, ahead),
            "{policy}: {s:?}"
        );
        for p in 0..pages {
            // SAFETY: inside the region.
            let v = unsafe { region.as_ptr().add(p * PAGE_SIZE + 5).read_volatile() };
            assert_eq!(v, data[p * PAGE_SIZE + 5], "{policy} page {p}");
            if p % 64 == 0 {
                let s = region.stats();
                assert!(
                    s.frames_in_use <= s.budget_frames && s.over_budget == 0,
                    "{policy}: {s:?}"
                );
                assert!(region.allocated_bytes() <= budget as u64, "{policy}");
            }
        }
        let s = region.stats();
        assert!(s.readahead_pages > pages as u64 / 2, "{policy}: {s:?}");
        assert!(s.fault_events < pages as u64 / 4, "{policy}: {s:?}");
        region.unmap().unwrap();
    }
}

/// Two threads, each streaming through its own half of a region mapped with
/// the defaults: each stream keeps its window (the pager follows several
/// sequences, not the region's last fault), so few fault events serve all
/// the pages, and every page is read right.
#[test]
fn test_two_threads_streaming_their_halves_read_right_with_few_faults() {
    let d = Scratch::new("readahead-streams");
    let path = d.file("data");
    let pages = 4096;
    let data = random_file(&path, pages * PAGE_SIZE, 14);
    let region = Region::map_file(&path, false, pages / 4 * PAGE_SIZE, "clock").unwrap();
    let base = region.as_ptr() as usize;
    let bad = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for half in 0..2 {
            let (data, bad) = (&data, &bad);
            sc.spawn(move || {
                for p in half * pages / 2..(half + 1) * pages / 2 {
                    let at = p * PAGE_SIZE + 3;
                    // SAFETY: inside the region.
                    let v = unsafe { ((base + at) as *const u8).read_volatile() };
                    if v != data[at] {
                        bad.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let s = region.stats();
    assert_eq!(bad.into_inner(), 0, "{s:?}");
    assert!(s.fault_events < pages as u64 / 16, "{s:?}");
    println!("fault events {} for {pages} pages", s.fault_events);
    assert!(
        s.frames_in_use <= s.budget_frames && s.over_budget == 0,
        "{s:?}"
    );
    region.unmap().unwrap();
}

/// Reads a byte of each page of both halves of `region` (holding `data`),
/// a page of each half at a time, and checks it.
fn read_halves_in_turn(region: &Region, data: &[u8]) {
    let pages = data.len() / PAGE_SIZE;
    for i in 0..pages / 2 {
        for p in [i, pages / 2 + i] {
            let at = p * PAGE_SIZE + 9;
            // SAFETY: inside the region, which maps `data.len()` bytes.
            let v = unsafe { region.as_ptr().add(at).read_volatile() };
            assert_eq!(v, data[at], "page {p}");
        }
    }
}

/// One thread reading two parts of a region in turn, a page of each at a
/// time: both sequences keep their windows (each missing fault of one does
/// not reset the other's), so few fault events serve every page.
#[test]
fn test_two_parts_read_in_turn_each_keep_their_window() {
    let d = Scratch::new("readahead-turns");
    let path = d.file("data");
    let pages = 4096;
    let data = random_file(&path, pages * PAGE_SIZE, 15);
    let region = Region::map_file(&path, false, pages / 4 * PAGE_SIZE, "clock").unwrap();
    read_halves_in_turn(&region, &data);
    let s = region.stats();
    println!("fault events {} for {pages} pages", s.fault_events);
    assert!(s.fault_events < pages as u64 / 16, "{s:?}");
    region.unmap().unwrap();
}

/// Two sequences read in turn, with room for both: each keeps its own
/// windows ahead (`readahead_depth` of them), so more windows are read
/// ahead at once than one sequence's depth, as the kernel keeps each
/// stream's read-ahead in flight.
#[test]
fn test_each_sequence_keeps_its_own_windows_ahead() {
    let d = Scratch::new("readahead-depths");
    let path = d.file("data");
    let pages = 8192;
    let data = random_file(&path, pages * PAGE_SIZE, 16);
    let region = Region::map_file(&path, false, pages * PAGE_SIZE, "clock").unwrap();
    read_halves_in_turn(&region, &data);
    let s = region.stats();
    println!("{}", region.stats_json());
    assert!(s.async_readahead && s.readahead_depth >= 2, "{s:?}");
    assert!(
        s.windows_ahead_max > s.readahead_depth,
        "two sequences, {} windows ahead at most: {s:?}",
        s.windows_ahead_max
    );
    assert!(s.fault_events < pages as u64 / 16, "{s:?}");
    region.unmap().unwrap();
}
