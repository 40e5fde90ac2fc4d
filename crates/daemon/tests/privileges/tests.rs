//! The parent's side: starts a role, reads what it reports, checks it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pagepilot_daemon::server::{Server, ServerOptions};
use pagepilot_daemon::Config;
use pagepilot_protocol::Message;
use pagepilot_transport::Connection;

use crate::roles::ROLE_ENV;

/// The longest a role may take.
const WAIT: Duration = Duration::from_secs(20);

/// Every test, by name.
pub const ALL: &[(&str, fn())] = &[
    (
        "dropping_to_nobody_leaves_no_capability_and_no_way_back",
        dropping_to_nobody_leaves_no_capability_and_no_way_back,
    ),
    (
        "keeping_root_drops_every_capability_all_the_same",
        keeping_root_drops_every_capability_all_the_same,
    ),
    (
        "a_process_not_started_as_root_keeps_its_ids_and_ignores_the_user",
        a_process_not_started_as_root_keeps_its_ids_and_ignores_the_user,
    ),
    (
        "an_unknown_user_is_refused_before_anything_changes",
        an_unknown_user_is_refused_before_anything_changes,
    ),
    (
        "root_without_the_capabilities_to_change_user_is_refused_before_anything_changes",
        root_without_the_capabilities_to_change_user_is_refused_before_anything_changes,
    ),
    (
        "a_root_write_keeps_the_setuid_bits_a_dropped_write_clears_them",
        a_root_write_keeps_the_setuid_bits_a_dropped_write_clears_them,
    ),
    (
        "clients_still_see_root_at_the_socket_and_the_socket_stays_for_the_next_start",
        clients_still_see_root_at_the_socket_and_the_socket_stays_for_the_next_start,
    ),
];

