//! A budget larger than the memory cgroup leaves is cut to fit, and says
//! so, in a real cgroup v1 memory cgroup of 48 MiB: a region alone asked
//! for 256 MiB of frames writes 128 MiB of anonymous memory (evicted to its
//! swap file) and the process lives; frames cannot be reclaimed, so a
//! budget kept at 256 MiB would get it killed by the cgroup's OOM killer.
//! A pool is cut alike. Each runs in a child process that moves itself
//! into a cgroup of its own, which the test removes afterwards.

use std::path::PathBuf;
use std::time::Duration;

use pagepilot_pager::{Backing, Pool, Region, RegionOptions};
use pagepilot_testkit::in_child_process;

const MIB: usize = 1 << 20;
const LIMIT: usize = 48 * MIB;
const V1: &str = "/sys/fs/cgroup/memory";

/// The cgroup of the child whose parent (the test) is `test_pid`.
fn cgroup_dir(test_pid: u32, tag: &str) -> PathBuf {
    PathBuf::from(V1).join(format!("pagepilot-fit-{tag}-{test_pid}"))
}

/// In the child: a cgroup of `LIMIT` bytes, this process moved into it.
fn enter_cgroup(tag: &str) {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() } as u32;
    let dir = cgroup_dir(parent, tag);
    std::fs::create_dir_all(&dir).expect("create the memory cgroup");
    std::fs::write(dir.join("memory.limit_in_bytes"), LIMIT.to_string()).unwrap();
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).unwrap();
}

/// In the test: the child's cgroup removed (once it has exited).
fn remove_cgroup(tag: &str) {
    let dir = cgroup_dir(std::process::id(), tag);
    for _ in 0..50 {
        if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The number the child printed as `name=N` (the test harness may print
/// its own text before it on the line).
fn field(out: &str, name: &str) -> usize {
    let key = format!("{name}=");
    out.lines()
        .find_map(|l| l.split(&key).nth(1)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {out:?}"))
}

#[test]
fn test_a_region_asking_more_than_its_cgroup_leaves_is_cut_to_fit_and_lives() {
    const TEST: &str = "test_a_region_asking_more_than_its_cgroup_leaves_is_cut_to_fit_and_lives";
    assert!(
        std::path::Path::new(V1)
            .join("memory.limit_in_bytes")
            .exists(),
        "the cgroup v1 memory controller is not mounted at {V1}"
    );
    let out = in_child_process(TEST, Duration::from_secs(120), || {
        enter_cgroup("region");
        let len = 128 * MIB;
        let region = Region::map(RegionOptions::new(
            Backing::Anonymous { len },
            256 * MIB,
            "clock",
        ))
        .unwrap();
        for off in (0..len).step_by(4096) {
            // SAFETY: inside the region, which stays mapped until unmap below.
            unsafe { region.as_ptr().add(off).write_volatile((off >> 12) as u8) };
        }
        let stats = region.stats();
        let cut = stats.budget_cut.expect("the budget was not cut");
        println!("asked={}", cut.asked_frames);
        println!("given={}", cut.given_frames);
        println!("budget={}", stats.budget_frames);
        println!("limit={}", cut.cgroup.limit);
        region.unmap().unwrap();
    });
    remove_cgroup("region");
    assert!(
        out.succeeded(),
        "the child did not live (OOM killed: signal {:?}): {out:?}",
        out.signal()
    );
    // The budget asked, as far as the region has pages.
    assert_eq!(field(&out.stdout, "asked"), 128 * MIB / 4096);
    assert_eq!(field(&out.stdout, "limit"), LIMIT);
    let given = field(&out.stdout, "given");
    assert_eq!(field(&out.stdout, "budget"), given);
    // Within the limit, less its eighth of headroom.
    assert!(given * 4096 <= LIMIT - LIMIT / 8, "{given} frames: {out:?}");
    assert!(
        given * 4096 >= LIMIT / 2,
        "cut too far: {given} frames: {out:?}"
    );
}

#[test]
fn test_a_pool_asking_more_than_its_cgroup_leaves_is_cut_to_fit() {
    const TEST: &str = "test_a_pool_asking_more_than_its_cgroup_leaves_is_cut_to_fit";
    let out = in_child_process(TEST, Duration::from_secs(60), || {
        enter_cgroup("pool");
        let pool = Pool::new(1 << 30).unwrap();
        let stats = pool.stats();
        let cut = stats.budget_cut.expect("the pool's budget was not cut");
        println!("asked={}", cut.asked_frames);
        println!("total={}", stats.total_frames);
        // A region alone beside it: only what the pool did not take.
        let region = Region::map(RegionOptions::new(
            Backing::Anonymous { len: 64 * MIB },
            64 * MIB,
            "clock",
        ))
        .unwrap();
        println!("beside={}", region.stats().budget_frames);
        region.unmap().unwrap();
    });
    remove_cgroup("pool");
    assert!(out.succeeded(), "{out:?}");
    assert_eq!(field(&out.stdout, "asked"), (1 << 30) / 4096);
    let total = field(&out.stdout, "total");
    assert!(total * 4096 <= LIMIT - LIMIT / 8, "{total} frames: {out:?}");
    // The pool's promise leaves the region next to nothing: one frame.
    assert_eq!(field(&out.stdout, "beside"), 1, "{out:?}");
}
