//! Clients sharing the daemon's budget over real sockets: minimums, FAFR
//! reclamation across connections, and forced reclamation of a client
//! that does not answer, even one stopped (SIGSTOP). The clients are
//! different users: one user's connections share one quota.

mod live;

use std::time::{Duration, Instant};

use live::*;
use pagepilot_protocol::{ErrorCode, Message, RegionId};

const CONFIG: &str = "
[machine]
budget_frames = 100
partition_burst_frames = 100
deadline_ms = 300

[default]
frames = 100
";

#[test]
fn two_clients_share_the_budget_and_a_third_whose_min_frame_does_not_fit_is_refused() {
    let daemon = Daemon::start(CONFIG);
    let (mut a, mut b, mut c) = (
        daemon.client_as(10001),
        daemon.client_as(10002),
        daemon.client_as(10003),
    );
    assert!(matches!(
        a.register(1, 40, 40),
        Message::Registered {
            granted_frames: 40,
            ..
        }
    ));
    assert!(matches!(
        b.register(1, 40, 40),
        Message::Registered {
            granted_frames: 40,
            ..
        }
    ));
    let refused = c.register(1, 30, 30);
    assert_eq!(code(&refused), ErrorCode::MinFrameDoesNotFit);
    // The others are still served, and the third may try something smaller.
    assert!(matches!(
        a.request(&Message::Status),
        Message::StatusReply(_)
    ));
    assert!(matches!(
        c.register(1, 20, 20),
        Message::Registered {
            granted_frames: 20,
            ..
        }
    ));
    let s = daemon.status();
    assert_eq!((s.total_frames, s.free_frames), (100, 0));
    let held: Vec<u64> = s
        .clients
        .iter()
        .flat_map(|c| c.regions.iter().map(|r| r.held_frames))
        .collect();
    assert_eq!(held, vec![40, 40, 20]);
}

/// A holds 90 frames above a minimum of 10, all the budget; B registers
/// a minimum of 30.
fn a_holds_everything_and_b_needs_30(daemon: &Daemon) -> (Client, Client) {
    let (mut a, mut b) = (daemon.client_as(10001), daemon.client_as(10002));
    a.register(1, 10, 100);
    assert_eq!(
        a.request(&Message::RequestFrames {
            region: RegionId(1),
            frames: 90
        }),
        Message::Granted {
            region: RegionId(1),
            frames: 90,
            held_frames: 100
        }
    );
    assert!(matches!(
        b.register(7, 30, 30),
        Message::Registered {
            granted_frames: 0,
            ..
        }
    ));
    (a, b)
}

#[test]
fn a_client_asked_back_frames_that_returns_them_settles_the_newcomer() {
    let daemon = Daemon::start(CONFIG);
    let (mut a, mut b) = a_holds_everything_and_b_needs_30(&daemon);
    let Message::ReclaimOrder {
        region,
        frames,
        deadline_ms,
    } = a.event()
    else {
        panic!("expected a reclaim order")
    };
    assert_eq!((region, frames), (RegionId(1), 30));
    assert!((1..=300).contains(&deadline_ms), "{deadline_ms}");
    a.conn
        .send(&Message::Returned { region, frames }, &[])
        .unwrap();
    assert_eq!(
        b.event(),
        Message::Settled {
            region: RegionId(7),
            frames: 30,
            held_frames: 30
        }
    );
    // Nothing was forced: A is told nothing more.
    assert_eq!(a.recv_within(Duration::from_millis(500)), None);
    let s = daemon.status();
    let forced: u64 = s
        .clients
        .iter()
        .flat_map(|c| &c.regions)
        .map(|r| r.forced_frames)
        .sum();
    assert_eq!(forced, 0);
}

#[test]
fn a_client_that_does_not_answer_is_forced_after_the_deadline() {
    let daemon = Daemon::start(CONFIG);
    let start = Instant::now();
    let (mut a, mut b) = a_holds_everything_and_b_needs_30(&daemon);
    assert!(matches!(
        a.event(),
        Message::ReclaimOrder { frames: 30, .. }
    ));
    assert_eq!(
        b.event(),
        Message::Settled {
            region: RegionId(7),
            frames: 30,
            held_frames: 30
        }
    );
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        a.event(),
        Message::Forced {
            region: RegionId(1),
            frames: 30,
            held_frames: 70
        }
    );
    let s = daemon.status();
    assert_eq!(s.clients[0].regions[0].held_frames, 70);
    assert_eq!(s.clients[0].regions[0].forced_frames, 30);
}

/// The child's side of the SIGSTOP test: holds 90 frames above its
/// minimum, is stopped, and once continued expects the order then Forced.
#[test]
fn role_stopped_holder() {
    if !is_child() {
        return;
    }
    let socket = std::env::var("PP_SOCKET").unwrap();
    let mut c = Client {
        conn: pagepilot_transport::Connection::connect(socket.as_ref()).unwrap(),
        id: pagepilot_protocol::ClientId(0),
        events: Vec::new(),
    };
    assert!(matches!(c.request(&hello()), Message::Welcome { .. }));
    c.register(1, 10, 100);
    let granted = c.request(&Message::RequestFrames {
        region: RegionId(1),
        frames: 90,
    });
    assert!(matches!(granted, Message::Granted { frames: 90, .. }));
    // The test stops this process now; once it continues:
    assert!(matches!(
        c.event(),
        Message::ReclaimOrder { frames: 30, .. }
    ));
    assert_eq!(
        c.event(),
        Message::Forced {
            region: RegionId(1),
            frames: 30,
            held_frames: 70
        }
    );
}

#[test]
fn a_stopped_client_above_its_minimum_is_forced_and_reads_forced_once_continued() {
    let daemon = Daemon::start(CONFIG);
    let socket = daemon.socket.to_str().unwrap().to_owned();
    let mut child = spawn_role("role_stopped_holder", &[("PP_SOCKET", &socket)]);
    let pid = child.0.id();
    daemon.until("the child to hold 100 frames", |s| {
        s.clients
            .iter()
            .any(|c| c.pid == pid && c.regions.first().is_some_and(|r| r.held_frames == 100))
    });
    let stop = |sig| {
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    };
    stop(rustix::process::Signal::STOP);
    let mut b = daemon.client_as(10002);
    assert!(matches!(
        b.register(7, 30, 30),
        Message::Registered {
            granted_frames: 0,
            ..
        }
    ));
    // The frames go to the newcomer at the deadline, the holder stopped.
    assert_eq!(
        b.event(),
        Message::Settled {
            region: RegionId(7),
            frames: 30,
            held_frames: 30
        }
    );
    let s = daemon.status();
    let held = |pid| {
        s.clients
            .iter()
            .find(|c| c.pid == pid)
            .map(|c| c.regions[0].held_frames)
    };
    assert_eq!(held(pid), Some(70));
    stop(rustix::process::Signal::CONT);
    assert!(child.wait().success(), "the child did not read Forced");
}
