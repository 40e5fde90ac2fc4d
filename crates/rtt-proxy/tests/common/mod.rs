//! Helpers of the proxy's tests: a redis-server and proxies of the test's
//! own (killed or stopped on drop), and RESP spoken by hand.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The proxy binary cargo built for these tests.
pub const PROXY: &str = env!("CARGO_BIN_EXE_pagepilot-rtt-proxy");

/// A loopback port free when asked.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A connection to `port` (TCP_NODELAY), retried for up to 10 s.
pub fn connect(port: u16) -> TcpStream {
    let t = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_nodelay(true).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                return s;
            }
            Err(e) if t.elapsed() > Duration::from_secs(10) => panic!("connect {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Sends PING and waits for its PONG.
pub fn ping(s: &mut TcpStream) {
    s.write_all(b"PING\r\n").unwrap();
    let mut reply = [0u8; 7];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
}

/// A redis-server of the test's own, killed on drop.
pub struct Redis {
    child: Child,
    /// Its port.
    pub port: u16,
}

impl Redis {
    /// Starts one on a free port and waits until it answers.
    pub fn start() -> Redis {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is missing (scripts/setup installs it)");
        let r = Redis { child, port };
        ping(&mut connect(port));
        r
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A proxy of the test's own, SIGKILLed on drop unless stopped.
pub struct Proxy {
    child: Option<Child>,
    /// Its pid file (written once it listens).
    pub pidfile: PathBuf,
    _dir: tempfile::TempDir,
    /// The port it listens on.
    pub port: u16,
}

impl Proxy {
    /// A proxy in front of `upstream` adding `rtt` (as the command line
    /// writes it); waits until it listens.
    pub fn start(upstream: u16, rtt: &str) -> Proxy {
        // A free port may be taken by another connection before the proxy
        // binds it (it lies in the ephemeral range): tried again on another.
        const ATTEMPTS: usize = 3;
        for _ in 0..ATTEMPTS {
            if let Some(p) = Self::try_start(upstream, rtt) {
                return p;
            }
        }
        panic!("the proxy exited at start {ATTEMPTS} times");
    }

    /// One attempt of `start`, on a port free when chosen: `None` if the
    /// proxy exited at start (its port taken meanwhile).
    fn try_start(upstream: u16, rtt: &str) -> Option<Proxy> {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("proxy.pid");
        let port = free_port();
        let child = Command::new(PROXY)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--upstream", &format!("127.0.0.1:{upstream}")])
            .args(["--rtt", rtt])
            .arg("--pidfile")
            .arg(&pidfile)
            .spawn()
            .unwrap();
        let mut p = Proxy {
            child: Some(child),
            pidfile,
            _dir: dir,
            port,
        };
        let t = Instant::now();
        while !p.pidfile.exists() {
            if let Some(status) = p.child.as_mut().unwrap().try_wait().unwrap() {
                eprintln!("the proxy on port {port} exited at start: {status}");
                p.child = None;
                return None;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the proxy never listened"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(p)
    }

    /// Sends SIGTERM and waits (10 s at most) for it to exit.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) of our own child, not yet waited for.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let t = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "SIGTERM did not end the proxy"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The median round trip of `n` PINGs on `s`.
pub fn median_ping(s: &mut TcpStream, n: usize) -> Duration {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            ping(s);
            t.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}
