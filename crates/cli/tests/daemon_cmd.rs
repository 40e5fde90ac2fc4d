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
    // --user root: uid 0 (without capabilities) may remove the socket from
    // this directory only root may write; nobody may not (see
    // started_as_root_the_daemon_becomes_nobody_and_clients_still_trust_it).
    let mut daemon = foreground_daemon(&socket, &["--budget", "4M", "--user", "root"]);
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
        // Stays uid 0 so that it removes its socket at exit (below).
        .args(["--user", "root"])
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

/// The `Uid:`, `CapEff:` and `NoNewPrivs:` lines of a process's status,
/// their fields joined by spaces.
fn credentials(pid: u32) -> [String; 3] {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    ["Uid:", "CapEff:", "NoNewPrivs:"].map(|key| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// Started as root (as here), the daemon binds its socket and becomes
/// nobody with no capability; clients still see root at the socket (it was
/// root that listened) and trust it. Stopped, it exits 0 but may not remove
/// its socket from a directory only root may write: it says so, and the
/// next daemon replaces the stale socket.
#[test]
fn started_as_root_the_daemon_becomes_nobody_and_clients_still_trust_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let child = pagepilot()
        .args([
            "daemon",
            "--foreground",
            "--socket",
            s(&socket),
            "--budget",
            "1M",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut daemon = Guard {
        child: Some(child),
        pid: None,
    };
    drop(client(&socket));
    let child = daemon.child.as_mut().unwrap();
    assert_eq!(
        credentials(child.id()),
        ["65534 65534 65534 65534", "0000000000000000", "1"]
    );
    let out = output(&["status", "--socket", s(&socket), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    signal(child.id(), rustix::process::Signal::TERM);
    assert!(wait_exit(child).success());
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    assert!(log.contains("running as nobody (uid 65534"), "{log}");
    assert!(log.contains("stays"), "{log}");
    assert!(socket.exists());
    // The next start replaces it.
    let mut next = foreground_daemon(&socket, &["--budget", "1M"]);
    drop(client(&socket));
    let child = next.child.as_mut().unwrap();
    signal(child.id(), rustix::process::Signal::TERM);
    assert!(wait_exit(child).success());
}

/// A daemon that listens as another user (started as nobody: `--user` is
/// ignored, with no error) is refused by `pagepilot status` before it says
/// anything, naming the user and the variable that trusts it; with
/// `PAGEPILOT_DAEMON_UID` naming that user it is asked.
#[test]
fn status_refuses_a_daemon_of_another_user_unless_told_to_trust_it() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = dir.path().join("d.sock");
    let child = pagepilot()
        .args([
            "daemon",
            "--foreground",
            "--socket",
            s(&socket),
            "--budget",
            "1M",
        ])
        .uid(65534)
        .gid(65534)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _daemon = Guard {
        child: Some(child),
        pid: None,
    };
    drop(connect(&socket));
    let out = pagepilot()
        .args(["status", "--socket", s(&socket)])
        .env_remove("PAGEPILOT_DAEMON_UID")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing the daemon at")
            && err.contains("held by uid 65534")
            && err.contains("PAGEPILOT_DAEMON_UID=65534"),
        "{err}"
    );
    let out = pagepilot()
        .args(["status", "--socket", s(&socket), "--format", "json"])
        .env("PAGEPILOT_DAEMON_UID", "65534")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
