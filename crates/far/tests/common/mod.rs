//! Helpers of the far-memory tests: real Redis servers and clusters
//! (stopped when their guards drop), and the hammer/shadow harness of the
//! pager's integrity tests (crates/pager/tests/common), copied.
#![allow(dead_code)]

pub mod hammer;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use pagepilot_far::{RedisConfig, RedisManager};

/// The repository's scripts/redis-cluster.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster")
}

/// `n` consecutive free loopback ports whose cluster bus ports (+10000)
/// are free too, none handed out before in this process.
pub fn free_ports(n: usize) -> u16 {
    static NEXT: Mutex<usize> = Mutex::new(0);
    let mut next = NEXT.lock().unwrap();
    let start = 21000 + (std::process::id() as usize % 500) * 40;
    loop {
        let base = start + *next;
        *next += n;
        assert!(base + n + 10000 < 65535, "no free ports");
        let free = (base..base + n).all(|p| {
            TcpListener::bind(("127.0.0.1", p as u16)).is_ok()
                && TcpListener::bind(("127.0.0.1", (p + 10000) as u16)).is_ok()
        });
        if free {
            return base as u16;
        }
    }
}

/// A Redis Cluster of the test's own (scripts/redis-cluster), stopped
/// and removed on drop (also when the test panics).
pub struct Cluster {
    dir: PathBuf,
    /// Its seed nodes.
    pub seeds: Vec<String>,
    /// Its first port.
    pub base: u16,
}

impl Cluster {
    /// Three primaries with `replicas` replicas each. The ports are
    /// free when chosen but not reserved: a connection of another process
    /// may take one before a node binds it (they lie in the ephemeral
    /// range), so a start that fails is stopped and tried again on others.
    pub fn start(replicas: usize) -> Cluster {
        Self::start_with_rtt(replicas, Duration::ZERO)
    }

