//! `pagepilot doctor` as root on this machine: every check runs, and the
//! pager's footprint is measured on a region it maps.

use std::process::Command;

fn pagepilot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagepilot"))
}

/// The footprint check maps a 16 MiB region with the defaults, touches
/// every frame and reports the threads and memory it took beside them.
#[test]
fn test_doctor_measures_the_pagers_footprint_beside_a_regions_frames() {
    let out = pagepilot()
        .args(["doctor", "--format", "json"])
        .output()
        .expect("run doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let check = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "pager footprint")
        .unwrap_or_else(|| panic!("no footprint check: {report}"))
        .clone();
    assert_eq!(check["state"], "ok", "{check}");
    let detail = check["detail"].as_str().expect("detail");
    assert!(detail.contains("its 4096 frames touched"), "{detail}");
    // Handlers (one per CPU at most, two here) and the watcher: no reader
    // starts for first touches.
    let threads: u64 = detail
        .split(" thread(s)")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no thread count: {detail}"));
    assert!((1..=4).contains(&threads), "{detail}");
}
