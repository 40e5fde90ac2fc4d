//! Helpers shared by the pager's integration tests.
#![allow(dead_code)]

pub mod daemon;

pub use pagepilot_testkit::*;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A scratch directory removed on drop (unmounting it first if a test mounted it).
pub struct Scratch {
    pub path: PathBuf,
    mounted: bool,
}

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "pagepilot-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Scratch {
            path,
            mounted: false,
        }
    }

    /// A scratch directory on a fresh tmpfs of `bytes` bytes (needs root).
    pub fn tmpfs(tag: &str, bytes: usize) -> Scratch {
        let mut s = Scratch::new(tag);
        let st = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes}"),
                "pagepilot-test",
            ])
            .arg(&s.path)
            .status()
            .expect("run mount");
        assert!(st.success(), "mount tmpfs (tests need root)");
        s.mounted = true;
        s
    }

    /// Grows the tmpfs to `bytes`.
    pub fn resize(&self, bytes: usize) {
        let st = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(&self.path)
            .status()
            .unwrap();
        assert!(st.success());
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.path)
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Writes `len` pseudo-random bytes to `path`; returns them.
pub fn random_file(path: &Path, len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let data: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// What [`hammer_file_region`] saw before it unmapped the region.
pub struct HammerOutcome {
    /// The region's statistics after the threads finished.
    pub stats: pagepilot_pager::RegionStats,
    /// The memfd's allocated bytes then (frames actually held).
    pub allocated_bytes: u64,
}

/// Writes a random file of `len` bytes, maps it writable under a quarter of
/// its size with `configure`d options, runs `threads` threads doing `ops`
/// random reads and writes checked against a shadow copy, unmaps, and
/// asserts that no read disagreed and that the file holds the shadow's bytes.
pub fn hammer_file_region(
    tag: &str,
    seed: u64,
    len: usize,
    policy: &str,
    threads: usize,
    ops: usize,
    configure: impl FnOnce(pagepilot_pager::RegionOptions) -> pagepilot_pager::RegionOptions,
) -> HammerOutcome {
    use pagepilot_pager::{Backing, Region, RegionOptions};
    let dir = Scratch::new(tag);
    let path = dir.file("data");
    let data = random_file(&path, len, seed);
    let shadow = shadow_of(&data);
    let backing = Backing::File {
        path: path.clone(),
        writable: true,
    };
    let region = Region::map(configure(RegionOptions::new(backing, len / 4, policy))).unwrap();
    let bad = hammer(region.as_ptr(), len, &shadow, threads, ops);
    let stats = region.stats();
    println!("{}", region.stats_json());
    assert_eq!(
        bad, 0,
        "reads that disagreed with the shadow copy: {stats:?}"
    );
    let allocated_bytes = region.allocated_bytes();
    region.unmap().unwrap();
    let back = std::fs::read(&path).unwrap();
    assert_eq!(back.len(), len, "the file's length must not change");
    assert_eq!(
        diff(&back, &image(&shadow, &data)),
        0,
        "bytes differing from the shadow copy"
    );
    HammerOutcome {
        stats,
        allocated_bytes,
    }
}

/// Whether this process is the scenario process of test `test` (the child
/// [`in_child_process`] runs).
pub fn in_scenario(test: &str) -> bool {
    std::env::var("PAGEPILOT_SCENARIO").as_deref() == Ok(test)
}

/// A path in the temp dir that test `test` and its scenario process name
/// alike (the test's name and pid are in it): where the test prepares what
/// the scenario uses, and finds what it leaves.
pub fn shared_path(test: &str, what: &str) -> PathBuf {
    let test_pid = if in_scenario(test) {
        std::os::unix::process::parent_id()
    } else {
        std::process::id()
    };
    std::env::temp_dir().join(format!("pagepilot-{what}-{test}-{test_pid}"))
}

/// Maps `path` writable under `budget` bytes with `policy`, served by `service`.
pub fn map_writable(
    path: &Path,
    budget: usize,
    policy: &str,
    service: pagepilot_pager::FaultService,
) -> pagepilot_pager::Region {
    use pagepilot_pager::{Backing, Region, RegionOptions};
    let backing = Backing::File {
        path: path.into(),
        writable: true,
    };
    Region::map(RegionOptions::new(backing, budget, policy).with_fault_service(service)).unwrap()
}

/// [`in_child_process`], asserting that the child exited with code 0.
pub fn succeeds_in_child_process(test: &str, timeout: std::time::Duration, body: impl FnOnce()) {
    let out = in_child_process(test, timeout, body);
    assert!(out.succeeded(), "{out:?}");
}

/// Pages among `0..n` whose byte 0 in the file at `path` (read with
/// `pread` on a descriptor of its own, not through a region) is the
/// complement of `data`'s: the dirtied ones.
pub fn dirty_in_file(path: &Path, data: &[u8], n: usize) -> usize {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).unwrap();
    (0..n)
        .filter(|&p| {
            let mut byte = [0u8];
            file.read_exact_at(&mut byte, (p * 4096) as u64).unwrap();
            byte[0] == !data[p * 4096]
        })
        .count()
}

/// Waits up to 10 s for `done`, failing the test naming `what` if it never
/// holds: a pool's reclaimer works beside the test (it shrinks a region's
/// budget, writes its victims back, then tells the pool, so wait for the
/// last thing a test reads).
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed().as_secs() < 10, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A FIFO policy program whose ReclaimFrame names no victim: it never
/// gives a frame back when a pool asks, which then takes them by force.
pub const KEEPS_EVERYTHING: &str = "
queue loaded;
event PageFault() {
    if (free == 0) { victim = fifo(loaded); }
    enqueue(loaded, fault);
}
event ReclaimFrame() {
    return;
}
";

/// Maps two pages of a file of one page (`own` in `dir`), shared and
/// writable: the application's own mapping, whose second page raises a
/// SIGBUS of its own (beyond the file's end) until the file grows.
pub fn map_past_end_of_one_page_file(dir: &Scratch) -> (std::fs::File, *mut u8) {
    let path = dir.file("own");
    std::fs::write(&path, vec![7u8; pagepilot_pager::PAGE_SIZE]).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    // SAFETY: a fresh shared mapping of our own file.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * pagepilot_pager::PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    (file, p.cast())
}
