//! Forked workers see one memory (docs/lifecycle.md): after `fork`, a
//! store by the parent or a child to a writable file region is seen by the
//! other at its next load, with no flush or invalidate, as with the
//! kernel's `MAP_SHARED`; once the children are gone the parent pages the
//! region under its policy again. Each scenario runs in its own process
//! (`succeeds_in_child_process`), so that forking never copies the test
//! harness; every byte is checked against a shadow copy.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use pagepilot_pager::{FaultService, Pool, Region, RegionOptions, PAGE_SIZE};

const PAGES: usize = 2048;
const LEN: usize = PAGES * PAGE_SIZE;
const WORKERS: usize = 4;
const WATCHDOG: Duration = Duration::from_secs(60);

/// How each scenario's region is mapped.
#[derive(Clone, Copy, Debug)]
enum Setup {
    Alone(FaultService),
    InPool,
}

fn map(path: &Path, setup: Setup) -> (Option<Pool>, Region) {
    map_with_budget(path, setup, LEN / 4)
}

fn map_with_budget(path: &Path, setup: Setup, budget: usize) -> (Option<Pool>, Region) {
    let backing = pagepilot_pager::Backing::File {
        path: path.into(),
        writable: true,
    };
    match setup {
        Setup::Alone(service) => (None, map_writable(path, budget, "lru", service)),
        Setup::InPool => {
            let pool = Pool::new(budget).unwrap();
            let opts = RegionOptions::new(backing, budget, "lru").with_pool(&pool);
            let region = Region::map(opts).unwrap();
            (Some(pool), region)
        }
    }
}

/// The byte a worker writes at `offset` of the region in round `round`.
fn pattern(offset: usize, round: u8) -> u8 {
    (offset as u8).wrapping_mul(31) ^ (offset / PAGE_SIZE) as u8 ^ round
}

fn bytes(region: &Region) -> &mut [u8] {
    // SAFETY: the region is mapped for its length while `region` lives;
    // processes write disjoint ranges or synchronise through a counter.
    unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len()) }
}

/// The region's word at page `p`: a counter the processes synchronise on.
fn word(region: &Region, p: usize) -> &AtomicU64 {
    // SAFETY: page `p` lies inside the region, 8-byte aligned.
    unsafe { AtomicU64::from_ptr(region.as_ptr().add(p * PAGE_SIZE).cast()) }
}

fn fork_child(child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the scenario process forks from its only test thread; the
    // child runs `child` and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    pid
}

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waits for our own child (the scenario's watchdog bounds it).
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child {pid} status {status:#x}"
    );
}

/// Offsets whose byte differs from `shadow`.
fn differing(region: &Region, shadow: &[u8]) -> Vec<usize> {
    let b = bytes(region);
    (0..shadow.len()).filter(|&i| b[i] != shadow[i]).collect()
}

/// The scenario: the parent has the region resident, four workers
/// each fill a quarter, the parent sees every byte; once they are gone it
/// pages the region again (and the file holds every byte at unmap).
fn workers_fill_what_the_parent_reads(setup: Setup) {
    let dir = Scratch::new("fork-fill");
    let path = dir.file("data");
    let mut shadow = random_file(&path, LEN, 21);
    let (_pool, region) = map(&path, setup);
    assert!(differing(&region, &shadow).is_empty());
    let before = region.stats();
    assert!(before.frames_in_use > 0);
    let quarter = LEN / WORKERS;
    let pids: Vec<_> = (0..WORKERS)
        .map(|w| {
            let region = &region;
            fork_child(move || {
                let b = bytes(region);
                for i in w * quarter..(w + 1) * quarter {
                    b[i] = pattern(i, 1);
                }
                0
            })
        })
        .collect();
    pids.into_iter().for_each(reap);
    for (i, s) in shadow.iter_mut().enumerate() {
        *s = pattern(i, 1);
    }
    let bad = differing(&region, &shadow);
    assert!(bad.is_empty(), "{} bytes differ, first at {}", bad.len(), bad[0]);
    assert_eq!(region.stats().shares, 1, "{:?}", region.stats());
    eventually("the parent pages the region again", || region.stats().resumes == 1);
    assert!(!region.stats().shared);
    let faults = region.stats().missing_faults;
    let bad = differing(&region, &shadow);
    assert!(bad.is_empty(), "{} bytes differ after resuming", bad.len());
    assert!(region.stats().missing_faults > faults, "not paged after resuming");
    region.unmap().unwrap();
    assert_eq!(diff(&std::fs::read(&path).unwrap(), &shadow), 0);
}

