//! A daemon for one test, and its clients: spawned processes in a role.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pagepilot_pager::Client;
use pagepilot_protocol::{ClientStatus, StatusReply};

/// A `pagepilot daemon` in the foreground on a socket of its own, killed
/// when dropped (its log printed if the test failed).
pub struct Daemon {
    child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
}

impl Daemon {
    /// Starts a daemon with `config` (TOML) and waits until it answers.
    /// These tests' clients are all this test's user: `config` is given a
    /// default that lets one user hold the machine ([`one_user`]).
    pub fn start(name: &str, config: &str) -> Daemon {
        let config = &one_user(config);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("daemon-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config_path = dir.join("daemon.toml");
        std::fs::write(&config_path, config).unwrap();
        let socket = dir.join("pagepilot.sock");
        let log = std::fs::File::create(dir.join("daemon.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_pagepilot"))
            .arg("daemon")
            .arg("--foreground")
            .arg("--socket")
            .arg(&socket)
            .arg("--config")
            .arg(&config_path)
            .stderr(log)
            .spawn()
            .expect("start pagepilot daemon");
        let daemon = Daemon { child, dir, socket };
        eventually(Duration::from_secs(10), "the daemon listens", || {
            UnixStream::connect(&daemon.socket).is_ok()
        });
        daemon
    }

    /// What the daemon says it holds (asked as a client of its own, left
    /// out of the list).
    pub fn status(&self) -> StatusReply {
        let client = Client::open(&self.socket).expect("connect for status");
        let mut status = client.status().expect("status");
        status.clients.retain(|c| c.pid != std::process::id());
        status
    }

    /// The client of process `pid`, if the daemon has it.
    pub fn client_of(&self, pid: u32) -> Option<ClientStatus> {
        self.status().clients.into_iter().find(|c| c.pid == pid)
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// The daemon's resident memory, KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Stops the daemon with SIGTERM and waits for it: its exit code.
    pub fn stop(&mut self) -> Option<i32> {
        // SAFETY: kill has no memory effects; the pid is our child's.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().ok().and_then(|s| s.code())
    }

    /// Whether the daemon process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}--- end ---", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client process in a role, talking lines over its stdin and stdout;
/// killed when dropped.
pub struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Process {
    /// Starts this binary in `role` with `args`, joined to `daemon`.
    pub fn spawn(daemon: &Daemon, role: &str, args: &[String]) -> Process {
        Process::start(
            Command::new(std::env::current_exe().unwrap()),
            daemon,
            role,
            args,
        )
    }

    /// As [`Process::spawn`], as the user `nobody` (uid 65534) in no group.
    pub fn spawn_as_nobody(daemon: &Daemon, role: &str, args: &[String]) -> Process {
        Process::spawn_as(daemon, 65534, role, args)
    }

    /// As [`Process::spawn`], as user `uid` (group `uid`) in no other
    /// group: clients of different users, each with its own quotas.
    pub fn spawn_as(daemon: &Daemon, uid: u32, role: &str, args: &[String]) -> Process {
        let mut setpriv = Command::new("setpriv");
        setpriv
            .args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
            ])
            .arg(std::env::current_exe().unwrap());
        Process::start(setpriv, daemon, role, args)
    }

    fn start(mut command: Command, daemon: &Daemon, role: &str, args: &[String]) -> Process {
        let mut child = command
            .args(args)
            .env(super::roles::ROLE_ENV, role)
            .env(pagepilot_pager::DAEMON_ENV, &daemon.socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn a client");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Process {
            child,
            stdin,
            lines,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line the client prints, within `timeout`.
    pub fn line(&self, timeout: Duration) -> String {
        self.lines
            .recv_timeout(timeout)
            .unwrap_or_else(|e| panic!("client {}: no line within {timeout:?}: {e}", self.pid()))
    }

    /// Waits for a line starting with `prefix` (others are skipped).
    pub fn expect(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.line(left);
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim().to_string();
            }
            if line.starts_with("error") {
                panic!("client {}: {line}", self.pid());
            }
        }
    }

    /// Every line printed so far, and until the process ends.
    pub fn drain(&self, timeout: Duration) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(timeout) {
            out.push(l);
        }
        out
    }

    /// Sends one command line.
    pub fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to the client");
        stdin.flush().unwrap();
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill has no memory effects; the pid is our child's.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.pid());
    }

    /// Its exit code if it has ended (`Some(-1)` for a signal).
    pub fn try_exit(&mut self) -> Option<i32> {
        let status = self.child.try_wait().unwrap()?;
        Some(status.code().unwrap_or(-1))
    }

    /// Waits for the process to end, within `timeout`: its exit code.
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "client {} still running after {timeout:?}",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `ready` holds, at most `limit`, checking every 10 ms.
pub fn eventually(limit: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `config` with its `[default]` quotas raised, where it leaves them out,
/// to what one user owning the machine may hold: every frame, any fault
/// rate, a whole processor of reserves, 1,024 connections. The daemon's
/// own defaults keep half of each for other users; these tests run every
/// client as one user.
pub fn one_user(config: &str) -> String {
    let budget: u64 = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("budget_frames = "))
        .and_then(|v| v.trim().parse().ok())
        .expect("budget_frames in the test's config");
    let generous = [
        ("frames", budget.to_string()),
        ("fault_rate", (1u64 << 32).to_string()),
        ("cpu_reserve_ppm", "1000000".into()),
        ("connections", "1024".into()),
        ("descriptors", "65536".into()),
    ];
    let (before, default) = match config.find("[default]") {
        Some(at) => (&config[..at], &config[at + "[default]".len()..]),
        None => (config, ""),
    };
    let section_end = default.find("\n[").map_or(default.len(), |i| i + 1);
    let (section, after) = default.split_at(section_end);
    let mut out = format!("{before}\n[default]\n");
    for (key, value) in generous {
        let given = section
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{key} ")));
        if !given {
            out += &format!("{key} = {value}\n");
        }
    }
    out + section + after
}
