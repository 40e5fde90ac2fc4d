//! `bench aim` as a user runs it, at the smallest size: every (mix, users)
//! point has both configurations, every round's workers each report their
//! jobs and those sum to the round's total, every throughput is above 0,
//! and the pagepilot side's region process paged under its daemon. Counts,
//! never timings. Bad arguments are refused by name.

mod bench;

use bench::{assert_refused_naming, json};
use serde_json::Value;

fn check_side(side: &Value, users: u64, pagepilot: bool) {
    assert!(side["jobs_per_minute"].as_f64().unwrap() > 0.0, "{side}");
    let rounds = side["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "{side}");
    for r in rounds {
        let per_worker: Vec<u64> = r["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j.as_u64().unwrap())
            .collect();
        assert_eq!(per_worker.len() as u64, users, "{r}");
        assert!(
            per_worker.iter().all(|&j| j > 0),
            "a worker did nothing: {r}"
        );
        let jobs = r["jobs"].as_u64().unwrap();
        assert_eq!(per_worker.iter().sum::<u64>(), jobs, "{r}");
        let by_kind: u64 = r["by_kind"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j.as_u64().unwrap())
            .sum();
        assert_eq!(by_kind, jobs, "{r}");
        assert!(r["jobs_per_minute"].as_f64().unwrap() > 0.0, "{r}");
        if pagepilot {
            // The region paged (its file is 4 times its budget) and talked to the daemon.
            assert!(r["pilot"]["faults"].as_u64().unwrap() > 0, "{r}");
            assert!(r["pilot"]["messages_sent"].as_u64().unwrap() > 0, "{r}");
        } else {
            assert!(r["pilot"].is_null(), "{r}");
        }
    }
}

#[test]
fn test_aim_bench_counts_every_workers_jobs_in_both_configurations() {
    let r = json(&[
        "bench",
        "aim",
        "--users",
        "1,2",
        "--seconds",
        "0.3",
        "--runs",
        "1",
        "--mixes",
        "standard",
        "--format",
        "json",
    ]);
    assert_eq!(r["bench"], "aim");
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{r}");
    for (row, users) in rows.iter().zip([1, 2]) {
        assert_eq!(row["mix"], "standard");
        assert_eq!(row["users"].as_u64(), Some(users));
        check_side(&row["plain"], users, false);
        check_side(&row["pagepilot"], users, true);
        assert!(row["ratio"].as_f64().unwrap() > 0.0, "{row}");
    }
}

#[test]
fn test_aim_bench_refuses_bad_arguments_by_name() {
    assert_refused_naming(&[
        (&["bench", "aim", "--users", "0"], "--users"),
        (&["bench", "aim", "--users", "1,0"], "--users"),
        (&["bench", "aim", "--mixes", ","], "--mixes"),
        (&["bench", "aim", "--mixes", "cpu"], "--mixes"),
        (&["bench", "aim", "--seconds", "0"], "--seconds"),
        (&["bench", "aim", "--runs", "0"], "--runs"),
    ]);
}