/// A child killed and reaped when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn role(name: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(args)
        .env(ROLE_ENV, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd` to its end (at most [`WAIT`]): its exit code and the facts
/// it reported (`key value` lines; the value is the rest of the line).
fn report(mut cmd: Command) -> (i32, HashMap<String, String>) {
    let mut child = Guard(cmd.spawn().expect("start the role"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < WAIT, "the role did not finish");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    eprint!("{err}");
    let facts = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (status.code().unwrap_or(-1), facts)
}

fn fact<'a>(facts: &'a HashMap<String, String>, key: &str) -> &'a str {
    facts
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {facts:?}"))
}

fn assert_no_capability(facts: &HashMap<String, String>) {
    for key in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(fact(facts, key), "0000000000000000", "{key}: {facts:?}");
    }
    assert_eq!(fact(facts, "NoNewPrivs"), "1", "{facts:?}");
}

fn dropping_to_nobody_leaves_no_capability_and_no_way_back() {
    let (code, facts) = report(role("drop", &["nobody"]));
    assert_eq!(code, 0);
    let result = fact(&facts, "result");
    assert!(result.starts_with("ok running as nobody"), "{result}");
    assert!(result.contains("bounding set empty"), "{result}");
    assert_eq!(fact(&facts, "Uid"), "65534 65534 65534 65534");
    assert_eq!(fact(&facts, "Gid"), "65534 65534 65534 65534");
    assert_eq!(facts.get("Groups").map(String::as_str).unwrap_or(""), "");
    assert_no_capability(&facts);
    assert_eq!(fact(&facts, "CapBnd"), "0000000000000000");
    assert_eq!(fact(&facts, "setuid0"), "-1", "setuid(0) succeeded");
    assert_eq!(fact(&facts, "setgid0"), "-1", "setgid(0) succeeded");
    // The kernel clears it when the ids change; it was set again.
    assert_eq!(fact(&facts, "pdeathsig"), libc::SIGTERM.to_string());
}

fn keeping_root_drops_every_capability_all_the_same() {
    for who in ["unchanged", "root"] {
        let (code, facts) = report(role("drop", &[who]));
        assert_eq!(code, 0);
        let result = fact(&facts, "result");
        assert!(result.starts_with("ok running as root"), "{who}: {result}");
        assert_eq!(fact(&facts, "Uid"), "0 0 0 0");
        assert_no_capability(&facts);
        assert_eq!(fact(&facts, "CapBnd"), "0000000000000000");
    }
}

fn a_process_not_started_as_root_keeps_its_ids_and_ignores_the_user() {
    let mut cmd = role("drop", &["nobody"]);
    // Started as uid 1 by std (setgroups([]), setgid, setuid before exec):
    // a user that is neither root nor the one asked for.
    cmd.uid(1).gid(1);
    let (code, facts) = report(cmd);
    assert_eq!(code, 0);
    let result = fact(&facts, "result");
    assert!(
        result
            .starts_with("ok running as uid 1, gid 1 (not started as root: --user nobody ignored)"),
        "{result}"
    );
    assert_eq!(fact(&facts, "Uid"), "1 1 1 1");
    assert_no_capability(&facts);
    // Without CAP_SETPCAP the bounding set stays (inert: no_new_privs).
    assert_ne!(fact(&facts, "CapBnd"), "0000000000000000");
    assert!(result.contains("left in the bounding set"), "{result}");
}

fn an_unknown_user_is_refused_before_anything_changes() {
    let (code, facts) = report(role("drop", &["no-such-user-pagepilot"]));
    assert_eq!(code, 0);
    let result = fact(&facts, "result");
    assert_eq!(
        result,
        "err no user named `no-such-user-pagepilot` (--user)"
    );
    assert_eq!(fact(&facts, "Uid"), "0 0 0 0");
    assert_eq!(fact(&facts, "NoNewPrivs"), "0");
    assert_ne!(fact(&facts, "CapEff"), "0000000000000000");
}

/// Starts `cmd` as systemd starts a unit whose `CapabilityBoundingSet=` is
/// empty: root, and an `execve` that grants no capability.
fn empty_bounding_set(cmd: &mut Command) {
    // SAFETY: between fork and exec the closure only calls prctl with
    // integer arguments (async-signal-safe), touching no memory.
    unsafe {
        cmd.pre_exec(|| {
            for cap in 0..64 {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap) != 0 {
                    break;
                }
            }
            Ok(())
        })
    };
}

/// As systemd starts a unit whose `CapabilityBoundingSet=` is empty: root
/// with no capability. Becoming nobody is impossible: refused before
/// anything changed (no_new_privs still unset), naming what is missing.
/// `--user root` (uid 0 kept) works there.
fn root_without_the_capabilities_to_change_user_is_refused_before_anything_changes() {
    let mut cmd = role("drop", &["nobody"]);
    empty_bounding_set(&mut cmd);
    let (code, facts) = report(cmd);
    assert_eq!(code, 0);
    let result = fact(&facts, "result");
    assert!(
        result.starts_with("err cannot become nobody: root without CAP_SETUID and CAP_SETGID"),
        "{result}"
    );
    assert_eq!(fact(&facts, "Uid"), "0 0 0 0");
    assert_eq!(fact(&facts, "NoNewPrivs"), "0");
    assert_eq!(fact(&facts, "CapBnd"), "0000000000000000");

    let mut cmd = role("drop", &["root"]);
    empty_bounding_set(&mut cmd);
    let (code, facts) = report(cmd);
    assert_eq!(code, 0);
    let result = fact(&facts, "result");
    assert!(result.starts_with("ok running as root"), "{result}");
    assert!(result.contains("bounding set empty"), "{result}");
    assert_no_capability(&facts);
}

/// The attack: a client passes a descriptor of a group-writable
/// setuid-root file (here mode 6777) as its backing file; the daemon
/// writes a page back through it. Written by root with CAP_FSETID the
/// file stays setuid-root with the client's bytes in it; written by the
/// dropped daemon, as nobody or as root without capabilities, the kernel
/// clears both bits.
fn a_root_write_keeps_the_setuid_bits_a_dropped_write_clears_them() {
    let dir = tempfile::tempdir().unwrap();
    for (who, kept) in [("none", true), ("nobody", false), ("unchanged", false)] {
        let path = dir.path().join(format!("setuid-{who}"));
        std::fs::write(&path, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o6777)).unwrap();
        let mode =
            |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&path), 0o6777);
        let (code, facts) = report(role("write", &[path.to_str().unwrap(), who]));
        assert_eq!(code, 0, "{who}: {facts:?}");
        assert!(facts.contains_key("written"), "{who}: {facts:?}");
        assert_eq!(&std::fs::read(&path).unwrap()[..12], b"written back");
        let expected = if kept { 0o6777 } else { 0o0777 };
        assert_eq!(
            mode(&path),
            expected,
            "written with {who}: mode {:o}",
            mode(&path)
        );
    }
}

/// `SO_PEERCRED` names whoever called `listen`: the daemon bound its socket
/// as root, so clients see uid 0 (and trust it, see the pager's
/// `Client::open`) though the daemon now runs as nobody. Stopped, the
/// daemon cannot remove its socket from a directory only root may write:
/// it says so and exits 0, and the next start replaces the stale socket.
fn clients_still_see_root_at_the_socket_and_the_socket_stays_for_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("daemon.sock");
    let mut cmd = role("serve", &[socket.to_str().unwrap()]);
    cmd.stderr(Stdio::piped());
    let mut child = Guard(cmd.spawn().unwrap());
    let pid = child.0.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let ready = rx
        .recv_timeout(WAIT)
        .expect("the daemon never said it was ready");
    assert!(ready.starts_with("ready running as nobody"), "{ready}");

    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = |key: &str| {
        proc_status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("Uid:"), "65534 65534 65534 65534");
    assert_eq!(line("CapEff:"), "0000000000000000");

    let mut conn = Connection::connect(&socket).unwrap();
    let peer = conn.peer_credentials().unwrap();
    assert_eq!((peer.uid, peer.pid), (0, pid), "{peer:?}");
    conn.send(
        &Message::Hello {
            versions: vec![pagepilot_protocol::VERSION],
            pid: Some(std::process::id()),
        },
        &[],
    )
    .unwrap();
    let welcome = conn.receive_within(Some(WAIT)).unwrap().unwrap().message;
    assert!(matches!(welcome, Message::Welcome { .. }), "{welcome:?}");
    drop(conn);

    // SAFETY: kill(2) of our own child by its pid.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < WAIT, "the daemon did not stop");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut log = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(status.success(), "{status:?}: {log}");
    assert!(socket.exists(), "the dropped daemon removed its socket?");
    assert!(log.contains("stays"), "{log}");

    // The next start (as root here) takes the stale socket's place.
    let server = Server::bind(Config::with_budget(64).unwrap(), {
        let mut o = ServerOptions::new(&socket);
        o.quiet = true;
        o
    })
    .expect("the stale socket was not replaced");
    drop(server);
}
