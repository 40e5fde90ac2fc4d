//! What the integrity tests of the pager and of far memory share: a
//! deterministic generator, threads hammering a region with random reads
//! and writes checked against a shadow copy, and a test body run in a
//! child process (for signals and exits), and the userfaultfd device
//! granted to a group (`device`), where the tests of `pagepilot run` find
//! it (`run`), where a hung program stands (`hang`), and real Redis
//! servers and clusters for the far-memory tests (`redis`). Test support
//! only.

use std::sync::atomic::{AtomicU64, Ordering};

pub mod device;
pub mod hang;
pub mod redis;
pub mod run;

/// xorshift64*: a small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    #[allow(clippy::should_implement_trait)] // an endless generator, not an iterator
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
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

/// The `main` of a test binary with a harness of its own (`harness =
/// false`) whose processes play roles: with `role_env` in the environment
/// the binary plays that role (`play`, its exit code the process's);
/// without, it runs `tests` (each name with its body), those whose names
/// contain one of the arguments when any are given, and exits 1 if one
/// failed. Each test runs on the main thread, which a role that must be
/// its process's only thread needs.
pub fn role_harness(role_env: &str, play: fn(&str, &[String]) -> i32, tests: &[(&str, fn())]) {
    if let Ok(role) = std::env::var(role_env) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        std::process::exit(play(&role, &args));
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        eprintln!("test {name} ...");
        let started = std::time::Instant::now();
        match std::panic::catch_unwind(test) {
            Ok(()) => eprintln!("test {name} ... ok ({:.1?})", started.elapsed()),
            Err(_) => {
                eprintln!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    eprintln!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        ran - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        eprintln!("failures: {failed:?}");
        std::process::exit(1);
    }
}
