//! A root daemon under a hostile local user: every test runs real
//! processes of two unprivileged uids (children of this test binary,
//! switched to those users) against a daemon run by root, and checks what
//! the attacker can take from the victim: frames, pins, regions, reserves,
//! connections, the loop's time, descriptors, write-back time, the file a
//! write-back reaches, and a forked child's memory. (A backing file on a
//! file system that never answers is `hostile_fuse.rs`: a process holding
//! such a file cannot start children, whose `exec` would close it.)

mod live;

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use live::users::{connect_as, ATTACKER, VICTIM};
use live::*;
use pagepilot_protocol::{encode, ErrorCode, Message, RegionId, RegisterRegion};

/// The configuration the attacks were first tried against: 64 MiB, and
/// 2,048 frames, 16 pins and 64 regions a user.
const SHARED: &str = "
[machine]
budget_frames = 16384
deadline_ms = 200

[default]
frames = 2048
pinned_frames = 16
regions = 64
";

/// Region `id` with a processor reserve and a fault limit.
fn reserving(id: u32, ppm: u32, limit: u64) -> Message {
    Message::RegisterRegion(RegisterRegion {
        region: RegionId(id),
        min_frames: 1,
        budget_frames: 1,
        cpu_reserve_ppm: ppm,
        fault_limit: limit,
        fault_period_us: if limit > 0 { 100_000 } else { 0 },
        ..RegisterRegion::default()
    })
}

#[test]
fn eight_connections_of_one_user_are_held_to_one_quota() {
    let daemon = Daemon::start(SHARED);
    // The victim first: 1,000 frames above its minimum.
    let mut victim = daemon.client_as(VICTIM);
    assert!(registered(&victim.register(1, 100, 1100)));
    let granted = victim.request(&Message::RequestFrames {
        region: RegionId(1),
        frames: 1000,
    });
    assert!(
        matches!(granted, Message::Granted { frames: 1000, .. }),
        "{granted:?}"
    );

    let mut attackers: Vec<Client> = (0..8).map(|_| daemon.client_as(ATTACKER)).collect();
    // Frames: each connection asks for the whole quota as its minimum.
    let won = attackers
        .iter_mut()
        .map(|a| a.register(1, 2048, 2048))
        .filter(registered)
        .count();
    assert_eq!(won, 1, "one user, one quota of frames");
    // Regions: 64 a user, over all its connections.
    let mut regions = 0;
    for a in attackers.iter_mut() {
        for id in 10..30 {
            if registered(&a.register(id, 0, 1)) {
                regions += 1;
            }
        }
    }
    let status = daemon.status();
    let held_regions: usize = status
        .clients
        .iter()
        .filter(|c| c.uid == ATTACKER)
        .map(|c| c.regions.len())
        .sum();
    assert_eq!(
        held_regions, 64,
        "one user, 64 regions ({regions} empty ones won)"
    );
    // Reserves: the default is a fifth of a processor a user.
    let reserved = attackers
        .iter_mut()
        .map(|a| a.request(&reserving(40, 200_000, 0)))
        .filter(registered)
        .count();
    assert_eq!(reserved, 0, "the attacker's regions are all used");
    // The victim kept its frames, and its next region, reserve and fault
    // limit are admitted.
    assert!(victim
        .events
        .iter()
        .all(|e| !matches!(e, Message::Forced { .. })));
    let mine = status.clients.iter().find(|c| c.uid == VICTIM).unwrap();
    assert_eq!(mine.regions[0].held_frames, 1100);
    assert!(registered(&victim.request(&reserving(2, 10_000, 10))));
}

