//! `bench share` as a user runs it, at small sizes, once: both joins in one
//! in-process pool, each its own policy's page-ins (the analytic count and
//! the simulator's prediction), beside the kernel's; and each join a
//! process joined to a daemon the bench starts. The page-ins must agree
//! (a daemon side that granted too few frames, or none, would page in far
//! more), the processes must have talked to the daemon (registration and
//! unregistration) and not on their faults, and neither the daemon nor its
//! socket may be left behind. `bench rapha`'s daemon row is checked in
//! bench_rapha.rs, beside the other configurations of the same run.

mod bench;

use bench::{assert_cleaned_up, pagepilot};
use serde_json::Value;

fn within(measured: u64, analytic: u64, tolerance: f64) -> bool {
    (measured as f64 - analytic as f64).abs() <= tolerance * analytic as f64
}

/// No process started by run `pid` is left: the daemon's command line
/// names its socket under `pagepilot-bench-<pid>-daemon-<n>`.
fn assert_no_daemon_left(pid: u32) {
    let needle = format!("pagepilot-bench-{pid}-daemon");
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(!cmdline.contains(&needle), "daemon left running: {cmdline}");
    }
}

#[test]
fn test_share_bench_gives_each_join_its_policys_page_ins_in_one_pool_and_under_the_daemon() {
    let args = [
        "bench",
        "share",
        "--outer-mb",
        "8",
        "--budget-mb",
        "8",
        "--loops",
        "3",
        "--runs",
        "1",
        "--format",
        "json",
    ];
    let (out, pid) = pagepilot(&args);
    assert!(
        out.status.success(),
        "pagepilot {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_cleaned_up(pid);
    assert_no_daemon_left(pid);
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let joins = r["joins"].as_array().unwrap();
    let join = |side: &str, policy: &str| {
        joins
            .iter()
            .find(|j| j["side"] == side && j["policy"] == policy)
            .unwrap_or_else(|| panic!("no {side} {policy} row: {r}"))
    };
    // 2048 pages each, 1024 frames guaranteed each: PF_m = 2048 + 1024 * 2, PF_l = 2048 * 3.
    let mru = join("pagepilot", "mru");
    assert_eq!(mru["analytic_faults"].as_u64(), Some(4096), "{mru}");
    assert!(within(mru["faults"].as_u64().unwrap(), 4096, 0.05), "{mru}");
    let clock = join("pagepilot", "clock");
    assert_eq!(clock["faults"].as_u64(), Some(6144), "{clock}");
    // The simulator's prediction, the same frame manager on the joins' page
    // references, is within 5% of each join's live page-ins.
    for j in [mru, clock] {
        let simulated = j["simulated_faults"].as_u64().expect("simulated_faults");
        assert!(
            within(j["faults"].as_u64().unwrap(), simulated, 0.05),
            "live vs simulated: {j}"
        );
        let ratio = j["faults_vs_simulated"].as_f64().unwrap();
        assert!((0.95..=1.05).contains(&ratio), "{j}");
    }
    assert_eq!(clock["simulated_faults"].as_u64(), Some(6144), "{clock}");
    // The kernel ran both joins in one cgroup beside them (checksums checked by the bench).
    assert_eq!(
        joins.iter().filter(|j| j["side"] == "kernel").count(),
        2,
        "{r}"
    );
    assert!(r["speedup_vs_kernel"].as_f64().unwrap() > 0.0, "{r}");
    for policy in ["mru", "clock"] {
        let pool = join("pagepilot", policy);
        let daemon = join("pagepilot+daemon", policy);
        let (p, d) = (
            pool["faults"].as_u64().unwrap(),
            daemon["faults"].as_u64().unwrap(),
        );
        // Each process is guaranteed its half by the daemon as each region is
        // by the pool: the same page-ins (within a quarter, here).
        assert!(
            (d as f64 - p as f64).abs() <= 0.25 * p as f64,
            "{policy}: daemon {d} page-ins, pool {p}: {r}"
        );
        // Registered and unregistered at least; faults send nothing.
        let sent = daemon["messages_sent"].as_u64().expect("messages_sent");
        assert!(sent >= 2, "{daemon}");
        assert!((sent as f64) / (d as f64) < 0.01, "{daemon}");
        assert!(pool["messages_sent"].is_null(), "{pool}");
    }
    let cmp = r["daemon_vs_in_process"].as_array().unwrap();
    assert_eq!(cmp.len(), 2, "{r}");
    for c in cmp {
        let ratio = c["faults_ratio"].as_f64().unwrap();
        assert!((0.75..=1.25).contains(&ratio), "{c}");
        assert!(c["messages_per_fault"].as_f64().unwrap() < 0.01, "{c}");
        assert!(c["time_ratio"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["time_per_fault_ratio"].as_f64().unwrap() > 0.0, "{c}");
        // 8 MB of frames, 1024 frames each: the daemon granted the whole share.
        assert_eq!(c["daemon_budget_frames"], 1024, "{c}");
    }
    assert!(r["daemon_pair_ms"].as_f64().unwrap() > 0.0, "{r}");
}
