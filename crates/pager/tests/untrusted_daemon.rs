//! A client checks who listens at the daemon's socket before it sends
//! anything (`SO_PEERCRED`): a squatter (a process of another user bound
//! at the path first) gets neither a byte nor a descriptor, unless
//! `PAGEPILOT_DAEMON_UID` names its user. Real processes: the squatter is
//! this test binary run again as uid 65534 (`role_squatter`), clients
//! that need an environment of their own likewise as root
//! (`role_client`); the `role_*` tests do nothing in the parent. They
//! need root (to start the squatter as another user).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pagepilot_pager::{Client, DaemonError, Region, DAEMON_ENV, DAEMON_UID_ENV};
use pagepilot_protocol::{ClientId, Message, Peer, Quotas, VERSION};
use pagepilot_transport::{Connection, ReadOutcome};

/// The role a run of this binary plays (unset: the tests).
const ROLE: &str = "PP_ROLE";
/// The squatter's user.
const NOBODY: u32 = 65534;
/// The longest anything is waited for.
const WAIT: Duration = Duration::from_secs(10);

/// A child killed and reaped when dropped, its stdout lines on a channel.
struct Role {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Role {
    /// This binary run again for `role_NAME`, as root unless `uid` says.
    fn start(name: &str, uid: Option<u32>, env: &[(&str, &str)]) -> Role {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            &format!("role_{name}"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, name)
        .env_remove(DAEMON_ENV)
        .env_remove(DAEMON_UID_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
        if let Some(uid) = uid {
            // std drops the supplementary groups too (started as root).
            cmd.uid(uid).gid(uid);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the role");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Role { child, lines }
    }

    /// The rest of the first line reported after `tag` (the harness may
    /// print the test's name before it on the same line).
    fn said(&self, tag: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("the role never said {tag}"));
            if let Some(at) = line.find(tag) {
                return line[at + tag.len()..].trim().to_owned();
            }
        }
    }
}

/// A directory nobody may write (the squatter binds its socket there).
fn squat_dir() -> common::Scratch {
    let dir = common::Scratch::new("squat");
    std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// A squatter listening at `socket` as uid 65534; it answers `Hello` with
/// `Welcome` as a daemon would.
fn squatter(socket: &Path) -> Role {
    let role = Role::start(
        "squatter",
        Some(NOBODY),
        &[("PP_SOCKET", socket.to_str().unwrap())],
    );
    assert_eq!(role.said("squatter:"), "listening");
    role
}

/// What the squatter received on the one connection it took: (bytes,
/// descriptors).
fn received(squatter: &Role) -> (usize, usize) {
    let got = squatter.said("squatter received");
    let (bytes, fds) = got.split_once(' ').unwrap();
    (bytes.parse().unwrap(), fds.parse().unwrap())
}

#[test]
fn a_socket_held_by_another_user_is_refused_and_receives_nothing() {
    assert!(
        std::env::var_os(DAEMON_UID_ENV).is_none(),
        "run without {DAEMON_UID_ENV}"
    );
    let dir = squat_dir();
    let socket = dir.file("pagepilot.sock");
    let squatter = squatter(&socket);
    let err = Client::open(&socket).expect_err("the squatter was trusted");
    match &err {
        DaemonError::UntrustedDaemon {
            path,
            uid,
            expected,
        } => {
            assert_eq!((path.as_path(), *uid), (socket.as_path(), NOBODY));
            assert!(!expected.contains(&NOBODY), "{expected:?}");
        }
        other => panic!("not UntrustedDaemon: {other}"),
    }
    assert_eq!(err.errno(), libc::EPERM);
    let text = err.to_string();
    assert!(
        text.contains("held by uid 65534") && text.contains("PAGEPILOT_DAEMON_UID=65534"),
        "{text}"
    );
    assert_eq!(received(&squatter), (0, 0));
}

/// The descriptors at stake: a region mapped with `PAGEPILOT_DAEMON`
/// pointing at the squatter would pass it its memory file and its
/// writable backing file. The map fails, and nothing reaches the squatter.
#[test]
fn a_region_joining_a_squatted_socket_fails_and_passes_no_descriptor() {
    let dir = squat_dir();
    let socket = dir.file("pagepilot.sock");
    let backing = dir.file("backing");
    std::fs::write(&backing, vec![7u8; 16 * 4096]).unwrap();
    let squatter = squatter(&socket);
    let client = Role::start(
        "client",
        None,
        &[
            (DAEMON_ENV, socket.to_str().unwrap()),
            ("PP_BACKING", backing.to_str().unwrap()),
        ],
    );
    let said = client.said("client:");
    assert!(said.starts_with("err 1 "), "{said}");
    assert!(said.contains("held by uid 65534"), "{said}");
    assert_eq!(received(&squatter), (0, 0));
}

#[test]
fn the_user_pagepilot_daemon_uid_names_is_trusted() {
    let dir = squat_dir();
    let socket = dir.file("pagepilot.sock");
    let squatter = squatter(&socket);
    // The variable in the child's environment only: not this process's.
    let client = Role::start(
        "client",
        None,
        &[
            ("PP_SOCKET", socket.to_str().unwrap()),
            (DAEMON_UID_ENV, "65534"),
        ],
    );
    assert_eq!(client.said("client:"), "ok");
    let (bytes, fds) = received(&squatter);
    assert!(bytes > 0, "Hello never came");
    assert_eq!(fds, 0);
}

#[test]
fn a_pagepilot_daemon_uid_that_is_no_number_is_refused_naming_it() {
    let dir = squat_dir();
    let socket = dir.file("pagepilot.sock");
    let squatter = squatter(&socket);
    let client = Role::start(
        "client",
        None,
        &[
            ("PP_SOCKET", socket.to_str().unwrap()),
            (DAEMON_UID_ENV, "nobody"),
        ],
    );
    let said = client.said("client:");
    assert_eq!(
        said,
        format!(
            "err {} PAGEPILOT_DAEMON_UID=\"nobody\" is not a user id (a number)",
            libc::EINVAL
        )
    );
    assert_eq!(received(&squatter), (0, 0));
}

/// The squatter: binds `PP_SOCKET`, says so, takes one connection and
/// counts the bytes and descriptors that arrive on it until it closes
/// (answering `Hello` as a daemon would), then reports them.
#[test]
fn role_squatter() {
    if std::env::var(ROLE).as_deref() != Ok("squatter") {
        return;
    }
    let listener = UnixListener::bind(std::env::var("PP_SOCKET").unwrap()).unwrap();
    println!("squatter: listening");
    std::io::stdout().flush().unwrap();
    let (stream, _) = listener.accept().unwrap();
    // A read that times out ends the count (EAGAIN: WouldBlock).
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut conn = Connection::new(stream, Peer::Client);
    let (mut bytes, mut fds) = (0, 0);
    while let Ok(ReadOutcome::Read(n)) = conn.read_available() {
        bytes += n;
        while let Ok(Some(got)) = conn.next_received() {
            fds += got.fds.len();
            if let Message::Hello { .. } = got.message {
                let welcome = Message::Welcome {
                    version: VERSION,
                    client: ClientId(1),
                    quotas: Quotas::default(),
                };
                let _ = conn.send(&welcome, &[]);
            }
        }
    }
    fds += conn.queued_fds();
    println!("squatter received {bytes} {fds}");
}

/// A client: opens the daemon at `PP_SOCKET`, or with `PP_BACKING` maps
/// that file writable (joining `$PAGEPILOT_DAEMON`); reports `ok` or `err
/// ERRNO MESSAGE`.
#[test]
fn role_client() {
    if std::env::var(ROLE).as_deref() != Ok("client") {
        return;
    }
    let result = match std::env::var_os("PP_BACKING") {
        Some(backing) => Region::map_file(&PathBuf::from(backing), true, 8 * 4096, "clock")
            .map(drop)
            .map_err(|e| match e {
                pagepilot_pager::MapError::Daemon(e) => e,
                other => panic!("not a daemon error: {other}"),
            }),
        None => Client::open(Path::new(&std::env::var("PP_SOCKET").unwrap())).map(drop),
    };
    match result {
        Ok(()) => println!("client: ok"),
        Err(e) => println!("client: err {} {e}", e.errno()),
    }
}