#[test]
fn one_users_reserves_and_pins_add_up_over_its_connections() {
    let daemon = Daemon::start(SHARED);
    let mut attackers: Vec<Client> = (0..8).map(|_| daemon.client_as(ATTACKER)).collect();
    let won = attackers
        .iter_mut()
        .map(|a| a.request(&reserving(1, 100_000, 0)))
        .filter(registered)
        .count();
    assert_eq!(won, 2, "20% of a processor a user, 10% a region");
    let refused = attackers[7].request(&reserving(2, 100_000, 0));
    assert_eq!(code(&refused), ErrorCode::BeyondQuota);
    assert!(error(&refused).message.contains("uid 20001"), "{refused:?}");
    // Pins: 16 a user, however many connections pin.
    let pinned: u64 = attackers
        .iter_mut()
        .map(|a| {
            a.register(2, 16, 16);
            match a.request(&Message::Pin {
                region: RegionId(2),
                offset: 0,
                len: 16 * 4096,
            }) {
                Message::Pinned { pinned_frames, .. } => pinned_frames,
                _ => 0,
            }
        })
        .sum();
    assert_eq!(pinned, 16, "one user, one pin quota");

    let mut victim = daemon.client_as(VICTIM);
    assert!(registered(&victim.request(&reserving(1, 10_000, 10))));
}

#[test]
fn a_victims_status_waits_for_a_bounded_share_of_another_users_flood() {
    let config =
        format!("{SHARED}\n[uid.{ATTACKER}]\nframes = 16384\nregions = 1000\ndescriptors = 1000\n")
            .replace(
                "deadline_ms = 200",
                "deadline_ms = 600000\npartition_burst_frames = 0",
            );
    let daemon = Daemon::start(&config);
    let mut flooder = daemon.client_as(ATTACKER);
    // A thousand small holders, each one frame above its minimum: every
    // request asks frames back from them (the watermark is 0).
    for id in 0..1000 {
        assert!(registered(&flooder.register(id, 1, 20)), "holder {id}");
        flooder.request(&Message::RequestFrames {
            region: RegionId(id),
            frames: 1,
        });
    }
    let mut victim = daemon.client_as(VICTIM);
    // 12,000 one-frame requests, pipelined by one thread, their replies
    // read by another. Each grant takes one free frame.
    const FLOOD: u64 = 12_000;
    let mut bytes = Vec::new();
    for i in 0..FLOOD {
        let request = Message::RequestFrames {
            region: RegionId((i % 1000) as u32),
            frames: 1,
        };
        bytes.extend(encode(&request).unwrap());
    }
    let stream = flooder.conn.stream().try_clone().unwrap();
    let replies = Arc::new(AtomicU64::new(0));
    let counted = replies.clone();
    let reader = std::thread::spawn(move || {
        let mut conn =
            pagepilot_transport::Connection::new(stream, pagepilot_protocol::Peer::Daemon);
        while counted.load(Ordering::Relaxed) < FLOOD {
            match conn.receive_within(Some(WAIT)) {
                Ok(Some(r)) if matches!(r.message, Message::Granted { .. }) => {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Some(_)) => {}
                _ => return,
            }
        }
    });
    let mut writer = flooder.conn.stream().try_clone().unwrap();
    let flood = std::thread::spawn(move || writer.write_all(&bytes).unwrap());
    // While the flood runs, each of the victim's requests waits for what
    // the daemon serves the flooder between two of its answers.
    let free = |c: &mut Client| match c.request(&Message::Status) {
        Message::StatusReply(s) => s.free_frames,
        other => panic!("no status: {other:?}"),
    };
    let mut waits = Vec::new();
    let mut round_trips = Vec::new();
    let mut last = free(&mut victim);
    while replies.load(Ordering::Relaxed) < FLOOD * 9 / 10 {
        let asked = Instant::now();
        let now = free(&mut victim);
        round_trips.push(asked.elapsed());
        waits.push(last - now);
        last = now;
    }
    flood.join().unwrap();
    reader.join().unwrap();
    assert_eq!(
        replies.load(Ordering::Relaxed),
        FLOOD,
        "the flood was served too"
    );
    waits.sort_unstable();
    round_trips.sort_unstable();
    let median = waits[waits.len() / 2];
    eprintln!(
        "{} status requests during the flood: each waited for a median of {median} flood \
         requests (max {}), median round trip {:?}",
        waits.len(),
        waits[waits.len() - 1],
        round_trips[round_trips.len() / 2]
    );
    assert!(
        waits.len() >= 5,
        "the flood ended before the victim asked much"
    );
    // 64 requests of a client a turn: a turn or two of the flooder's.
    assert!(
        median <= 192,
        "the victim waited for {median} of the flood's requests"
    );
}

/// A registration of a region whose backing file is `backing`.
fn register_over(c: &mut Client, id: u32, backing: &File) -> Message {
    let files = RegionFilesOnDisk::over(4, backing);
    c.request_with(&files.register(id, 1, 4), &files.fds())
}

