//! Bad input over a real socket: a wrong version, a malformed body, a
//! garbage header, a request beyond quota, half a frame and then silence,
//! too many connections, descriptors that are not what they should be.
//! Each is answered with an error naming the problem or disconnected, and
//! the other clients go on being served.

mod live;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use live::*;
use pagepilot_daemon::server::{Server, ServerError, ServerOptions};
use pagepilot_daemon::Config;
use pagepilot_protocol::{encode, ErrorCode, Kind, Message, RegionFiles, RegionId};

const CONFIG: &str = "
[machine]
budget_frames = 100

[default]
frames = 50
";

/// A client that is still served.
fn still_served(daemon: &Daemon, other: &mut Client) {
    assert!(matches!(
        other.request(&Message::Status),
        Message::StatusReply(_)
    ));
    drop(daemon.client());
}

#[test]
fn a_hello_with_no_common_version_is_refused_and_closed_and_others_go_on() {
    let daemon = Daemon::start(CONFIG);
    let mut other = daemon.client();
    let mut s = daemon.raw();
    let hello = Message::Hello {
        versions: vec![2, 3],
        pid: None,
    };
    s.write_all(&encode(&hello).unwrap()).unwrap();
    let got = frames(&closed_by_peer(&mut s));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(error(&got[0]).code, ErrorCode::UnsupportedVersion);
    assert_eq!(error(&got[0]).request, Some(Kind::Hello));
    still_served(&daemon, &mut other);
}

#[test]
fn a_frame_in_an_unknown_version_is_refused_and_the_connection_closed() {
    let daemon = Daemon::start(CONFIG);
    let mut other = daemon.client();
    let mut s = daemon.raw();
    let mut bytes = encode(&live::hello()).unwrap();
    bytes[2] = 9;
    s.write_all(&bytes).unwrap();
    let got = frames(&closed_by_peer(&mut s));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(error(&got[0]).code, ErrorCode::UnsupportedVersion);
    still_served(&daemon, &mut other);
}

#[test]
fn a_malformed_body_is_answered_malformed_and_the_same_client_goes_on() {
    let daemon = Daemon::start(CONFIG);
    let mut c = daemon.client();
    c.register(1, 10, 40);
    let mut bytes = encode(&Message::RequestFrames {
        region: RegionId(1),
        frames: 5,
    })
    .unwrap();
    bytes[16..24].copy_from_slice(&0u64.to_le_bytes());
    c.conn.stream().write_all(&bytes).unwrap();
    let reply = c.reply();
    let e = error(&reply);
    assert_eq!(
        (e.code, e.request),
        (ErrorCode::Malformed, Some(Kind::RequestFrames))
    );
    assert!(e.message.contains("RequestFrames.frames"), "{}", e.message);
    assert_eq!(
        c.request(&Message::RequestFrames {
            region: RegionId(1),
            frames: 5
        }),
        Message::Granted {
            region: RegionId(1),
            frames: 5,
            held_frames: 15
        }
    );
}

#[test]
fn a_garbage_header_disconnects_that_client_only() {
    let daemon = Daemon::start(CONFIG);
    let mut other = daemon.client();
    other.register(1, 10, 10);
    let mut s = daemon.raw();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let got = frames(&closed_by_peer(&mut s));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(code(&got[0]), ErrorCode::Malformed);
    assert!(error(&got[0]).message.contains("bad magic"), "{got:?}");
    still_served(&daemon, &mut other);
    assert_eq!(daemon.status().free_frames, 90);
}

#[test]
fn a_request_beyond_the_users_quota_is_refused_beyond_quota() {
    let daemon = Daemon::start(CONFIG);
    let mut c = daemon.client();
    let refused = c.register(1, 60, 60);
    assert_eq!(code(&refused), ErrorCode::BeyondQuota);
    assert!(
        error(&refused).message.contains("quota is 50"),
        "{refused:?}"
    );
    assert!(matches!(c.register(1, 50, 50), Message::Registered { .. }));
}

/// Whether the daemon has not closed `s`: no hang-up pending, whatever
/// bytes wait unread (poll, not a read, so nothing is taken from it).
fn still_open(s: &UnixStream) -> bool {
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) == 0
}

/// Bytes that wait unread in `s` (FIONREAD).
fn unread(s: &UnixStream) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(rc, 0, "FIONREAD: {}", std::io::Error::last_os_error());
    n as usize
}

#[test]
fn half_a_frame_holds_up_no_other_client() {
    // A frame timeout far beyond the test: the half frame is still waiting
    // when the other client is served, whatever the machine's load.
    let daemon = Daemon::start_with(CONFIG, |o| o.frame_timeout = 6 * WAIT);
    let mut other = daemon.client();
    let s = daemon.raw();
    (&s).write_all(&encode(&live::hello()).unwrap()[..5])
        .unwrap();
    still_served(&daemon, &mut other);
    assert!(still_open(&s), "the half frame's connection was closed");
    assert_eq!(unread(&s), 0, "the half frame was answered");
    still_served(&daemon, &mut other);
}

