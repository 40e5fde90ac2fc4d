//! The conversation with a client: the handshake, messages a client may not
//! send, requests out of turn, unknown regions; each answered with one
//! error while the core keeps serving everyone else.

mod common;

use common::*;
use pagepilot_daemon::{CoreError, Credentials, Session};
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{
    encode, ClientId, ErrorCode, HolderId, Kind, Message, Quotas, RegionId, StatusReply,
};

const CONFIG: &str = "[machine]\nbudget_frames = 100\n";

#[test]
fn test_hello_is_welcomed_with_the_highest_common_version_and_the_clients_quotas() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let id = core
        .connect(Credentials {
            pid: 7,
            uid: 1,
            gid: 1,
        })
        .unwrap();
    assert_eq!(core.session(id), Some(Session::Connected));
    let out = send(
        &mut core,
        id,
        Message::Hello {
            versions: vec![1, 2, 9],
            pid: Some(7),
        },
    );
    // The defaults: half the budget, 20% of a processor in fault limits.
    let quotas = Quotas {
        frames: 50,
        pinned_frames: 0,
        fault_rate: 20_000,
        regions: 64,
    };
    assert_eq!(
        out[0].message,
        Message::Welcome {
            version: 1,
            client: id,
            quotas
        }
    );
    assert!(!out[0].close);
    assert_eq!(core.session(id), Some(Session::Welcomed { version: 1 }));
}

#[test]
fn test_a_hello_with_no_common_version_is_refused_and_the_connection_closed() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let id = core.connect(Credentials::default()).unwrap();
    let out = send(
        &mut core,
        id,
        Message::Hello {
            versions: vec![2, 3],
            pid: None,
        },
    );
    assert_eq!(
        refusal(&out),
        (ErrorCode::UnsupportedVersion, Some(Kind::Hello))
    );
    assert!(out[0].close);
    let Message::Error(e) = &out[0].message else {
        unreachable!()
    };
    assert!(
        e.message.contains("[2, 3]") && e.message.contains("[1]"),
        "{}",
        e.message
    );
    assert_eq!(
        core.on_message(id, Message::Status),
        Err(CoreError::UnknownClient(id))
    );
}

#[test]
fn test_requests_before_hello_and_a_second_hello_are_unexpected() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let id = core.connect(Credentials::default()).unwrap();
    let out = send(&mut core, id, region(1, 1, 1));
    assert_eq!(
        refusal(&out),
        (ErrorCode::UnexpectedMessage, Some(Kind::RegisterRegion))
    );
    assert_eq!(core.free_frames(), 100);
    send(
        &mut core,
        id,
        Message::Hello {
            versions: vec![1],
            pid: None,
        },
    );
    let out = send(
        &mut core,
        id,
        Message::Hello {
            versions: vec![1],
            pid: None,
        },
    );
    assert_eq!(
        refusal(&out),
        (ErrorCode::UnexpectedMessage, Some(Kind::Hello))
    );
    assert_eq!(core.session(id), Some(Session::Welcomed { version: 1 }));
}

#[test]
fn test_a_message_a_client_may_not_send_is_refused_and_others_are_still_served() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, b, region(1, 10, 50));
    let daemons = [
        Message::Welcome {
            version: 1,
            client: ClientId(9),
            quotas: Quotas::default(),
        },
        Message::error(ErrorCode::Internal, None, None, "from a client"),
        Message::Registered {
            region: RegionId(1),
            holder: HolderId(0),
            granted_frames: 100,
        },
        Message::Unregistered {
            region: RegionId(1),
            frames: 1,
        },
        Message::Granted {
            region: RegionId(1),
            frames: 100,
            held_frames: 100,
        },
        Message::Released {
            region: RegionId(1),
            held_frames: 0,
        },
        Message::ReclaimOrder {
            region: RegionId(1),
            frames: 1,
            deadline_ms: 1,
        },
        Message::Forced {
            region: RegionId(1),
            frames: 1,
            held_frames: 0,
        },
        Message::Pinned {
            region: RegionId(1),
            pinned_frames: 1,
        },
        Message::StatusReply(StatusReply::default()),
    ];
    for m in daemons {
        let kind = m.kind();
        let out = send(&mut core, a, m);
        assert_eq!(refusal(&out), (ErrorCode::UnexpectedMessage, Some(kind)));
        assert_eq!(out[0].to, a);
        assert!(!out[0].close);
    }
    assert_eq!(
        core.frames_of(a),
        Some(0),
        "no frame granted by a forged message"
    );
    // B, and A itself, are served as before.
    assert_eq!(granted(&send(&mut core, b, request(1, 5))), 5);
    assert_eq!(granted(&send(&mut core, a, region(1, 10, 10))), 10);
}

