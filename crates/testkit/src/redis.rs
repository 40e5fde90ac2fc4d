//! Real Redis for the tests of far memory (Rust, C, Python): servers and
//! clusters of a test's own (scripts/redis-cluster), stopped when their
//! guards drop; the shared cluster of a test binary; free ports and
//! unique names. Needs `redis-server` and `redis-cli` (scripts/setup
//! installs them); a test without them fails, it is not skipped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The repository's scripts/redis-cluster.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster")
}

/// `redis-cli OPTS ARGS`'s output (empty if it could not run).
pub fn redis_cli(opts: &[&str], args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(opts)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
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
        while !s.cli(&["PING"]).contains("PONG") {
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

    /// `redis-cli ARGS` against it: its output.
    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(&["-p", &self.port.to_string()], args)
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
