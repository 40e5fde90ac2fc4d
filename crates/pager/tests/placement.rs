//! Where the default fault service's handlers run (docs/pager.md, "Who
//! serves a fault by default"): each kept to its CPU while faults come one
//! at a time, free while windows are read ahead of a stream. Alone in its
//! file: it reads the affinity of every handler thread of the process.

mod common;

use common::*;
use pagepilot_pager::{Backing, Region, RegionOptions, PAGE_SIZE};

/// The CPUs each of the process's per-CPU handler threads may run on.
fn handler_cpus() -> Vec<String> {
    let mut cpus = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("pagepilot-fault") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default();
        cpus.push(allowed.trim().to_string());
    }
    cpus
}

/// Keeps the calling thread to `cpu`.
fn run_on(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET writes inside it
    // for a cpu below CPU_SETSIZE.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(rc, 0, "sched_setaffinity({cpu})");
}

#[test]
fn test_handlers_are_freed_while_a_stream_is_read_ahead_and_kept_to_their_cpu_after() {
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2);
    // Every machine of this project (CI's too) has 2 CPUs: with one, every
    // handler runs on it and there is nothing to tell apart, a failure
    // rather than a pass that tested nothing.
    assert_eq!(
        cpus, 2,
        "this test needs 2 CPUs (every handler would run on the one there is)"
    );
    let pages = 16 * 1024;
    let d = Scratch::new("placement");
    let path = d.file("data");
    let data = random_file(&path, pages * PAGE_SIZE, 8);
    // Single pages around random faults: each random read below is a fault.
    let backing = Backing::File {
        path,
        writable: false,
    };
    let opts = RegionOptions::new(backing, 2 * pages * PAGE_SIZE, "lru").with_fault_around(1);
    let region = Region::map(opts).unwrap();
    let base = region.as_ptr();
    let read = |p: usize| {
        let at = p * PAGE_SIZE + 5;
        // SAFETY: inside the region, mapped for `pages` pages.
        let v = unsafe { base.add(at).read_volatile() };
        assert_eq!(v, data[at], "page {p}");
    };
    let kept = |cpus: &[String]| cpus.iter().filter(|c| !c.contains([',', '-'])).count();
    // A stream: windows are read ahead of it, and the handler serving it is
    // free to run beside it.
    for p in 0..pages / 2 {
        read(p);
    }
    let streaming = handler_cpus();
    assert!(
        kept(&streaming) < streaming.len(),
        "no handler freed while streaming: {streaming:?}"
    );

    // Random faults from each CPU in turn: no window ahead, the handlers
    // serving them are kept to their CPUs again.
    let mut rng = Rng(12);
    for round in 0..200 {
        run_on(round % cpus);
        read(pages / 2 + rng.below(pages / 2));
    }
    let after = handler_cpus();
    assert_eq!(
        kept(&after),
        after.len(),
        "handlers still free after the stream: {after:?}"
    );
    region.unmap().unwrap();
}