#[test]
fn a_user_holding_every_connection_it_may_open_does_not_keep_another_out() {
    let config = format!("{SHARED}connections = 8\n");
    let daemon = Daemon::start_with(&config, |o| o.hello_timeout = Duration::from_millis(300));
    let dir = daemon.dir.path();
    // Eight idle connections that never say Hello, and a ninth.
    let mut idle: Vec<_> = (0..8)
        .map(|_| connect_as(&daemon.socket, dir, ATTACKER, ATTACKER))
        .collect();
    let mut ninth = connect_as(&daemon.socket, dir, ATTACKER, ATTACKER);
    let refused = frames(&closed_by_peer(&mut ninth));
    assert!(
        matches!(&refused[..], [Message::Error(e)] if e.code == ErrorCode::BeyondQuota && e.message.contains("8 connections")),
        "{refused:?}"
    );
    // Another user still joins.
    let mut victim = daemon.client_as(VICTIM);
    assert!(matches!(
        victim.request(&Message::Status),
        Message::StatusReply(_)
    ));
    // Connections that never said Hello are closed, freeing the slots.
    let said = frames(&closed_by_peer(&mut idle[0]));
    assert!(
        matches!(&said[..], [Message::Error(e)] if e.message.contains("Hello")),
        "{said:?}"
    );
    idle.clear();
    let mut again = daemon.client_as(ATTACKER);
    assert!(matches!(
        again.request(&Message::Status),
        Message::StatusReply(_)
    ));
}

#[test]
fn a_maximal_dirty_map_is_written_back_in_bounded_work() {
    let daemon = Daemon::start(SHARED);
    let backing = backing_file(daemon.dir.path(), "data", 16 * 4096, 0xAA);
    // 32 TiB of memory, sparse, with three pages of data; a dirty map of
    // 1 GiB with every bit set.
    let files = RegionFilesOnDisk::maximal(&backing, &[1, 5, 9]);
    let mut c = daemon.client_as(ATTACKER);
    let reply = c.request_with(&files.register(1, 1, 4), &files.fds());
    assert!(registered(&reply), "{reply:?}");
    // The connecting process is gone already; closing the connection
    // ends the client, and its pages are written back.
    drop(c);
    daemon.until("the client to be written back and gone", |s| {
        s.clients.iter().all(|c| c.uid != ATTACKER)
    });
    let data = std::fs::read(&backing).unwrap();
    for (page, chunk) in data.chunks(4096).enumerate() {
        let want = if [1, 5, 9].contains(&page) {
            page as u8
        } else {
            0xAA
        };
        assert!(chunk.iter().all(|&b| b == want), "page {page}");
    }
}

#[test]
fn a_setuid_backing_file_is_refused() {
    let daemon = Daemon::start(SHARED);
    let path = backing_file(daemon.dir.path(), "setuid", 4 * 4096, 0);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4777)).unwrap();
    let backing = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut attacker = daemon.client_as(ATTACKER);
    let refused = register_over(&mut attacker, 1, &backing);
    assert_eq!(code(&refused), ErrorCode::BadFiles);
    assert!(error(&refused).message.contains("setuid"), "{refused:?}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o4777, "nothing was written");
}

/// What the forked child prints once it has done its first writes.
const READY: &str = "forked child ready";

/// The forking client's parent: connects as its user, registers a region
/// with its three descriptors, starts a child that inherits the connection
/// and the memory, and exits.
#[test]
fn role_forking_parent() {
    if !is_child() {
        return;
    }
    let socket = std::env::var("PP_SOCKET").unwrap();
    let backing = std::env::var("PP_BACKING").unwrap();
    let mut c = Client::joined(socket.as_ref());
    let files = RegionFilesOnDisk::new(4, backing.as_ref());
    assert!(registered(
        &c.request_with(&files.register(1, 1, 4), &files.fds())
    ));
    let inherit = |fd: i32| {
        // SAFETY: `fd` is open in this process (owned by a live value
        // above) and F_SETFD only changes its close-on-exec flag.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        fd.to_string()
    };
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "role_forked_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PP_CHILD", "1")
        .env("PP_CONN", inherit(c.conn.stream().as_raw_fd()))
        .env("PP_MEMORY", inherit(files.memory.as_raw_fd()))
        .env("PP_DIRTY", inherit(files.dirty.as_raw_fd()))
        .stdout(std::process::Stdio::piped());
    // Never waited for: the parent exits and leaves it to run.
    #[allow(clippy::zombie_processes)]
    let mut child = child.spawn().unwrap();
    // Exit once the child has the descriptors (it says so), leaving it.
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    for line in std::io::BufRead::lines(out) {
        let line = line.unwrap_or_default();
        if line.ends_with(READY) {
            std::process::exit(0);
        }
        seen.push(line);
    }
    panic!("the child did not say it was ready; it printed {seen:?}");
}