#[test]
fn test_requests_naming_a_region_the_client_has_not_registered_are_unknown_region() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, b, region(1, 10, 50));
    // B's region 1 is not A's.
    let r = RegionId(1);
    let requests = [
        Message::UnregisterRegion { region: r },
        Message::RequestFrames {
            region: r,
            frames: 1,
        },
        Message::ReleaseFrames {
            region: r,
            frames: 1,
        },
        Message::Returned {
            region: r,
            frames: 1,
        },
        Message::Pin {
            region: r,
            offset: 0,
            len: 1,
        },
        Message::Unpin {
            region: r,
            offset: 0,
            len: 1,
        },
    ];
    for m in requests {
        let kind = m.kind();
        let out = send(&mut core, a, m);
        assert_eq!(refusal(&out), (ErrorCode::UnknownRegion, Some(kind)));
        let Message::Error(e) = &out[0].message else {
            unreachable!()
        };
        assert_eq!(e.region, Some(r));
    }
    assert_eq!(core.frames_of(b), Some(10));
}

#[test]
fn test_a_region_id_registered_twice_is_refused() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 10, 50));
    let out = send(&mut core, a, region(1, 5, 5));
    assert_eq!(
        refusal(&out),
        (ErrorCode::RegionExists, Some(Kind::RegisterRegion))
    );
    assert_eq!(core.frames_of(a), Some(10));
}

#[test]
fn test_returned_is_a_notification_answered_only_when_refused() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 10, 50));
    send(&mut core, a, request(1, 20));
    assert_eq!(
        send(
            &mut core,
            a,
            Message::Returned {
                region: RegionId(1),
                frames: 5
            }
        ),
        vec![]
    );
    assert_eq!(core.frames_of(a), Some(25));
}

#[test]
fn test_status_lists_each_client_and_region_and_always_encodes() {
    let clock = ManualClock::at(0);
    let mut core = core(
        "[machine]\nbudget_frames = 100000\n[default]\nregions = 1000\npinned_frames = 10\n",
        &clock,
    );
    let a = core
        .connect(Credentials {
            pid: 42,
            uid: 1000,
            gid: 100,
        })
        .unwrap();
    send(
        &mut core,
        a,
        Message::Hello {
            versions: vec![1],
            pid: None,
        },
    );
    send(&mut core, a, region(3, 20, 40));
    send(&mut core, a, pin(3, 0, 8192));
    let out = send(&mut core, a, Message::Status);
    let Message::StatusReply(s) = &out[0].message else {
        panic!("{out:?}")
    };
    assert_eq!(
        (s.total_frames, s.free_frames, s.truncated),
        (100000, 99980, false)
    );
    assert_eq!(
        (s.clients[0].client, s.clients[0].pid, s.clients[0].uid),
        (a, 42, 1000)
    );
    let r = &s.clients[0].regions[0];
    assert_eq!(
        (r.region, r.min_frames, r.held_frames, r.pinned_frames),
        (RegionId(3), 20, 20, 2)
    );
    // Past the protocol's bounds (512 regions), the reply is cut and says so.
    for i in 0..600 {
        send(&mut core, a, region(100 + i, 1, 1));
    }
    let s = core.status();
    assert!(s.truncated);
    assert_eq!(s.clients[0].regions.len(), 512);
    assert!(encode(&Message::StatusReply(s)).is_ok());
}
