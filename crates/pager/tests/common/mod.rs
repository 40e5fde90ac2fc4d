//! Helpers shared by the pager's integration tests.
#![allow(dead_code)]

pub mod daemon;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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

/// xorshift64*: a small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Writes `len` pseudo-random bytes to `path`; returns them.
pub fn random_file(path: &Path, len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let data: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// Threads doing random reads and writes of 8-byte words over `base..base+len`,
/// checked against `shadow` (one word per slot). Thread `t` of `threads` owns
/// the words `w` with `w % threads == t`, so every page is shared by all
/// threads while each word has one writer. Accesses come in bursts within a
/// random page so that the test stays fast while faulting all the time.
/// Returns the number of mismatches seen by reads.
pub fn hammer(base: *mut u8, len: usize, shadow: &[AtomicU64], threads: usize, ops: usize) -> u64 {
    hammer_with(base, len, shadow, threads, ops, (64, 256))
}

/// [`hammer`] with bursts of `burst.0..burst.1` accesses per page visit.
pub fn hammer_with(
    base: *mut u8,
    len: usize,
    shadow: &[AtomicU64],
    threads: usize,
    ops: usize,
    burst: (usize, usize),
) -> u64 {
    let words = len / 8;
    assert_eq!(shadow.len(), words);
    let base = base as usize;
    let mismatches = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..threads {
            let mismatches = &mismatches;
            sc.spawn(move || {
                let mut r = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) * 0x1234_5678_9ABC));
                let per_page = 4096 / 8;
                let pages = words.div_ceil(per_page);
                let mut done = 0;
                while done < ops / threads {
                    let page = r.below(pages);
                    let burst = burst.0 + r.below(burst.1 - burst.0);
                    for _ in 0..burst {
                        let mut w = page * per_page + r.below(per_page);
                        w = w - w % threads + t;
                        if w >= words {
                            continue;
                        }
                        // SAFETY: `w < words`, inside the mapped region; the
                        // word is 8-aligned and only this thread writes it.
                        let cell = unsafe { &*((base + w * 8) as *const AtomicU64) };
                        if r.next().is_multiple_of(3) {
                            let v = r.next();
                            cell.store(v, Ordering::Relaxed);
                            shadow[w].store(v, Ordering::Relaxed);
                        } else {
                            let got = cell.load(Ordering::Relaxed);
                            let want = shadow[w].load(Ordering::Relaxed);
                            if got != want {
                                let n = mismatches.fetch_add(1, Ordering::Relaxed);
                                if n < 5 && std::env::var("PP_DEBUG").is_ok() {
                                    let again = cell.load(Ordering::Relaxed);
                                    eprintln!("mismatch t{t} word {w} page {} got {got:x} want {want:x} again {again:x}", w / 512);
                                }
                            }
                        }
                        done += 1;
                    }
                }
            });
        }
    });
    mismatches.into_inner()
}

/// The shadow of `data` as words.
pub fn shadow_of(data: &[u8]) -> Vec<AtomicU64> {
    data.chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect()
}

/// Bytes of `shadow` followed by the tail of `data` beyond the last word.
pub fn image(shadow: &[AtomicU64], data: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = shadow
        .iter()
        .flat_map(|w| w.load(Ordering::Relaxed).to_ne_bytes())
        .collect();
    out.extend_from_slice(&data[out.len()..]);
    out
}

/// Count of differing bytes.
pub fn diff(a: &[u8], b: &[u8]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(x, y)| x != y).count()
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

/// How a test body run by [`in_child_process`] ended.
#[derive(Debug)]
pub struct ChildOutcome {
    /// The child's exit status (`None` if the watchdog killed it).
    pub status: Option<std::process::ExitStatus>,
    /// What the child printed on standard output.
    pub stdout: String,
    /// What the child printed on standard error.
    pub stderr: String,
}

impl ChildOutcome {
    /// The signal that ended the child, if one did.
    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.status.and_then(|s| s.signal())
    }
    /// Whether the child exited normally with code 0.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
    /// Whether the watchdog had to kill it (a hang).
    pub fn hung(&self) -> bool {
        self.status.is_none()
    }
}

/// Runs `body` in a separate process: the test binary run again with only
/// the test `test` selected and `PAGEPILOT_SCENARIO=test` in its environment.
/// Call it first thing in that test: in the child it runs `body` and exits
/// with code 0 (`std::process::exit`: atexit handlers run); in the test it
/// spawns the child, kills it if it runs past `timeout`, and returns how it
/// ended. Processes are the point where a signal is expected to end the
/// program, or where exit itself is under test.
pub fn in_child_process(
    test: &str,
    timeout: std::time::Duration,
    body: impl FnOnce(),
) -> ChildOutcome {
    in_child_process_under(test, timeout, &[], body)
}

/// [`in_child_process`], the child started through `launcher` (a command
/// and its arguments that execute the rest: `setpriv --reuid=...` runs the
/// child as another user).
pub fn in_child_process_under(
    test: &str,
    timeout: std::time::Duration,
    launcher: &[&str],
    body: impl FnOnce(),
) -> ChildOutcome {
    use std::io::Read;
    if std::env::var("PAGEPILOT_SCENARIO").as_deref() == Ok(test) {
        body();
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(0);
    }
    let exe = std::env::current_exe().unwrap();
    let mut command = match launcher.split_first() {
        Some((program, args)) => {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    let mut child = command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("PAGEPILOT_SCENARIO", test)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the test binary");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    ChildOutcome {
        status,
        stdout: reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
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
