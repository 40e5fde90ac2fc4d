//! Frames coming back: a region unregistered, a client leaving with
//! `Goodbye` or dying (dependency order: its regions before it), frames
//! released, never the pinned ones.

mod common;

use common::*;
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{Message, RegionId};

const CONFIG: &str = SHARED_BUDGET;

#[test]
fn test_a_client_disconnecting_returns_every_frame_and_settles_newcomers() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    for r in 1..=3 {
        send(&mut core, a, region(r, 100, 400));
        send(
            &mut core,
            a,
            Message::RequestFrames {
                region: RegionId(r),
                frames: 200,
            },
        );
    }
    send(&mut core, a, pin(2, 0, 40960));
    assert_eq!(core.free_frames(), 100);
    let out = send(&mut core, b, region(9, 400, 400));
    assert_eq!(granted(&out), 100);
    // A dies before giving anything back: everything returns, B is settled.
    let out = core.disconnect(a).unwrap();
    assert_eq!(
        to(&out, b),
        vec![Message::Settled {
            region: RegionId(9),
            frames: 300,
            held_frames: 400
        }]
    );
    assert_eq!(core.free_frames(), 600);
    assert_eq!(core.tick(), vec![], "A's orders went with it");
    core.disconnect(b).unwrap();
    assert_eq!(core.free_frames(), core.total_frames());
    assert_eq!(core.held_frames(), 0);
    assert_eq!(
        core.disconnect(b),
        Err(pagepilot_daemon::CoreError::UnknownClient(b))
    );
}

#[test]
fn test_goodbye_unloads_the_clients_regions_and_is_echoed_before_closing() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 500, 500));
    let out = send(&mut core, a, Message::Goodbye);
    assert_eq!(
        (out.len(), &out[0].message, out[0].close),
        (1, &Message::Goodbye, true)
    );
    assert_eq!(core.free_frames(), 1000);
    assert_eq!(core.clients().count(), 0);
}

#[test]
fn test_unregistering_a_region_returns_its_frames_and_the_id_can_be_reused() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 100, 500));
    send(&mut core, a, request(1, 150));
    let out = send(
        &mut core,
        a,
        Message::UnregisterRegion {
            region: RegionId(1),
        },
    );
    assert_eq!(
        to(&out, a),
        vec![Message::Unregistered {
            region: RegionId(1),
            frames: 250
        }]
    );
    assert_eq!(core.free_frames(), 1000);
    assert_eq!(granted(&send(&mut core, a, region(1, 10, 10))), 10);
}

#[test]
fn test_release_gives_frames_back_but_never_pinned_ones() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 10, 100));
    send(&mut core, a, request(1, 50));
    let out = send(&mut core, a, release(1, 20));
    assert_eq!(
        out[0].message,
        Message::Released {
            region: RegionId(1),
            held_frames: 40
        }
    );
    send(&mut core, a, pin(1, 0, 10 * 4096));
    let out = send(&mut core, a, release(1, 1000));
    assert_eq!(
        out[0].message,
        Message::Released {
            region: RegionId(1),
            held_frames: 10
        }
    );
    send(&mut core, a, unpin(1, 0, 10 * 4096));
    let out = send(&mut core, a, release(1, 1000));
    assert_eq!(
        out[0].message,
        Message::Released {
            region: RegionId(1),
            held_frames: 0
        }
    );
    assert_eq!(core.free_frames(), 1000);
}

#[test]
fn test_shutdown_unloads_every_client_and_tells_each_before_closing() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 100, 1000));
    send(&mut core, a, request(1, 800));
    // B is short of its minimum when the daemon stops: no grant is sent.
    send(&mut core, b, region(1, 300, 300));
    let out = core.shutdown();
    assert_eq!(out.len(), 2);
    for (o, id) in out.iter().zip([a, b]) {
        assert_eq!((o.to, o.close), (id, true));
        assert!(
            matches!(&o.message, Message::Error(e) if e.code == pagepilot_protocol::ErrorCode::ShuttingDown)
        );
    }
    assert_eq!((core.free_frames(), core.clients().count()), (1000, 0));
    assert_eq!(core.next_deadline_ns(), None);
}
