//! The system resource manager's quotas, per uid, per gid and by default,
//! from a TOML configuration: frames, regions, pinned frames, fault rate,
//! and RAPHA's admission control; each refusal with its error code.

mod common;

use common::*;
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{ErrorCode, Kind, Message, Quotas, RegionId, RegisterRegion};

const CONFIG: &str = "
[machine]
budget_frames = 10000
partition_burst_frames = 10000
fault_unit_us = 100
fault_period_ms = 100

[default]
frames = 1000
pinned_frames = 16
fault_rate = 5000
regions = 8
cpu_reserve_ppm = 1000000

[uid.1000]
frames = 300
pinned_frames = 8
regions = 2

[gid.100]
frames = 2000
";

fn welcome_quotas(core: &mut pagepilot_daemon::Core<&ManualClock>, uid: u32, gid: u32) -> Quotas {
    let id = core
        .connect(pagepilot_daemon::Credentials { pid: 1, uid, gid })
        .unwrap();
    match &send(
        core,
        id,
        Message::Hello {
            versions: vec![1],
            pid: None,
        },
    )[0]
    .message
    {
        Message::Welcome { quotas, .. } => *quotas,
        other => panic!("{other:?}"),
    }
}

#[test]
fn test_quotas_come_from_the_uid_entry_else_the_gid_entry_else_the_default() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let user = Quotas {
        frames: 300,
        pinned_frames: 8,
        fault_rate: 5000,
        regions: 2,
    };
    let group = Quotas {
        frames: 2000,
        pinned_frames: 16,
        fault_rate: 5000,
        regions: 8,
    };
    let default = Quotas {
        frames: 1000,
        pinned_frames: 16,
        fault_rate: 5000,
        regions: 8,
    };
    // The uid's entry wins over its group's.
    assert_eq!(welcome_quotas(&mut core, 1000, 100), user);
    assert_eq!(welcome_quotas(&mut core, 2000, 100), group);
    assert_eq!(welcome_quotas(&mut core, 3000, 3000), default);
}

#[test]
fn test_a_users_frames_quota_bounds_its_minimums_and_its_requests() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1000, 1000);
    assert_eq!(granted(&send(&mut core, a, region(1, 200, 5000))), 200);
    // Minimums beyond the quota: 200 + 200 > 300.
    let out = send(&mut core, a, region(2, 200, 200));
    assert_eq!(
        refusal(&out),
        (ErrorCode::BeyondQuota, Some(Kind::RegisterRegion))
    );
    // Requests are granted up to the quota, then refused.
    let out = send(&mut core, a, request(1, 500));
    assert_eq!(granted(&out), 100);
    let out = send(&mut core, a, request(1, 1));
    assert_eq!(
        refusal(&out),
        (ErrorCode::BeyondQuota, Some(Kind::RequestFrames))
    );
    assert_eq!(ErrorCode::BeyondQuota.errno(), 122, "EDQUOT");
    assert_eq!(core.frames_of(a), Some(300));
    // Another user is not held back by this one's quota.
    let b = join(&mut core, 3000, 3000);
    assert_eq!(granted(&send(&mut core, b, region(1, 1000, 1000))), 1000);
}

#[test]
fn test_a_request_is_granted_no_more_than_the_regions_budget() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 3000, 3000);
    send(&mut core, a, region(1, 10, 50));
    assert_eq!(granted(&send(&mut core, a, request(1, 100))), 40);
    assert_eq!(granted(&send(&mut core, a, request(1, 1))), 0);
}

#[test]
fn test_a_users_regions_quota_refuses_one_region_too_many() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1000, 1000);
    send(&mut core, a, region(1, 1, 1));
    send(&mut core, a, region(2, 1, 1));
    let out = send(&mut core, a, region(3, 1, 1));
    assert_eq!(
        refusal(&out),
        (ErrorCode::BeyondQuota, Some(Kind::RegisterRegion))
    );
    // A region leaving makes room for another.
    send(
        &mut core,
        a,
        Message::UnregisterRegion {
            region: RegionId(2),
        },
    );
    assert_eq!(granted(&send(&mut core, a, region(3, 1, 1))), 1);
}

