//! Clients' fault counts (`Report`): notifications kept per region, from
//! which status gives faults per second and postponed faults.

mod common;

use common::*;
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{ClientId, ErrorCode, Kind, Message, RegionId, RegionStatus};

const CONFIG: &str = "[machine]\nbudget_frames = 100\n";

fn report(region: u32, faults: u64, postponed_faults: u64) -> Message {
    Message::Report {
        region: RegionId(region),
        faults,
        postponed_faults,
    }
}

fn region_status(core: &pagepilot_daemon::Core<&ManualClock>, client: ClientId) -> RegionStatus {
    let s = core.status();
    let c = s.clients.iter().find(|c| c.client == client).unwrap();
    c.regions[0]
}

#[test]
fn test_a_report_is_a_notification_and_status_shows_the_rate_between_the_last_two() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 10, 10));
    let r = region_status(&core, a);
    assert_eq!((r.faults_per_sec, r.postponed_faults), (0, 0));
    // The first report counts from the registration: 500 faults in 2 s.
    clock.advance(2_000 * MS);
    assert_eq!(send(&mut core, a, report(1, 500, 3)), vec![]);
    let r = region_status(&core, a);
    assert_eq!((r.faults_per_sec, r.postponed_faults), (250, 3));
    // Then between the last two: 1500 more in half a second.
    clock.advance(500 * MS);
    assert_eq!(send(&mut core, a, report(1, 2_000, 7)), vec![]);
    let r = region_status(&core, a);
    assert_eq!((r.faults_per_sec, r.postponed_faults), (3_000, 7));
}

#[test]
fn test_reports_at_the_same_instant_count_as_one_and_never_divide_by_zero() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 10, 10));
    // No time since registration: no rate yet.
    send(&mut core, a, report(1, 100, 0));
    assert_eq!(region_status(&core, a).faults_per_sec, 0);
    clock.advance(1_000 * MS);
    send(&mut core, a, report(1, 400, 0));
    send(&mut core, a, report(1, 600, 1));
    // 500 since the report at 0 in 1 s: the second report at that instant
    // replaced the first.
    let r = region_status(&core, a);
    assert_eq!((r.faults_per_sec, r.postponed_faults), (500, 1));
}

#[test]
fn test_a_count_going_backwards_gives_no_rate_rather_than_a_huge_one() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    send(&mut core, a, region(1, 10, 10));
    clock.advance(1_000 * MS);
    send(&mut core, a, report(1, 1_000, 0));
    clock.advance(1_000 * MS);
    send(&mut core, a, report(1, 10, 0));
    assert_eq!(region_status(&core, a).faults_per_sec, 0);
}

#[test]
fn test_a_report_for_an_unknown_region_is_refused_and_the_client_goes_on() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1, 1);
    let out = send(&mut core, a, report(9, 1, 0));
    assert_eq!(
        refusal(&out),
        (ErrorCode::UnknownRegion, Some(Kind::Report))
    );
    assert!(granted(&send(&mut core, a, region(1, 10, 10))) == 10);
}

#[test]
fn test_each_region_keeps_its_own_counts() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 1, 1), join(&mut core, 2, 2));
    send(&mut core, a, region(1, 10, 10));
    send(&mut core, b, region(1, 10, 10));
    clock.advance(1_000 * MS);
    send(&mut core, a, report(1, 40, 2));
    assert_eq!(region_status(&core, a).faults_per_sec, 40);
    let r = region_status(&core, b);
    assert_eq!((r.faults_per_sec, r.postponed_faults), (0, 0));
    // A region unregistered and registered again starts from nothing.
    send(
        &mut core,
        a,
        Message::UnregisterRegion {
            region: RegionId(1),
        },
    );
    send(&mut core, a, region(1, 10, 10));
    let r = region_status(&core, a);
    assert_eq!((r.faults_per_sec, r.postponed_faults), (0, 0));
}
