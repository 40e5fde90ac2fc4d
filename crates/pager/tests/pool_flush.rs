//! HiPEC's I/O handling, live: the dirty pages of frames a pool reclaims,
//! and those a policy program flushes, reach the backing file, written by
//! the pool's reclaimer thread, not by the faulting thread. The tests run
//! one at a time, so that the only pool reclaimer thread (`pp-pool`) of
//! the process is the running test's.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, FaultService, Pool, Region, RegionOptions, PAGE_SIZE};

/// Held by each test: one pool in the process at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Bytes the process's threads named `name` passed to write system calls
/// (`wchar` of /proc/self/task/*/io).
fn written_by_threads(name: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            total += wchar(&task.path().join("io"));
        }
    }
    total
}

fn wchar(io: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(io).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn test_reclaimed_dirty_pages_reach_the_file_written_by_the_pools_reclaimer_not_the_faulting_thread(
) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("pool-flush");
    let path = dir.file("a");
    let pages = 256;
    let data = random_file(&path, pages * PAGE_SIZE, 23);
    let pool = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_partition_burst(256 * PAGE_SIZE);
    // A serves its faults in the faulting thread (this one): a write-back
    // done on a fault would be this thread's.
    let backing = Backing::File {
        path: path.clone(),
        writable: true,
    };
    let opts = RegionOptions::new(backing, 200 * PAGE_SIZE, "clock")
        .with_pool(&pool)
        .with_min_frames(50)
        .with_fault_around(1)
        .with_readahead(1)
        .with_fault_service(FaultService::FaultingThread);
    let a = Region::map(opts).unwrap();
    for p in 0..200 {
        // SAFETY: inside region A.
        unsafe {
            a.as_ptr()
                .add(p * PAGE_SIZE)
                .write_volatile(!data[p * PAGE_SIZE])
        };
    }
    assert_eq!(a.stats().writebacks, 0);
    let mine = wchar(std::path::Path::new("/proc/thread-self/io"));
    let reclaimer = written_by_threads("pp-pool");
    // B's minimum of 150 needs 94 of A's 200 frames: A's CLOCK names them,
    // all dirty, and the reclaimer writes them back.
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
    let start = std::time::Instant::now();
    while b.stats().budget_frames < 150 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "B never got its minimum"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = a.stats();
    assert_eq!((s.budget_frames, s.writebacks), (106, 94), "{s:?}");
    assert_eq!(
        (s.pool_reclaimed_frames, s.forced_reclaims),
        (94, 0),
        "{s:?}"
    );
    let by_reclaimer = written_by_threads("pp-pool") - reclaimer;
    let by_me = wchar(std::path::Path::new("/proc/thread-self/io")) - mine;
    assert!(
        by_reclaimer >= (94 * PAGE_SIZE) as u64,
        "reclaimer wrote {by_reclaimer} bytes"
    );
    assert_eq!(by_me, 0, "the faulting thread wrote");
    // The file, read on a descriptor of its own while A is mapped, holds
    // the 94 pages written back.
    assert_eq!(dirty_in_file(&path, &data, 200), 94);
    a.unmap().unwrap();
    b.unmap().unwrap();
}

/// FIFO that flushes every page it holds at each fault (HiPEC's Flush).
const FLUSHES_AT_EACH_FAULT: &str = "
queue loaded;
page p;
int n;
event PageFault() {
    n = count(loaded);
    while (n > 0) {
        p = dequeue(loaded);
        flush(p);
        enqueue(loaded, p);
        n -= 1;
    }
    if (free == 0) { victim = fifo(loaded); }
    enqueue(loaded, fault);
}
event ReclaimFrame() {
    victim = fifo(loaded);
}
";

#[test]
fn test_pages_a_program_flushes_in_a_pool_are_written_by_the_reclaimer_not_the_faulting_thread() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("pool-flush-cmd");
    let program = dir.file("flushes.hp");
    std::fs::write(&program, FLUSHES_AT_EACH_FAULT).unwrap();
    let path = dir.file("a");
    let data = random_file(&path, 64 * PAGE_SIZE, 29);
    let pool = Pool::new(64 * PAGE_SIZE).unwrap();
    let backing = Backing::File {
        path: path.clone(),
        writable: true,
    };
    let opts = RegionOptions::new(backing, 64 * PAGE_SIZE, program.to_str().unwrap())
        .with_pool(&pool)
        .with_fault_around(1)
        .with_readahead(1)
        .with_fault_service(FaultService::FaultingThread);
    let a = Region::map(opts).unwrap();
    let mine = wchar(std::path::Path::new("/proc/thread-self/io"));
    // Each write's fault flushes the pages written before it: 0..19.
    for p in 0..20 {
        // SAFETY: inside region A.
        unsafe {
            a.as_ptr()
                .add(p * PAGE_SIZE)
                .write_volatile(!data[p * PAGE_SIZE])
        };
    }
    let start = std::time::Instant::now();
    while dirty_in_file(&path, &data, 20) < 19 {
        assert!(start.elapsed() < Duration::from_secs(10), "never flushed");
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = a.stats();
    assert_eq!(s.evictions, 0, "{s:?}");
    let by_me = wchar(std::path::Path::new("/proc/thread-self/io")) - mine;
    assert_eq!(by_me, 0, "the faulting thread wrote");
    assert!(written_by_threads("pp-pool") >= (19 * PAGE_SIZE) as u64);
    a.unmap().unwrap();
    assert_eq!(dirty_in_file(&path, &data, 20), 20);
}