#[test]
fn test_pins_beyond_the_users_pin_quota_are_refused_with_edquot() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1000, 1000);
    send(&mut core, a, region(1, 100, 100));
    send(&mut core, a, region(2, 100, 100));
    let pin = |region, page: u64, pages: u64| Message::Pin {
        region: RegionId(region),
        offset: page * 4096,
        len: pages * 4096,
    };
    assert_eq!(
        send(&mut core, a, pin(1, 0, 5))[0].message,
        Message::Pinned {
            region: RegionId(1),
            pinned_frames: 5
        }
    );
    // Pinning pages already pinned adds nothing.
    assert_eq!(
        send(&mut core, a, pin(1, 2, 3))[0].message,
        Message::Pinned {
            region: RegionId(1),
            pinned_frames: 5
        }
    );
    // The quota (8) is the client's, over its regions: 5 + 4 > 8.
    let out = send(&mut core, a, pin(2, 0, 4));
    assert_eq!(refusal(&out), (ErrorCode::PinQuota, Some(Kind::Pin)));
    assert_eq!(ErrorCode::PinQuota.errno(), 122, "EDQUOT");
    assert_eq!(
        send(&mut core, a, pin(2, 0, 3))[0].message,
        Message::Pinned {
            region: RegionId(2),
            pinned_frames: 3
        }
    );
    assert_eq!(core.pinned_of(a), Some(8));
    // Unpinning makes room again.
    let unpin = unpin(1, 0, 2 * 4096);
    assert_eq!(
        send(&mut core, a, unpin)[0].message,
        Message::Pinned {
            region: RegionId(1),
            pinned_frames: 3
        }
    );
    assert_eq!(
        send(&mut core, a, pin(2, 10, 2))[0].message,
        Message::Pinned {
            region: RegionId(2),
            pinned_frames: 5
        }
    );
}

#[test]
fn test_pins_must_fit_in_the_regions_min_frame_and_unpins_must_be_pinned() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 3000, 3000);
    send(&mut core, a, region(1, 4, 100));
    // Pinned pages are part of the guaranteed minimum: never reclaimed.
    let out = send(&mut core, a, pin(1, 0, 5 * 4096));
    assert_eq!(refusal(&out), (ErrorCode::PinQuota, Some(Kind::Pin)));
    let out = send(&mut core, a, unpin(1, 0, 1));
    assert_eq!(refusal(&out), (ErrorCode::BadRange, Some(Kind::Unpin)));
    let out = send(&mut core, a, pin(9, 0, 1));
    assert_eq!(refusal(&out), (ErrorCode::UnknownRegion, Some(Kind::Pin)));
}

#[test]
fn test_fault_limits_beyond_the_fault_rate_quota_are_refused() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 3000, 3000);
    let limited = |region, limit, period_us| {
        Message::RegisterRegion(RegisterRegion {
            region: RegionId(region),
            min_frames: 1,
            budget_frames: 1,
            fault_limit: limit,
            fault_period_us: period_us,
            ..RegisterRegion::default()
        })
    };
    // 300 faults per 100 ms: 3000/s of the 5000/s quota.
    assert_eq!(granted(&send(&mut core, a, limited(1, 300, 100_000))), 1);
    let out = send(&mut core, a, limited(2, 300, 100_000));
    assert_eq!(
        refusal(&out),
        (ErrorCode::BeyondQuota, Some(Kind::RegisterRegion))
    );
    assert_eq!(granted(&send(&mut core, a, limited(2, 200, 100_000))), 1);
}

#[test]
fn test_a_reserve_that_rapha_cannot_admit_is_refused_with_ebusy() {
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let (a, b) = (join(&mut core, 3000, 3000), join(&mut core, 3001, 3001));
    let reserve = |region, ppm| {
        Message::RegisterRegion(RegisterRegion {
            region: RegionId(region),
            min_frames: 1,
            budget_frames: 1,
            cpu_reserve_ppm: ppm,
            ..RegisterRegion::default()
        })
    };
    send(&mut core, a, reserve(1, 700_000));
    // RAPHA's limit is the system's, across clients: 0.7 + 0.4 > 1.
    let out = send(&mut core, b, reserve(1, 400_000));
    assert_eq!(
        refusal(&out),
        (ErrorCode::ReserveDoesNotFit, Some(Kind::RegisterRegion))
    );
    assert_eq!(ErrorCode::ReserveDoesNotFit.errno(), 16, "EBUSY");
    // Nothing of the refused region was kept, in either manager.
    assert_eq!(core.frames_of(b), Some(0));
    // When A leaves, its reserve leaves with it.
    core.disconnect(a).unwrap();
    assert_eq!(granted(&send(&mut core, b, reserve(1, 400_000))), 1);
}

