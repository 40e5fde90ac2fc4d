//! The daemon's TOML configuration: defaults, inheritance from `[default]`,
//! and a refusal naming the field and its line for each bound.

use pagepilot_daemon::{
    AccountId, Config, ConfigError, Limits, DEFAULT_CONNECTIONS, DEFAULT_DEADLINE_MS,
    DEFAULT_DESCRIPTORS, DEFAULT_PROCESSOR_SHARE_PPM, DEFAULT_REGIONS,
};
use pagepilot_protocol::{Quotas, MAX_FAULT_RATE, PPM};

#[test]
fn test_a_budget_alone_leaves_room_for_other_users_and_default_timing() {
    let c = Config::parse("[machine]\nbudget_frames = 1000\n").unwrap();
    assert_eq!(
        c.machine.partition_burst_frames, 500,
        "HiPEC: half the pool"
    );
    assert_eq!(c.machine.deadline_ms, DEFAULT_DEADLINE_MS);
    let share = Limits {
        frames: 500,
        pinned_frames: 0,
        // 20% of a processor at 10 us a fault.
        fault_rate: 20_000,
        regions: DEFAULT_REGIONS,
        cpu_reserve_ppm: DEFAULT_PROCESSOR_SHARE_PPM,
        connections: DEFAULT_CONNECTIONS,
        descriptors: DEFAULT_DESCRIPTORS,
    };
    assert_eq!(c.quotas_for(1, 2), share);
    // A single trusted user's configuration says so.
    let all = Config::with_budget(1000).unwrap().quotas_for(1, 2);
    assert_eq!(
        (all.frames, all.fault_rate, all.cpu_reserve_ppm),
        (1000, MAX_FAULT_RATE, PPM)
    );
}

#[test]
fn test_a_shared_group_is_one_account_and_a_user_entry_its_own() {
    let c = Config::parse(
        "[machine]\nbudget_frames = 1000\n[gid.50]\nshared = true\nframes = 300\n\
         [gid.60]\nframes = 200\n[uid.7]\nframes = 100\n",
    )
    .unwrap();
    assert_eq!(c.account_for(5, 50).0, AccountId::Group(50));
    assert_eq!(c.account_for(6, 50).0, AccountId::Group(50));
    assert_eq!(c.account_for(7, 50), (AccountId::User(7), c.uid[&7]));
    assert_eq!(c.account_for(5, 60).0, AccountId::User(5));
    assert_eq!(c.account_for(5, 60).1.frames, 200);
    let e = Config::parse("[machine]\nbudget_frames = 1\n[uid.3]\nshared = true\n").unwrap_err();
    assert!(e.to_string().contains("uid.3.shared"), "{e}");
}

#[test]
fn test_fields_left_out_of_an_entry_are_inherited_from_the_default() {
    let c = Config::parse(
        "[machine]
budget_frames = 1000
deadline_ms = 250
partition_burst_frames = 100

[default]
frames = 400
pinned_frames = 10
fault_rate = 7
regions = 3

[uid.0]
frames = 1000
pinned_frames = 1000

[gid.50]
regions = 9
",
    )
    .unwrap();
    assert_eq!(
        (c.machine.deadline_ms, c.machine.partition_burst_frames),
        (250, 100)
    );
    assert_eq!(
        c.quotas_for(0, 50).quotas(),
        Quotas {
            frames: 1000,
            pinned_frames: 1000,
            fault_rate: 7,
            regions: 3
        }
    );
    assert_eq!(
        c.quotas_for(5, 50).quotas(),
        Quotas {
            frames: 400,
            pinned_frames: 10,
            fault_rate: 7,
            regions: 9
        }
    );
    assert_eq!(c.quotas_for(5, 51), c.default_quotas);
}

#[test]
fn test_an_inherited_pin_quota_above_an_entrys_frames_is_cut_to_them() {
    let c = Config::parse(
        "[machine]\nbudget_frames = 1000\n[default]\npinned_frames = 100\n[uid.1]\nframes = 10\n",
    )
    .unwrap();
    assert_eq!(c.quotas_for(1, 1).pinned_frames, 10);
}

fn refusal(text: &str) -> ConfigError {
    Config::parse(text).unwrap_err()
}

#[test]
fn test_a_quota_beyond_the_budget_is_refused_naming_the_field_and_its_line() {
    let e = refusal("[machine]\nbudget_frames = 1000\n\n[uid.1000]\nframes = 1001\n");
    assert_eq!(
        e,
        ConfigError::OutOfRange {
            field: "uid.1000.frames".into(),
            line: Some(5),
            value: 1001,
            min: 0,
            max: 1000
        }
    );
    assert_eq!(
        e.to_string(),
        "config line 5: uid.1000.frames = 1001 is outside 0..=1000"
    );
}