/// One side writes pages in order, publishing a counter after each; the
/// other, polling the counter, must find every page up to it written.
fn reader_sees_writer(parent_writes: bool, setup: Setup) {
    const ROUNDS: usize = PAGES - 1;
    let dir = Scratch::new("fork-stream");
    let path = dir.file("data");
    let data = random_file(&path, LEN, 22);
    let (_pool, region) = map(&path, setup);
    // Resident, some of it dirty, before the fork.
    bytes(&region)[PAGE_SIZE..2 * PAGE_SIZE].fill(7);
    word(&region, 0).store(0, Ordering::SeqCst);
    let write = |region: &Region| {
        let b = bytes(region);
        for p in 1..=ROUNDS {
            b[p * PAGE_SIZE + 8..(p + 1) * PAGE_SIZE].fill(pattern(p, 2));
            word(region, 0).store(p as u64, Ordering::Release);
        }
    };
    let read = |region: &Region| -> usize {
        let b = bytes(region);
        let mut checked = 0;
        let start = std::time::Instant::now();
        while checked < ROUNDS {
            let upto = word(region, 0).load(Ordering::Acquire) as usize;
            for p in checked + 1..=upto {
                let page = &b[p * PAGE_SIZE + 8..(p + 1) * PAGE_SIZE];
                if page.iter().any(|&x| x != pattern(p, 2)) {
                    return p;
                }
            }
            checked = upto;
            if start.elapsed() > WATCHDOG / 2 {
                return usize::MAX;
            }
        }
        0
    };
    let region_ref = &region;
    if parent_writes {
        let pid = fork_child(move || read(region_ref) as i32);
        write(&region);
        reap(pid);
    } else {
        let pid = fork_child(move || {
            write(region_ref);
            0
        });
        assert_eq!(read(&region), 0, "a page behind the counter was stale");
        reap(pid);
    }
    drop(data);
    region.unmap().unwrap();
}

/// A child forks a grandchild, which writes; the parent sees it; a child
/// that outlives the parent is `fork.rs`'s.
fn grandchild_writes_reach_the_parent(setup: Setup) {
    let dir = Scratch::new("fork-grand");
    let path = dir.file("data");
    let mut shadow = random_file(&path, LEN, 23);
    // Every page resident: a stale copy would show.
    let (_pool, region) = map_with_budget(&path, setup, LEN);
    assert!(differing(&region, &shadow).is_empty());
    let region_ref = &region;
    let pid = fork_child(move || {
        let grandchild = fork_child(move || {
            let b = bytes(region_ref);
            for (i, x) in b.iter_mut().enumerate().step_by(3) {
                *x = pattern(i, 3);
            }
            0
        });
        reap(grandchild);
        0
    });
    reap(pid);
    for i in (0..LEN).step_by(3) {
        shadow[i] = pattern(i, 3);
    }
    let bad = differing(&region, &shadow);
    assert!(bad.is_empty(), "{} bytes differ, first at {}", bad.len(), bad[0]);
    region.unmap().unwrap();
    assert_eq!(diff(&std::fs::read(&path).unwrap(), &shadow), 0);
}