#[test]
fn test_frames_held_above_minimums_count_against_the_quota_of_a_new_region() {
    // Found by the accounting proptest: minimums alone fitted the quota.
    let clock = ManualClock::at(0);
    let mut core = core(CONFIG, &clock);
    let a = join(&mut core, 1000, 1000);
    send(&mut core, a, region(1, 100, 300));
    send(&mut core, a, request(1, 100));
    // 200 held + a minimum of 150 > 300, though 100 + 150 minimums fit.
    let out = send(&mut core, a, region(2, 150, 150));
    assert_eq!(
        refusal(&out),
        (ErrorCode::BeyondQuota, Some(Kind::RegisterRegion))
    );
    // Released frames make room.
    send(&mut core, a, release(1, 50));
    assert_eq!(granted(&send(&mut core, a, region(2, 150, 150))), 150);
}

#[test]
fn test_a_newcomers_minimum_still_owed_counts_against_its_clients_requests() {
    let clock = ManualClock::at(0);
    let mut core = core(
        "[machine]\nbudget_frames = 100\npartition_burst_frames = 100\n[default]\nframes = 100\n\
         [uid.1]\nframes = 60\n",
        &clock,
    );
    let (a, b) = (join(&mut core, 2, 2), join(&mut core, 1, 1));
    send(&mut core, a, region(1, 0, 100));
    send(&mut core, a, request(1, 100));
    // B's minimum of 50 is owed (nothing is free): its quota room is 10.
    assert_eq!(granted(&send(&mut core, b, region(1, 50, 50))), 0);
    send(&mut core, b, region(2, 0, 100));
    send(&mut core, a, release(1, 100));
    assert_eq!(core.frames_of(b), Some(50), "the newcomer settled first");
    assert_eq!(granted(&send(&mut core, b, request(2, 100))), 10);
    assert_eq!(core.frames_of(b), Some(60));
}

#[test]
fn test_connections_and_descriptors_add_up_per_user_and_against_the_daemons_budget() {
    let clock = ManualClock::at(0);
    let mut core = core(
        "[machine]\nbudget_frames = 100\n[default]\nconnections = 3\ndescriptors = 8\n",
        &clock,
    );
    let peer = |uid| pagepilot_daemon::Credentials {
        pid: 1,
        uid,
        gid: uid,
    };
    // Two connections hold 4 descriptors; a region with three files 3 more.
    let a = core.connect(peer(1)).unwrap();
    send(
        &mut core,
        a,
        Message::Hello {
            versions: vec![1],
            pid: None,
        },
    );
    core.connect(peer(1)).unwrap();
    let files = pagepilot_protocol::RegionFiles {
        memory: true,
        backing: true,
        dirty: true,
    };
    let with_files = |id| {
        Message::RegisterRegion(RegisterRegion {
            region: RegionId(id),
            min_frames: 1,
            budget_frames: 1,
            files,
            ..RegisterRegion::default()
        })
    };
    assert_eq!(granted(&send(&mut core, a, with_files(1))), 1);
    assert_eq!(
        core.usage(pagepilot_daemon::AccountId::User(1)).descriptors,
        7
    );
    // A third connection would make 9 of 8; so would another region.
    let refused = core.connect(peer(1)).unwrap_err();
    assert!(refused.to_string().contains("descriptors"), "{refused}");
    assert_eq!(
        refusal(&send(&mut core, a, with_files(2))),
        (ErrorCode::BeyondQuota, Some(Kind::RegisterRegion))
    );
    // Another user is counted apart, until the daemon's own budget ends.
    core.set_descriptor_budget(9);
    assert!(core.connect(peer(2)).is_ok());
    let full = core.connect(peer(3)).unwrap_err();
    assert!(full.to_string().contains("RLIMIT_NOFILE"), "{full}");
    // Leaving gives them back.
    core.disconnect(a).unwrap();
    assert_eq!(
        core.usage(pagepilot_daemon::AccountId::User(1)).descriptors,
        2
    );
    assert!(core.connect(peer(3)).is_ok());
}