#[test]
fn test_pinned_frames_beyond_the_entrys_frames_are_refused() {
    let e =
        refusal("[machine]\nbudget_frames = 1000\n[default]\nframes = 10\npinned_frames = 11\n");
    assert!(
        matches!(&e, ConfigError::OutOfRange { field, line: Some(5), value: 11, max: 10, .. } if field == "default.pinned_frames"),
        "{e:?}"
    );
}

#[test]
fn test_machine_bounds_are_checked() {
    let cases = [
        ("budget_frames = 0", "machine.budget_frames"),
        ("budget_frames = 1099511627777", "machine.budget_frames"),
        (
            "budget_frames = 10\npartition_burst_frames = 11",
            "machine.partition_burst_frames",
        ),
        ("budget_frames = 10\ndeadline_ms = 0", "machine.deadline_ms"),
        (
            "budget_frames = 10\ndeadline_ms = 600001",
            "machine.deadline_ms",
        ),
        (
            "budget_frames = 10\nfault_unit_us = 0",
            "machine.fault_unit_us",
        ),
        (
            "budget_frames = 10\nfault_period_ms = 0",
            "machine.fault_period_ms",
        ),
    ];
    for (body, name) in cases {
        match refusal(&format!("[machine]\n{body}\n")) {
            ConfigError::OutOfRange {
                field,
                line: Some(_),
                ..
            } => assert_eq!(field, name, "{body}"),
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn test_quota_bounds_are_checked() {
    for (body, name) in [
        ("regions = 1048577", "default.regions"),
        ("fault_rate = 4294967297", "default.fault_rate"),
    ] {
        match refusal(&format!(
            "[machine]\nbudget_frames = 10\n[default]\n{body}\n"
        )) {
            ConfigError::OutOfRange {
                field,
                line: Some(4),
                ..
            } => assert_eq!(field, name),
            other => panic!("{body}: {other:?}"),
        }
    }
}

#[test]
fn test_a_uid_that_is_not_a_number_is_refused_with_its_line() {
    let e = refusal("[machine]\nbudget_frames = 10\n[uid.alice]\nframes = 1\n");
    assert_eq!(
        e,
        ConfigError::BadId {
            table: "uid",
            key: "alice".into(),
            line: Some(3)
        }
    );
    let e = refusal("[machine]\nbudget_frames = 10\n[gid.-1]\nframes = 1\n");
    assert!(
        matches!(e, ConfigError::BadId { table: "gid", .. }),
        "{e:?}"
    );
}

#[test]
fn test_syntax_errors_unknown_fields_and_negative_numbers_name_their_line() {
    for (text, line, word) in [
        (
            "[machine]\nbudget_frames = 10\n[default]\nframes = -1\n",
            4,
            "",
        ),
        (
            "[machine]\nbudget_frames = 10\n[default]\nfarmes = 1\n",
            4,
            "farmes",
        ),
        ("[machine]\nbudget_frames = 10\n\n[bogus]\n", 4, "bogus"),
        ("[machine]\nbudget_frames = = 10\n", 2, ""),
    ] {
        match refusal(text) {
            ConfigError::Syntax {
                line: Some(l),
                message,
            } => {
                assert_eq!(l, line, "{text}: {message}");
                assert!(message.contains(word), "{message}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    assert!(
        matches!(refusal(""), ConfigError::Syntax { .. }),
        "[machine] is required"
    );
}

#[test]
fn test_a_budget_given_apart_replaces_the_files_and_its_defaults_follow() {
    let text = "[machine]\nbudget_frames = 1000\n[uid.5]\nframes = 300\n";
    let c = Config::parse_with_budget(text, Some(400)).unwrap();
    assert_eq!(
        (c.machine.budget_frames, c.machine.partition_burst_frames),
        (400, 200)
    );
    assert_eq!(c.default_quotas.frames, 200, "half the budget in force");
    assert_eq!(c.uid[&5].frames, 300);
    // A file of quotas alone is enough then; without it, the budget is missing.
    let quotas = "[default]\nframes = 10\n";
    assert_eq!(
        Config::parse_with_budget(quotas, Some(50))
            .unwrap()
            .machine
            .budget_frames,
        50
    );
    let e = Config::parse(quotas).unwrap_err();
    assert!(e.to_string().contains("budget_frames"), "{e}");
    // Quotas are checked against the budget in force.
    let e = Config::parse_with_budget(text, Some(200)).unwrap_err();
    assert!(
        e.to_string()
            .contains("uid.5.frames = 300 is outside 0..=200"),
        "{e}"
    );
    assert!(Config::parse_with_budget("", Some(0)).is_err());
}

#[test]
fn test_the_packaged_example_configuration_parses() {
    let c = Config::parse(include_str!("../../../packaging/daemon.toml")).unwrap();
    assert_eq!(c.machine.budget_frames, 262144);
    assert_eq!(c.default_quotas.frames, 65536);
}
