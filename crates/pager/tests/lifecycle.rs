//! Threads around a region (docs/lifecycle.md): eight threads under every
//! live policy and a policy program keep every write; threads that start
//! and end while other threads' faults are in flight change nothing;
//! unmapping while threads touch the region ends in a defined way (later
//! accesses fault as on unmapped memory), never a hang or another crash;
//! a Rust program that exits without unmapping keeps every write.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

const WATCHDOG: Duration = Duration::from_secs(60);

/// Every policy the live pager runs, and a policy program.
fn live_policies() -> Vec<String> {
    let program = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/lru.hp");
    [
        "fifo", "clock", "mru-live", "sieve", "s3fifo", "car", "seq-live",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([program.display().to_string()])
    .collect()
}

#[test]
fn test_eight_threads_keep_every_write_of_a_file_under_every_live_policy() {
    let len = 1024 * PAGE_SIZE + 1000;
    for (i, policy) in live_policies().iter().enumerate() {
        let out = hammer_file_region("eight", 40 + i as u64, len, policy, 8, 200_000, |o| o);
        assert_eq!(out.stats.overruled, 0, "{policy}: {:?}", out.stats);
        assert!(out.stats.evictions > 100, "{policy}: {:?}", out.stats);
    }
}

#[test]
fn test_eight_threads_keep_every_write_of_anonymous_memory_under_every_live_policy() {
    let len = 1024 * PAGE_SIZE;
    for policy in live_policies() {
        let region = Region::map_anon(len, len / 4, &policy).unwrap();
        let shadow = shadow_of(&vec![0u8; len]);
        let bad = hammer(region.as_ptr(), len, &shadow, 8, 200_000);
        assert_eq!(bad, 0, "{policy}: {:?}", region.stats());
        // SAFETY: the region is mapped for `len` bytes; no thread writes now.
        let now = unsafe { std::slice::from_raw_parts(region.as_ptr(), len) }.to_vec();
        assert_eq!(diff(&now, &image(&shadow, &vec![0u8; len])), 0, "{policy}");
        region.unmap().unwrap();
    }
}

/// One thread faults through the first half all along while, on the second
/// half, rounds of short-lived threads start, fault and end.
fn threads_come_and_go(service: FaultService) {
    let dir = Scratch::new("churn");
    let path = dir.file("data");
    let len = 1024 * PAGE_SIZE;
    let data = random_file(&path, len, 51);
    let shadow = shadow_of(&data);
    let region = map_writable(&path, len / 4, "clock", service);
    let half = len / 2;
    let (first, second) = shadow.split_at(half / 8);
    let base = region.as_ptr() as usize;
    let bad = std::thread::scope(|s| {
        let steady = s.spawn(|| hammer(base as *mut u8, half, first, 1, 400_000));
        let mut bad = 0;
        for _ in 0..100 {
            bad += hammer((base + half) as *mut u8, half, second, 3, 3_000);
        }
        bad + steady.join().unwrap()
    });
    assert_eq!(bad, 0, "{:?}", region.stats());
    region.unmap().unwrap();
    let back = std::fs::read(&path).unwrap();
    assert_eq!(diff(&back, &image(&shadow, &data)), 0);
}

#[test]
fn test_threads_starting_and_ending_during_faults_change_nothing_with_handler_threads() {
    threads_come_and_go(FaultService::HandlerThreads);
}

#[test]
fn test_threads_starting_and_ending_during_faults_change_nothing_in_the_faulting_thread() {
    threads_come_and_go(FaultService::FaultingThread);
}

/// The region being unmapped, and what its threads may touch: an access
/// there after the unmap began is a SIGSEGV, which [`late_access`] takes
/// by mapping a scratch page in its place (once the region is gone) and
/// telling the threads to stop. Any other SIGSEGV is a crash.
static RANGE_START: AtomicUsize = AtomicUsize::new(0);
static RANGE_END: AtomicUsize = AtomicUsize::new(0);
static UNMAPPING: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);
/// The unmap returned: the region's views are gone.
static GONE: AtomicBool = AtomicBool::new(false);
static LATE: AtomicU64 = AtomicU64::new(0);

