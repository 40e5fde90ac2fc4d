//! Several clients sharing the daemon's budget: minimums, requests, FAFR
//! reclamation across clients, forced reclamation past a deadline, and
//! newcomers settled as frames come back.

mod common;

use common::*;
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{ErrorCode, Kind, Message, RegionId};

const CONFIG: &str = SHARED_BUDGET;

#[test]
fn test_several_clients_share_the_budget_each_with_its_min_frame() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b, c) = (
        join(&mut core, 1, 1),
        join(&mut core, 2, 2),
        join(&mut core, 3, 3),
    );
    assert_eq!(granted(&send(&mut core, a, region(1, 200, 500))), 200);
    assert_eq!(granted(&send(&mut core, b, region(1, 300, 500))), 300);
    assert_eq!(granted(&send(&mut core, c, region(7, 400, 500))), 400);
    assert_eq!(core.free_frames(), 100);
    // Beyond the minimum, Request is granted from what is free, partially.
    assert_eq!(granted(&send(&mut core, a, request(1, 150))), 100);
    assert_eq!(granted(&send(&mut core, b, request(1, 10))), 0);
    assert_eq!(
        (core.frames_of(a), core.frames_of(b), core.frames_of(c)),
        (Some(300), Some(300), Some(400))
    );
    assert_eq!(core.held_frames() + core.free_frames(), 1000);
}

#[test]
fn test_a_min_frame_that_does_not_fit_beside_the_others_is_refused() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 600, 600));
    let out = send(&mut core, b, region(1, 500, 500));
    assert_eq!(
        refusal(&out),
        (ErrorCode::MinFrameDoesNotFit, Some(Kind::RegisterRegion))
    );
    let Message::Error(e) = &out[0].message else {
        unreachable!()
    };
    assert_eq!(e.region, Some(RegionId(1)));
    assert!(e.message.contains("minFrame of 500"), "{}", e.message);
    // Nothing was kept of the refused region: the same id registers at a size that fits.
    assert_eq!(granted(&send(&mut core, b, region(1, 400, 400))), 400);
    assert_eq!(core.free_frames(), 0);
}

#[test]
fn test_a_newcomer_short_of_its_minimum_gets_frames_as_others_return_them() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 100, 1000));
    send(&mut core, a, request(1, 800));
    assert_eq!(core.free_frames(), 100);
    // B's minimum of 300: 100 now, 200 asked back from A by the deadline.
    let out = send(&mut core, b, region(5, 300, 300));
    assert_eq!(granted(&out), 100);
    assert_eq!(orders(&out, a), vec![(1, 200)]);
    assert!(matches!(
        to(&out, a)[0],
        Message::ReclaimOrder {
            deadline_ms: 50,
            ..
        }
    ));
    // A gives them back: B is granted them, unasked (no reply to A).
    let out = send(
        &mut core,
        a,
        Message::Returned {
            region: RegionId(1),
            frames: 200,
        },
    );
    assert_eq!(to(&out, a), vec![]);
    assert_eq!(
        to(&out, b),
        vec![Message::Settled {
            region: RegionId(5),
            frames: 200,
            held_frames: 300
        }]
    );
    assert_eq!(
        (core.frames_of(a), core.frames_of(b)),
        (Some(700), Some(300))
    );
}

#[test]
fn test_fafr_reclaims_from_the_first_registered_client_first() {
    let clock = ManualClock::at(0);
    let mut core = core(
        "[machine]\nbudget_frames = 1000\npartition_burst_frames = 100\n",
        &clock,
    );
    let (a, b, c) = (
        join(&mut core, 1, 1),
        join(&mut core, 2, 2),
        join(&mut core, 3, 3),
    );
    for id in [a, b, c] {
        send(&mut core, id, region(1, 50, 500));
    }
    // 100 above minimums: at the watermark, nothing asked back.
    let out = send(&mut core, a, request(1, 100));
    assert_eq!((granted(&out), out.len()), (100, 1));
    // B's 80 more pass the watermark by 80: asked of A, who came first.
    let out = send(&mut core, b, request(1, 80));
    assert_eq!(granted(&out), 80);
    assert_eq!((orders(&out, a), orders(&out, b)), (vec![(1, 80)], vec![]));
    // C's 60 more: A has 20 left to ask above its minimum, then B.
    let out = send(&mut core, c, request(1, 60));
    assert_eq!(
        (orders(&out, a), orders(&out, b), orders(&out, c)),
        (vec![(1, 20)], vec![(1, 40)], vec![])
    );
}

#[test]
fn test_a_client_that_misses_its_deadline_is_forced() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 100, 1000));
    send(&mut core, a, request(1, 900));
    let out = send(&mut core, b, region(2, 300, 300));
    assert_eq!(orders(&out, a), vec![(1, 300)]);
    assert_eq!(core.next_deadline_ns(), Some(50 * MS));
    // A gives back 120 of 300 in time, then hangs.
    send(
        &mut core,
        a,
        Message::Returned {
            region: RegionId(1),
            frames: 120,
        },
    );
    clock.advance(49 * MS);
    assert_eq!(core.tick(), vec![]);
    clock.advance(MS);
    let out = core.tick();
    assert_eq!(
        to(&out, a),
        vec![Message::Forced {
            region: RegionId(1),
            frames: 180,
            held_frames: 700
        }]
    );
    assert_eq!(
        to(&out, b),
        vec![Message::Settled {
            region: RegionId(2),
            frames: 180,
            held_frames: 300
        }]
    );
    assert_eq!(
        (core.frames_of(a), core.frames_of(b)),
        (Some(700), Some(300))
    );
    let status = core.status();
    let ra = &status.clients[0].regions[0];
    assert_eq!((ra.reclaimed_frames, ra.forced_frames), (120, 180));
    assert_eq!(core.next_deadline_ns(), None);
    assert_eq!(core.tick(), vec![], "forced once");
}

#[test]
fn test_frames_released_while_an_order_is_pending_answer_it_and_force_never_cuts_below_min_frame() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 100, 1000));
    send(&mut core, a, request(1, 300));
    let out = send(&mut core, b, region(1, 800, 800));
    assert_eq!((granted(&out), orders(&out, a)), (600, vec![(1, 200)]));
    // A releases 300 unasked instead of returning 200: the order is answered.
    let out = send(&mut core, a, release(1, 300));
    assert_eq!(
        to(&out, a),
        vec![Message::Released {
            region: RegionId(1),
            held_frames: 100
        }]
    );
    assert_eq!(
        to(&out, b),
        vec![Message::Settled {
            region: RegionId(1),
            frames: 200,
            held_frames: 800
        }]
    );
    assert_eq!(core.next_deadline_ns(), None);
    clock.advance(1000 * MS);
    assert_eq!(core.tick(), vec![]);
    assert_eq!(
        (core.frames_of(a), core.frames_of(b)),
        (Some(100), Some(800))
    );
}

#[test]
fn test_a_newcomer_cannot_pin_frames_it_does_not_hold_yet() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 0, 1000));
    send(&mut core, a, request(1, 995));
    assert_eq!(granted(&send(&mut core, b, region(1, 50, 50))), 5);
    let pin = |pages: u64| pin(1, 0, pages * 4096);
    assert_eq!(
        refusal(&send(&mut core, b, pin(6))).0,
        pagepilot_protocol::ErrorCode::PinQuota
    );
    assert_eq!(
        send(&mut core, b, pin(5))[0].message,
        Message::Pinned {
            region: RegionId(1),
            pinned_frames: 5
        }
    );
}