#[test]
fn half_a_frame_then_silence_is_disconnected_after_the_frame_timeout() {
    let timeout = Duration::from_millis(400);
    let daemon = Daemon::start_with(CONFIG, |o| o.frame_timeout = timeout);
    let mut other = daemon.client();
    let mut s = daemon.raw();
    let start = Instant::now();
    s.write_all(&encode(&live::hello()).unwrap()[..5]).unwrap();
    // Closed with one error naming the half frame (closed_by_peer fails
    // past its own 10 s: the guard against a daemon that never closes).
    let got = frames(&closed_by_peer(&mut s));
    assert_eq!(got.len(), 1);
    assert!(
        error(&got[0]).message.contains("5 bytes of a frame"),
        "{got:?}"
    );
    // Never before its timeout (a bound a loaded machine cannot break).
    let waited = start.elapsed();
    assert!(waited >= timeout, "{waited:?}");
    still_served(&daemon, &mut other);
}

#[test]
fn connections_beyond_the_cap_are_refused_with_an_error() {
    let daemon = Daemon::start_with(CONFIG, |o| o.max_clients = 2);
    let a = daemon.client();
    let _b = daemon.client();
    let mut third = daemon.raw();
    let got = frames(&closed_by_peer(&mut third));
    assert_eq!(got.len(), 1);
    assert_eq!(code(&got[0]), ErrorCode::BeyondQuota);
    assert!(error(&got[0]).message.contains("at most 2 clients"));
    // A client leaving makes room.
    drop(a);
    let start = Instant::now();
    while !welcomed(&daemon) {
        assert!(start.elapsed() < WAIT, "no room was made");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a new client gets in and is welcomed (not refused for want of
/// room).
fn welcomed(daemon: &Daemon) -> bool {
    let Ok(mut c) = pagepilot_transport::Connection::connect(&daemon.socket) else {
        return false;
    };
    let reply = c
        .send(&live::hello(), &[])
        .ok()
        .and_then(|()| c.receive_within(Some(WAIT)).ok().flatten());
    matches!(reply.map(|r| r.message), Some(Message::Welcome { .. }))
}

#[test]
fn a_backing_file_open_read_only_is_bad_files_and_the_client_goes_on() {
    let daemon = Daemon::start(CONFIG);
    let mut c = daemon.client();
    let path = backing_file(daemon.dir.path(), "data", 4 * PAGE, 0);
    let files = RegionFilesOnDisk::new(4, &path);
    let read_only = std::fs::File::open(&path).unwrap();
    let reply = c.request_with(
        &files.register(1, 1, 4),
        &[&files.memory, &read_only, &files.dirty],
    );
    let e = error(&reply);
    assert_eq!(
        (e.code, e.request, e.region),
        (
            ErrorCode::BadFiles,
            Some(Kind::RegisterRegion),
            Some(RegionId(1))
        )
    );
    assert!(e.message.contains("backing"), "{}", e.message);
    // The core never heard of it: the same region registers properly.
    let ok = c.request_with(&files.register(1, 1, 4), &files.fds());
    assert!(matches!(ok, Message::Registered { .. }), "{ok:?}");
}

#[test]
fn a_dirty_map_without_the_magic_or_beyond_the_memory_is_bad_files() {
    let daemon = Daemon::start(CONFIG);
    let mut c = daemon.client();
    let path = backing_file(daemon.dir.path(), "data", 4 * PAGE, 0);
    let files = RegionFilesOnDisk::new(4, &path);
    let not_a_map = RegionFilesOnDisk::new(4, &path).memory;
    let reply = c.request_with(
        &files.register(1, 1, 4),
        &[&files.memory, &files.backing, &not_a_map],
    );
    assert!(error(&reply).message.contains("magic"), "{reply:?}");
    let bigger = RegionFilesOnDisk::new(64, &path);
    let reply = c.request_with(
        &files.register(1, 1, 4),
        &[&files.memory, &files.backing, &bigger.dirty],
    );
    assert!(
        error(&reply).message.contains("covers 64 pages"),
        "{reply:?}"
    );
    let socket = std::os::unix::net::UnixStream::pair().unwrap().0;
    let socket = std::fs::File::from(std::os::fd::OwnedFd::from(socket));
    let memory_only = RegionFiles {
        memory: true,
        ..RegionFiles::default()
    };
    let reply = c.request_with(&register(2, 1, 4, memory_only), &[&socket]);
    assert!(error(&reply).message.contains("socket"), "{reply:?}");
    assert!(matches!(c.register(3, 1, 1), Message::Registered { .. }));
}

#[test]
fn a_registration_whose_descriptors_never_came_is_bad_files_and_disconnected() {
    let daemon = Daemon::start(CONFIG);
    let mut other = daemon.client();
    let mut s = daemon.raw();
    s.write_all(&encode(&live::hello()).unwrap()).unwrap();
    let files = RegionFiles {
        memory: true,
        ..RegionFiles::default()
    };
    s.write_all(&encode(&register(1, 1, 1, files)).unwrap())
        .unwrap();
    let got = frames(&closed_by_peer(&mut s));
    assert!(matches!(got[0], Message::Welcome { .. }), "{got:?}");
    assert_eq!(code(&got[1]), ErrorCode::BadFiles);
    still_served(&daemon, &mut other);
}

#[test]
fn descriptors_sent_with_frames_that_do_not_announce_them_disconnect_the_client() {
    use std::os::fd::AsFd;
    let daemon = Daemon::start(CONFIG);
    let mut other = daemon.client();
    let c = daemon.client();
    let stream = c.conn.stream().try_clone().unwrap();
    let (spare, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    // A Status frame with a descriptor the header does not announce.
    let bytes = encode(&Message::Status).unwrap();
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
    let fds = [spare.as_fd()];
    control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        &stream,
        &[std::io::IoSlice::new(&bytes)],
        &mut control,
        rustix::net::SendFlags::empty(),
    )
    .unwrap();
    let mut stream = stream;
    let got = frames(&closed_by_peer(&mut stream));
    // The Status is answered, then the client is told why and dropped.
    assert!(matches!(got[0], Message::StatusReply(_)), "{got:?}");
    assert_eq!(code(&got[1]), ErrorCode::BadFiles);
    assert!(
        error(&got[1]).message.contains("do not announce"),
        "{got:?}"
    );
    still_served(&daemon, &mut other);
}

#[test]
fn a_second_daemon_on_a_live_socket_is_refused_and_a_stale_socket_is_replaced() {
    let daemon = Daemon::start(CONFIG);
    let config = || Config::parse(CONFIG).unwrap();
    let err = Server::bind(config(), ServerOptions::new(&daemon.socket)).unwrap_err();
    assert!(matches!(err, ServerError::AlreadyRunning(_)), "{err}");
    // A socket file nobody listens at (a daemon killed) is replaced.
    let stale = daemon.dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let server = Server::bind(config(), ServerOptions::new(&stale)).unwrap();
    drop(server);
    assert!(!stale.exists(), "the server removes its socket");
    // Never a file that is not a socket.
    let file = backing_file(daemon.dir.path(), "not-a-socket", 1, 0);
    let err = Server::bind(config(), ServerOptions::new(&file)).unwrap_err();
    assert!(matches!(err, ServerError::NotASocket(_)), "{err}");
    assert!(file.exists());
}

#[test]
fn the_socket_is_open_to_every_user() {
    use std::os::unix::fs::PermissionsExt;
    let daemon = Daemon::start(CONFIG);
    let mode = std::fs::metadata(&daemon.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o666);
}

#[test]
fn a_client_that_never_reads_its_replies_is_dropped_without_delaying_others() {
    let daemon = Daemon::start(CONFIG);
    let mut good = daemon.client();
    let mut flood = daemon.raw();
    let mut writer = flood.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // Requests pipelined without ever reading a reply: far more replies
    // than the socket holds.
    let flooder = std::thread::spawn(move || {
        let mut bytes = encode(&live::hello()).unwrap();
        let status = encode(&Message::Status).unwrap();
        for _ in 0..50_000 {
            bytes.extend_from_slice(&status);
        }
        let _ = writer.write_all(&bytes);
    });
    // Its replies back up: the socket holds what it can, unread, and takes
    // no more (the rest waits in the daemon's outbox, its requests unread).
    let guard = Instant::now();
    let mut last = 0;
    loop {
        assert!(
            guard.elapsed() < WAIT,
            "the flooder's replies never backed up"
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = unread(&flood);
        if now > 0 && now == last {
            break;
        }
        last = now;
    }
    // Others are served while the daemon cannot send the flooder a byte: a
    // daemon that waited on its socket would answer only once it had
    // dropped the flooder for not reading (after 2 s of it).
    for _ in 0..5 {
        assert!(matches!(
            good.request(&Message::Status),
            Message::StatusReply(_)
        ));
    }
    assert!(
        still_open(&flood),
        "the flooder was dropped before others were served"
    );
    // Then dropped after 2 s of taking nothing: its hang-up is awaited
    // unread (a read would take bytes, and keep it connected).
    while still_open(&flood) {
        assert!(guard.elapsed() < 2 * WAIT, "the flooder was never dropped");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Dropped after 2 s of not reading: what it was sent, then the end.
    let got = frames(&closed_by_peer(&mut flood));
    assert!(matches!(got[0], Message::Welcome { .. }));
    assert!(got.len() < 50_000, "{} replies", got.len());
    flooder.join().unwrap();
    // It lingers while this process holds its connection (its memory is
    // its own), and is forgotten once nobody does.
    assert_eq!(daemon.status().clients.len(), 3, "the flooder lingers");
    drop(flood);
    daemon.until("the flooder to be gone", |s| s.clients.len() == 2);
}
