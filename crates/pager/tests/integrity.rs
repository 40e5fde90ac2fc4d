//! Integrity under concurrency: several threads doing random reads and
//! writes over regions four times larger than their budget, checked against
//! a shadow copy, then (for files) the file compared byte for byte.

mod common;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

const OPS: usize = 1_000_000;

fn file_round_trip(
    policy: &str,
    handlers: usize,
    threads: usize,
    ops: usize,
    service: FaultService,
) {
    // Not a whole number of pages: the tail page is written back partially.
    let len = 1024 * PAGE_SIZE + 1000;
    let out = hammer_file_region("integrity", 7, len, policy, threads, ops, |o| {
        o.with_handler_threads(handlers).with_fault_service(service)
    });
    let stats = out.stats;
    assert!(stats.frames_in_use <= stats.budget_frames, "{stats:?}");
    assert!(out.allocated_bytes <= (stats.budget_frames as usize * PAGE_SIZE) as u64);
    assert!(stats.evictions > 500 && stats.writebacks > 100, "{stats:?}");
    assert_eq!(stats.overruled, 0, "{stats:?}");
}

#[test]
fn test_file_region_two_threads_million_ops_match_shadow_and_file() {
    file_round_trip("lru", 2, 2, OPS, FaultService::HandlerThreads);
}

#[test]
fn test_file_region_four_threads_two_handlers_match_shadow() {
    file_round_trip("fifo", 2, 4, OPS / 4, FaultService::HandlerThreads);
}

#[test]
fn test_file_region_eight_threads_under_car_reusing_slots_match_shadow_and_file() {
    // Four times the budget: the table remembers two budgets of evicted
    // pages, so CAR's ghosts see their slots reused (`Policy::on_forget`).
    file_round_trip("car", 2, 8, OPS / 4, FaultService::HandlerThreads);
}

#[test]
fn test_file_region_mru_policy_keeps_data() {
    file_round_trip("mru", 1, 2, OPS / 4, FaultService::HandlerThreads);
}

#[test]
fn test_anon_region_two_threads_million_ops_match_shadow() {
    let len = 1024 * PAGE_SIZE;
    let region = Region::map_anon(len, len / 4, "clock").unwrap();
    let shadow = shadow_of(&vec![0u8; len]);
    let bad = hammer(region.as_ptr(), len, &shadow, 2, OPS);
    let stats = region.stats();
    println!("{}", region.stats_json());
    assert_eq!(bad, 0, "{stats:?}");
    // Compare the whole region while mapped.
    // SAFETY: the region is mapped for `len` bytes and no thread writes now.
    let now = unsafe { std::slice::from_raw_parts(region.as_ptr(), len) }.to_vec();
    assert_eq!(diff(&now, &image(&shadow, &vec![0u8; len])), 0);
    assert!(stats.frames_in_use <= stats.budget_frames, "{stats:?}");
    assert!(stats.writebacks > 100, "{stats:?}");
    region.unmap().unwrap();
}

#[test]
fn test_file_region_served_in_faulting_threads_matches_shadow_and_file() {
    file_round_trip("clock", 1, 2, OPS / 2, FaultService::FaultingThread);
}

#[test]
fn test_anon_region_served_in_faulting_threads_matches_shadow() {
    let len = 1024 * PAGE_SIZE;
    let opts = RegionOptions::new(Backing::Anonymous { len }, len / 4, "fifo")
        .with_fault_service(FaultService::FaultingThread);
    let region = Region::map(opts).unwrap();
    let shadow = shadow_of(&vec![0u8; len]);
    let bad = hammer(region.as_ptr(), len, &shadow, 2, OPS / 2);
    let stats = region.stats();
    assert_eq!(bad, 0, "{stats:?}");
    assert_eq!(stats.handler_threads, 0);
    assert!(stats.evictions > 500, "{stats:?}");
    region.unmap().unwrap();
}

#[test]
fn test_every_live_policy_runs_unchanged_and_keeps_data() {
    use pagepilot_pager::policy::registry::{self, Setup};
    let setup = Setup {
        slots: 256,
        frames: 64,
        future: None,
    };
    let mut live: Vec<String> = registry::available()
        .into_iter()
        .filter(|name| registry::build_live(name, &setup).is_ok())
        .map(String::from)
        .collect();
    assert!(live.len() >= 3, "{live:?}");
    // And the policy programs shipped with the repository.
    let programs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");
    if let Ok(dir) = std::fs::read_dir(programs) {
        for e in dir.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "hp") {
                live.push(p.to_string_lossy().into_owned());
            }
        }
    }
    for name in &live {
        let name = name.as_str();
        let len = 256 * PAGE_SIZE;
        let region = Region::map_anon(len, len / 4, name).unwrap();
        let shadow = shadow_of(&vec![0u8; len]);
        let bad = hammer(region.as_ptr(), len, &shadow, 2, 30_000);
        let stats = region.stats();
        assert_eq!(bad, 0, "{name}: {stats:?}");
        assert_eq!(stats.overruled, 0, "{name}: {stats:?}");
        assert!(
            stats.frames_in_use <= stats.budget_frames,
            "{name}: {stats:?}"
        );
        region.unmap().unwrap();
    }
}

#[test]
fn test_flushes_during_concurrent_writes_lose_nothing() {
    let dir = Scratch::new("flushing");
    let path = dir.file("data");
    let len = 512 * PAGE_SIZE;
    let data = random_file(&path, len, 9);
    let shadow = shadow_of(&data);
    let region = Region::map_file(&path, true, len / 4, "clock").unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let flushes = std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                region.flush().unwrap();
                n += 1;
            }
            n
        });
        let bad = hammer(region.as_ptr(), len, &shadow, 2, OPS / 4);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(bad, 0);
        flusher.join().unwrap()
    });
    assert!(flushes > 0);
    region.flush().unwrap();
    // After a flush the file already holds everything, before any unmap.
    let back = std::fs::read(&path).unwrap();
    assert_eq!(diff(&back, &image(&shadow, &data)), 0, "after flush");
    region.unmap().unwrap();
    let back = std::fs::read(&path).unwrap();
    assert_eq!(diff(&back, &image(&shadow, &data)), 0, "after unmap");
}

#[test]
fn test_tiny_budget_under_contention_keeps_data() {
    // Nearly every access faults: 64 pages, 4 frames, short bursts, two
    // threads, with one or two handlers or in the faulting threads.
    let configs = [
        (1, FaultService::HandlerThreads),
        (2, FaultService::HandlerThreads),
        (1, FaultService::FaultingThread),
    ];
    for (handlers, service) in configs {
        let dir = Scratch::new("tiny");
        let path = dir.file("data");
        let len = 64 * PAGE_SIZE;
        let data = random_file(&path, len, 5);
        let shadow = shadow_of(&data);
        let opts = RegionOptions::new(
            Backing::File {
                path: path.clone(),
                writable: true,
            },
            4 * PAGE_SIZE,
            "clock",
        )
        .with_handler_threads(handlers)
        .with_fault_service(service);
        let region = Region::map(opts).unwrap();
        let bad = hammer_with(region.as_ptr(), len, &shadow, 2, 20_000, (1, 8));
        let stats = region.stats();
        assert_eq!(bad, 0, "{service:?} x{handlers}: {stats:?}");
        assert!(stats.missing_faults > 1_000, "{stats:?}");
        region.unmap().unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(
            diff(&back, &image(&shadow, &data)),
            0,
            "{service:?} x{handlers}"
        );
    }
}