extern "C" fn late_access(_: i32, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as usize;
    let inside = (RANGE_START.load(SeqCst)..RANGE_END.load(SeqCst)).contains(&addr);
    if !inside || !UNMAPPING.load(SeqCst) {
        // A crash: die of it (the default action, when the access retries).
        // SAFETY: resets SIGSEGV to its default action.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        return;
    }
    LATE.fetch_add(1, SeqCst);
    STOP.store(true, SeqCst);
    let page = addr & !(PAGE_SIZE - 1);
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE;
    loop {
        // SAFETY: maps a page only where nothing is mapped (NOREPLACE):
        // once the region's view is gone.
        let p = unsafe {
            libc::mmap(
                page as *mut _,
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if p as usize == page {
            return;
        }
        if GONE.load(SeqCst) {
            // Another thread's scratch page is there already.
            return;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// Rounds of: threads touching random pages of a region, the main thread
/// unmapping it after a random moment. Each round must end: the threads
/// stop, the unmap returns, and every SIGSEGV was a late access.
fn unmap_races_threads(service: FaultService, anonymous: bool) {
    // SAFETY: installs a SA_SIGINFO handler for SIGSEGV in this process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) = late_access;
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
    }
    let dir = Scratch::new("unmap-race");
    let len = 256 * PAGE_SIZE;
    let path = dir.file("data");
    random_file(&path, len, 61);
    let mut rng = Rng(7);
    for round in 0..30 {
        let backing = if anonymous {
            Backing::Anonymous { len }
        } else {
            Backing::File {
                path: path.clone(),
                writable: true,
            }
        };
        let region =
            Region::map(RegionOptions::new(backing, len / 4, "clock").with_fault_service(service))
                .unwrap();
        let (start, end) = (region.as_ptr() as usize, region.as_ptr() as usize + len);
        RANGE_START.store(start, SeqCst);
        RANGE_END.store(end, SeqCst);
        UNMAPPING.store(false, SeqCst);
        STOP.store(false, SeqCst);
        GONE.store(false, SeqCst);
        let delay = Duration::from_micros(rng.below(5_000) as u64);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                s.spawn(move || {
                    let mut r = Rng(round * 10 + t + 1);
                    while !STOP.load(SeqCst) {
                        let at = start + r.below(len / 8) * 8;
                        // SAFETY: inside the region, or (after the unmap)
                        // where the SIGSEGV handler maps a scratch page.
                        unsafe {
                            if r.next().is_multiple_of(3) {
                                (at as *mut u64).write_volatile(r.next());
                            } else {
                                (at as *const u64).read_volatile();
                            }
                        }
                    }
                });
            }
            std::thread::sleep(delay);
            UNMAPPING.store(true, SeqCst);
            region.unmap().expect("the unmap's write-back");
            GONE.store(true, SeqCst);
            // Threads still inside find scratch pages and stop.
            STOP.store(true, SeqCst);
        });
        // SAFETY: the region is gone; only scratch pages can be left there.
        unsafe { libc::munmap(start as *mut _, len) };
    }
    println!("late accesses {}", LATE.load(SeqCst));
}

fn unmap_race(name: &str, service: FaultService, anonymous: bool) {
    let out = in_child_process(name, WATCHDOG, || unmap_races_threads(service, anonymous));
    assert!(!out.hung(), "unmapping hung: {out:?}");
    assert!(out.succeeded(), "{out:?}");
}

#[test]
fn test_unmap_racing_faulting_threads_ends_cleanly_with_handler_threads() {
    unmap_race(
        "test_unmap_racing_faulting_threads_ends_cleanly_with_handler_threads",
        FaultService::HandlerThreads,
        false,
    );
}

#[test]
fn test_unmap_racing_faulting_threads_ends_cleanly_in_the_faulting_thread() {
    unmap_race(
        "test_unmap_racing_faulting_threads_ends_cleanly_in_the_faulting_thread",
        FaultService::FaultingThread,
        false,
    );
}

#[test]
fn test_unmap_racing_faulting_threads_of_anonymous_memory_ends_cleanly() {
    unmap_race(
        "test_unmap_racing_faulting_threads_of_anonymous_memory_ends_cleanly",
        FaultService::HandlerThreads,
        true,
    );
}

/// Writes every page of a file region, then `std::process::exit` with the
/// region still mapped (no `Drop` runs): the file holds every write.
fn exit_keeps_writes(name: &str, service: FaultService) {
    let path = shared_path(name, "exit");
    let len = 4096 * PAGE_SIZE;
    if !in_scenario(name) {
        random_file(&path, len, 71);
    }
    let out = in_child_process(name, WATCHDOG, || {
        let region = map_writable(&path, len / 4, "clock", service);
        for p in 0..len / PAGE_SIZE {
            // SAFETY: inside the region; one thread.
            unsafe {
                region
                    .as_ptr()
                    .add(p * PAGE_SIZE + 11)
                    .write_volatile((p % 251) as u8)
            };
        }
        std::process::exit(0);
    });
    let file = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(out.succeeded(), "{out:?}");
    let missing = (0..len / PAGE_SIZE)
        .filter(|p| file[p * PAGE_SIZE + 11] != (p % 251) as u8)
        .count();
    assert_eq!(missing, 0, "pages whose write is not in the file");
}

#[test]
fn test_process_exit_without_unmap_keeps_every_write_with_handler_threads() {
    exit_keeps_writes(
        "test_process_exit_without_unmap_keeps_every_write_with_handler_threads",
        FaultService::HandlerThreads,
    );
}

#[test]
fn test_process_exit_without_unmap_keeps_every_write_in_the_faulting_thread() {
    exit_keeps_writes(
        "test_process_exit_without_unmap_keeps_every_write_in_the_faulting_thread",
        FaultService::FaultingThread,
    );
}

/// The pager tells its own threads from the application's by thread id,
/// not by name: an application whose threads are all named like the
/// pager's (a program called `pagepilot-something`) is not taken for ended
/// by the watcher that stands in for the last thread's exit.
#[test]
fn test_application_threads_named_like_the_pagers_keep_the_process_alive() {
    let name = "test_application_threads_named_like_the_pagers_keep_the_process_alive";
    let out = in_child_process(name, WATCHDOG, || {
        let region = Region::map_anon(64 * PAGE_SIZE, 16 * PAGE_SIZE, "clock").unwrap();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let _ = std::fs::write(task.unwrap().path().join("comm"), "pagepilot-app");
        }
        // Five of the watcher's periods.
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: inside the region.
        unsafe { region.as_ptr().write_volatile(1) };
        println!("still running");
        region.unmap().unwrap();
    });
    assert!(
        out.succeeded() && out.stdout.contains("still running"),
        "{out:?}"
    );
}