/// The forked child: dirties page 1 (generation 1), sends half a frame so
/// that the daemon ends the client while it still holds the connection,
/// then waits for `go` in its directory, dirties page 1 again (generation
/// 2) and exits.
#[test]
fn role_forked_child() {
    if !is_child() {
        return;
    }
    use std::os::fd::FromRawFd;
    let fd = |name: &str| std::env::var(name).unwrap().parse::<i32>().unwrap();
    // SAFETY: the parent passed these descriptors open, for this process
    // alone to own from here on.
    let (conn, memory, dirty) = unsafe {
        (
            std::os::unix::net::UnixStream::from_raw_fd(fd("PP_CONN")),
            File::from_raw_fd(fd("PP_MEMORY")),
            File::from_raw_fd(fd("PP_DIRTY")),
        )
    };
    fill(&memory, 1, 1);
    mark_dirty(&dirty, 1);
    let frame = encode(&Message::Status).unwrap();
    (&conn).write_all(&frame[..frame.len() - 1]).unwrap();
    println!("{READY}");
    let null = File::options().write(true).open("/dev/null").unwrap();
    // SAFETY: both descriptors are open; the test harness's later output
    // goes to /dev/null instead of the pipe its parent stops reading.
    unsafe { libc::dup2(null.as_raw_fd(), 1) };
    let go = std::path::Path::new(&std::env::var("PP_GO").unwrap()).to_owned();
    let start = Instant::now();
    while !go.exists() && start.elapsed() < WAIT * 3 {
        std::thread::sleep(Duration::from_millis(10));
    }
    fill(&memory, 1, 2);
    drop(conn);
}

#[test]
fn a_forked_child_holding_the_connection_is_not_written_back_under_it() {
    let daemon = Daemon::start_with(SHARED, |o| o.frame_timeout = Duration::from_millis(200));
    let dir = daemon.dir.path();
    let backing = backing_file(dir, "data", 4 * 4096, 0xAA);
    std::os::unix::fs::chown(&backing, Some(ATTACKER), Some(ATTACKER)).unwrap();
    let go = dir.join("go");
    let mut parent = spawn_role_as(
        "role_forking_parent",
        ATTACKER,
        ATTACKER,
        &[
            ("PP_SOCKET", daemon.socket.to_str().unwrap()),
            ("PP_BACKING", backing.to_str().unwrap()),
            ("PP_GO", go.to_str().unwrap()),
        ],
    );
    assert!(parent.wait().success(), "the parent failed");
    // The parent is gone; the daemon ended the client (half a frame) while
    // the child holds its connection: nothing is written under the child.
    daemon.until("the client's half frame to time out", |s| {
        s.clients.iter().any(|c| c.uid == ATTACKER)
    });
    std::thread::sleep(Duration::from_millis(1500));
    let data = std::fs::read(&backing).unwrap();
    assert!(
        data[4096..8192].iter().all(|&b| b == 0xAA),
        "written back under the child"
    );
    assert!(
        daemon.status().clients.iter().any(|c| c.uid == ATTACKER),
        "it lingers"
    );
    // Once the child lets go, its last generation is written back.
    std::fs::write(&go, b"").unwrap();
    daemon.until("the client to be gone", |s| {
        s.clients.iter().all(|c| c.uid != ATTACKER)
    });
    let data = std::fs::read(&backing).unwrap();
    assert!(
        data[4096..8192].iter().all(|&b| b == 2),
        "page 1: {:#x}",
        data[4096]
    );
}
