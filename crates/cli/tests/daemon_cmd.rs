//! `pagepilot daemon` and `pagepilot status` end to end: the real binary,
//! a real socket, clients over `pagepilot_transport`. Every wait is
//! bounded and every daemon started is stopped when a test ends.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pagepilot_protocol::{ErrorCode, Message, RegionId, RegisterRegion};
use pagepilot_transport::Connection;

const WAIT: Duration = Duration::from_secs(10);

fn pagepilot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagepilot"))
}

fn output(args: &[&str]) -> Output {
    pagepilot().args(args).output().unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A process killed and reaped when dropped (by pid for a detached daemon).
struct Guard {
    child: Option<Child>,
    pid: Option<u32>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(pid) = self.pid {
            signal(pid, rustix::process::Signal::KILL);
        }
    }
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Waits until a client can connect at `socket`.
fn connect(socket: &Path) -> Connection {
    let start = Instant::now();
    loop {
        if let Ok(c) = Connection::connect(socket) {
            return c;
        }
        assert!(start.elapsed() < WAIT, "the daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client that said Hello.
fn client(socket: &Path) -> Connection {
    let mut c = connect(socket);
    c.send(
        &Message::Hello {
            versions: vec![1],
            pid: None,
        },
        &[],
    )
    .unwrap();
    let m = c.receive_within(Some(WAIT)).unwrap().unwrap().message;
    assert!(matches!(m, Message::Welcome { .. }), "{m:?}");
    c
}

fn foreground_daemon(socket: &Path, extra: &[&str]) -> Guard {
    let child = pagepilot()
        .args(["daemon", "--foreground", "--socket", s(socket)])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Guard {
        child: Some(child),
        pid: None,
    }
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < WAIT, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn status_as_json_lists_the_clients_and_sigterm_stops_the_daemon_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let mut daemon = foreground_daemon(&socket, &["--budget", "4M"]);
    let mut c = client(&socket);
    let register = RegisterRegion {
        region: RegionId(3),
        min_frames: 10,
        budget_frames: 20,
        ..RegisterRegion::default()
    };
    c.send(&Message::RegisterRegion(register), &[]).unwrap();
    let m = c.receive_within(Some(WAIT)).unwrap().unwrap().message;
    assert!(matches!(m, Message::Registered { .. }), "{m:?}");

    let out = output(&["status", "--socket", s(&socket), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total_frames"], 1024);
    assert_eq!(v["free_frames"], 1014);
    // The status command's own connection is left out.
    let clients = v["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{v}");
    assert_eq!(clients[0]["pid"], std::process::id());
    let r = &clients[0]["regions"][0];
    assert_eq!(
        (&r["region"], &r["min_frames"], &r["held_frames"]),
        (&3.into(), &10.into(), &10.into())
    );

    let out = output(&["status", "--socket", s(&socket)]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1024 total, 10 held, 1014 free; 1 clients"),
        "{text}"
    );
    assert!(
        text.contains("minFrame") && text.contains("faults/s"),
        "{text}"
    );

    let child = daemon.child.as_mut().unwrap();
    signal(child.id(), rustix::process::Signal::TERM);
    let m = c.receive_within(Some(WAIT)).unwrap().unwrap().message;
    assert!(
        matches!(&m, Message::Error(e) if e.code == ErrorCode::ShuttingDown),
        "{m:?}"
    );
    assert!(wait_exit(child).success());
    assert!(!socket.exists(), "the socket was left behind");
}

#[test]
fn status_watch_refreshes_until_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let _daemon = foreground_daemon(&socket, &["--budget", "1M"]);
    drop(connect(&socket));
    let child = pagepilot()
        .args([
            "status",
            "--socket",
            s(&socket),
            "--format",
            "json",
            "--watch",
            "0.1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = Guard {
        child: Some(child),
        pid: None,
    };
    let stdout = watch.child.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    for _ in 0..3 {
        let line = rx.recv_timeout(WAIT).expect("no refresh");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["total_frames"], 256);
    }
}

#[test]
fn without_foreground_the_daemon_detaches_once_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    // The parent says where the daemon listens and its pid, then exits.
    let mut parent = pagepilot()
        .args(["daemon", "--socket", s(&socket), "--budget", "1M"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_exit(&mut parent).success());
    // Read on a thread: a daemon holding the pipe must fail the test, not hang it.
    let mut stdout = parent.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut said = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut said);
        let _ = tx.send(said);
    });
    let said = rx
        .recv_timeout(WAIT)
        .expect("the detached daemon kept the parent's stdout open");
    let pid: u32 = said
        .trim()
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once("(pid "))
        .and_then(|(_, pid)| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {said:?}"));
    let _guard = Guard {
        child: None,
        pid: Some(pid),
    };
    // Listening already when the parent exits: no wait needed.
    drop(Connection::connect(&socket).expect("not listening when the parent returned"));
    let out = output(&["status", "--socket", s(&socket), "--format", "json"]);
    assert!(out.status.success());
    signal(pid, rustix::process::Signal::TERM);
    let start = Instant::now();
    while socket.exists() {
        assert!(start.elapsed() < WAIT, "the detached daemon did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn status_without_a_daemon_names_the_socket_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody.sock");
    let out = output(&["status", "--socket", s(&socket)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(s(&socket)) && err.contains("no daemon answers"),
        "{err}"
    );
}

#[test]
fn a_bad_config_names_the_file_and_line_and_the_daemon_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let config: PathBuf = dir.path().join("daemon.toml");
    std::fs::write(
        &config,
        "[machine]\nbudget_frames = 100\n[uid.1000]\nframes = 101\n",
    )
    .unwrap();
    let out = output(&[
        "daemon",
        "--foreground",
        "--socket",
        s(&socket),
        "--config",
        s(&config),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(s(&config)) && err.contains("line 4"), "{err}");
    assert!(!socket.exists());
    // --budget replaces the file's budget: the same file is fine with more.
    let mut daemon = foreground_daemon(&socket, &["--config", s(&config), "--budget", "1M"]);
    drop(client(&socket));
    let out = output(&["status", "--socket", s(&socket), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total_frames"], 256);
    let child = daemon.child.as_mut().unwrap();
    signal(child.id(), rustix::process::Signal::TERM);
    assert!(wait_exit(child).success());
}

#[test]
fn a_second_daemon_on_the_same_socket_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let _first = foreground_daemon(&socket, &["--budget", "1M"]);
    drop(connect(&socket));
    let out = output(&[
        "daemon",
        "--foreground",
        "--socket",
        s(&socket),
        "--budget",
        "1M",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another daemon is listening"), "{err}");
    assert!(socket.exists(), "the first daemon's socket was removed");
}