/// A handle opened as a second mapping (what an unpickled region in a
/// spawned process is): each side sees the other's stores at once, and the
/// region is paged again once the mapping is dropped.
fn handle_mapping_sees_the_region(setup: Setup) {
    let dir = Scratch::new("fork-handle");
    let path = dir.file("data");
    let mut shadow = random_file(&path, LEN, 24);
    let (_pool, region) = map_with_budget(&path, setup, LEN);
    // Dirty, unflushed pages in the region before the handle is made.
    for i in (0..LEN / 2).step_by(7) {
        bytes(&region)[i] = pattern(i, 4);
        shadow[i] = pattern(i, 4);
    }
    let handle = region.share_handle().unwrap();
    assert!(region.stats().shared);
    let other = handle.open().unwrap();
    // SAFETY: the other mapping is `other.len()` bytes while `other` lives.
    let theirs = unsafe { std::slice::from_raw_parts_mut(other.as_ptr(), other.len()) };
    let bad: Vec<usize> = (0..LEN).filter(|&i| theirs[i] != shadow[i]).collect();
    assert!(bad.is_empty(), "{} bytes differ in the other mapping", bad.len());
    for i in (LEN / 2..LEN).step_by(5) {
        theirs[i] = pattern(i, 5);
        shadow[i] = pattern(i, 5);
    }
    let bad = differing(&region, &shadow);
    assert!(bad.is_empty(), "{} bytes differ in the region", bad.len());
    assert_eq!(region.stats().resumes, 0);
    drop(other);
    eventually("the region is paged again", || region.stats().resumes == 1);
    let bad = differing(&region, &shadow);
    assert!(bad.is_empty(), "{} bytes differ after resuming", bad.len());
    region.unmap().unwrap();
    assert_eq!(diff(&std::fs::read(&path).unwrap(), &shadow), 0);
}

macro_rules! scenarios {
    ($($name:ident: $body:expr;)*) => {$(
        #[test]
        fn $name() {
            succeeds_in_child_process(stringify!($name), WATCHDOG, || $body);
        }
    )*};
}

scenarios! {
    test_workers_fill_what_the_parent_reads_with_handler_threads:
        workers_fill_what_the_parent_reads(Setup::Alone(FaultService::HandlerThreads));
    test_workers_fill_what_the_parent_reads_in_the_faulting_thread:
        workers_fill_what_the_parent_reads(Setup::Alone(FaultService::FaultingThread));
    test_workers_fill_what_the_parent_reads_with_per_cpu_handlers:
        workers_fill_what_the_parent_reads(Setup::Alone(FaultService::HandlerPerCpu));
    test_workers_fill_what_the_parent_reads_in_a_pool:
        workers_fill_what_the_parent_reads(Setup::InPool);
    test_parent_reads_while_a_child_writes_with_handler_threads:
        reader_sees_writer(false, Setup::Alone(FaultService::HandlerThreads));
    test_parent_reads_while_a_child_writes_in_the_faulting_thread:
        reader_sees_writer(false, Setup::Alone(FaultService::FaultingThread));
    test_child_reads_while_the_parent_writes_with_handler_threads:
        reader_sees_writer(true, Setup::Alone(FaultService::HandlerThreads));
    test_child_reads_while_the_parent_writes_in_a_pool:
        reader_sees_writer(true, Setup::InPool);
    test_grandchild_writes_reach_the_parent_with_handler_threads:
        grandchild_writes_reach_the_parent(Setup::Alone(FaultService::HandlerThreads));
    test_handle_mapping_and_region_see_each_other_with_handler_threads:
        handle_mapping_sees_the_region(Setup::Alone(FaultService::HandlerThreads));
    test_handle_mapping_and_region_see_each_other_in_the_faulting_thread:
        handle_mapping_sees_the_region(Setup::Alone(FaultService::FaultingThread));
    test_grandchild_writes_reach_the_parent_in_the_faulting_thread:
        grandchild_writes_reach_the_parent(Setup::Alone(FaultService::FaultingThread));
}