    /// Like `start`, with every node `rtt` away (scripts/redis-cluster
    /// --rtt: a delaying proxy on each node's port, which the nodes
    /// announce); `Duration::ZERO` is no proxy.
    pub fn start_with_rtt(replicas: usize, rtt: Duration) -> Cluster {
        const ATTEMPTS: usize = 3;
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = 3 * (1 + replicas);
        for _ in 0..ATTEMPTS {
            let base = free_ports(n);
            let dir = std::env::temp_dir().join(format!(
                "pagepilot-far-cluster-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let mut cmd = Command::new(script());
            cmd.arg("start")
                .args(["--port", &base.to_string()])
                .args(["--replicas", &replicas.to_string()])
                .args(["--rtt", &format!("{}ns", rtt.as_nanos())]);
            let out = cmd
                .arg(&dir)
                .stderr(Stdio::inherit())
                .output()
                .expect("run scripts/redis-cluster");
            if !out.status.success() {
                let _ = Command::new(script()).arg("stop").arg(&dir).status();
                continue;
            }
            let seeds = String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .split(',')
                .map(String::from)
                .collect();
            return Cluster { dir, seeds, base };
        }
        panic!(
            "scripts/redis-cluster start failed {ATTEMPTS} times (is redis-server installed? \
             scripts/setup installs it)"
        );
    }

    /// The pid of the node on `port`.
    pub fn pid(&self, port: u16) -> i32 {
        std::fs::read_to_string(self.dir.join(format!("{port}.pid")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// SIGKILLs the node on `port`.
    pub fn kill(&self, port: u16) {
        // SAFETY: kill(2) on a pid of a redis-server this cluster started.
        assert_eq!(unsafe { libc::kill(self.pid(port), libc::SIGKILL) }, 0);
    }

    /// `redis-cli` against the first node that answers.
    fn cli(&self, args: &[&str]) -> String {
        for seed in &self.seeds {
            let port = seed.rsplit(':').next().unwrap();
            let out = Command::new("redis-cli")
                .args(["-p", port])
                .args(args)
                .output()
                .unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            if out.status.success()
                && !text.trim().is_empty()
                && !text.contains("Could not connect")
            {
                return text;
            }
        }
        panic!("no node of the cluster answers");
    }

    /// The port of the primary serving `key`'s slot.
    pub fn primary_of(&self, key: &str) -> u16 {
        let slot: u16 = self
            .cli(&["cluster", "keyslot", key])
            .trim()
            .parse()
            .unwrap();
        for line in self.cli(&["cluster", "nodes"]).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if !f[2].contains("master") || f[2].contains("fail") {
                continue;
            }
            for range in &f[8..] {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                    if (a..=b).contains(&slot) {
                        let port = f[1].split('@').next().unwrap().rsplit(':').next().unwrap();
                        return port.parse().unwrap();
                    }
                }
            }
        }
        panic!("no primary serves slot {slot}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
    }
}

/// The shared cluster's seeds: `PAGEPILOT_REDIS_CLUSTER` (scripts/test
/// starts it), else one this process starts and stops when it exits.
pub fn shared_cluster() -> Vec<String> {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS
        .get_or_init(|| {
            if let Ok(s) = std::env::var("PAGEPILOT_REDIS_CLUSTER") {
                return s.split(',').map(String::from).collect();
            }
            static OWN: OnceLock<Mutex<Option<Cluster>>> = OnceLock::new();
            let c = Cluster::start(1);
            let seeds = c.seeds.clone();
            OWN.get_or_init(|| Mutex::new(Some(c)));
            extern "C" fn stop() {
                if let Some(m) = OWN.get() {
                    drop(m.lock().map(|mut c| c.take()));
                }
            }
            // SAFETY: registers a plain function, run at exit (the test
            // harness ends with `exit`).
            unsafe { libc::atexit(stop) };
            seeds
        })
        .clone()
}

/// A manager on the shared cluster.
pub fn cluster_manager() -> RedisManager {
    RedisManager::new(RedisConfig::cluster(&shared_cluster())).unwrap()
}

/// A name no other test or run uses.
pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{tag}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A redis-server of the test's own, killed on drop.
pub struct Server {
    child: Option<Child>,
    /// Its port.
    pub port: u16,
}

impl Server {
    /// A server on a free port, no persistence.
    pub fn start() -> Server {
        Self::start_on(free_ports(1))
    }

    /// A server on `port`, no persistence; waits until it answers.
    pub fn start_on(port: u16) -> Server {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/setup installs it)");
        let s = Server {
            child: Some(child),
            port,
        };
        let t = Instant::now();
        while redis::Client::open(s.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(100)))
            .is_err()
        {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "redis-server on {port} never answered"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        s
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A manager on it that retries for `retry_for`.
    pub fn manager(&self, retry_for: Duration) -> RedisManager {
        RedisManager::new(RedisConfig::single(self.url()).with_retry_for(retry_for)).unwrap()
    }

    /// A plain connection, to look at the keys.
    pub fn raw(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// SIGKILLs it and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `n` pages of pseudo-random bytes.
pub fn random_pages(n: usize, seed: u64) -> Vec<u8> {
    let mut r = hammer::Rng(seed | 1);
    (0..n * 4096).map(|_| r.next() as u8).collect()
}

/// A page-aligned buffer of `n` pages.
pub struct Pages {
    ptr: *mut u8,
    len: usize,
}

impl Pages {
    pub fn new(n: usize) -> Pages {
        let len = n.max(1) * 4096;
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Pages { ptr, len }
    }
    pub fn from(data: &[u8]) -> Pages {
        let p = Pages::new(data.len().div_ceil(4096));
        // SAFETY: `p` holds at least `data.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.ptr, data.len()) };
        p
    }
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: allocated for `len` bytes, zeroed or written since.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, 4096).unwrap();
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

/// Reads pages `first..first+n` of `store` into a fresh buffer.
pub fn read(
    store: &dyn pagepilot_dataspace::PageStore,
    first: usize,
    n: usize,
) -> std::io::Result<Vec<u8>> {
    let buf = Pages::new(n);
    // SAFETY: `buf` is page aligned and holds `n` pages.
    let got = unsafe { store.read(first, n, buf.ptr()) }?;
    Ok(buf.bytes()[..got * 4096].to_vec())
}

/// Writes `data` (whole pages) as pages from `first` of `store`.
pub fn write(
    store: &dyn pagepilot_dataspace::PageStore,
    first: usize,
    data: &[u8],
) -> std::io::Result<()> {
    let buf = Pages::from(data);
    // SAFETY: `buf` is page aligned and holds the pages.
    unsafe { store.write(first, data.len() / 4096, buf.ptr()) }
}
