//! `bench far` as a user runs it, small and once: a row per backing, order
//! and thread count, the batched manager's round trips a fraction of the
//! naive one's (one per page), a waited write-back as many as a plain one;
//! at an added round trip of 1 ms, a cluster of the bench's own whose
//! PING and naive page-ins pay it; bad input refused naming the flag; the
//! cluster the bench starts (when `PAGEPILOT_REDIS_CLUSTER` is not set) and
//! its data gone after.

mod bench;

use bench::{assert_refused_naming, json};

#[test]
fn test_far_bench_reports_every_row_with_batched_round_trips_below_the_naive_managers() {
    let r = json(&[
        "bench",
        "far",
        "--mb",
        "2",
        "--runs",
        "1",
        "--threads",
        "1,2",
        "--format",
        "json",
    ]);
    assert_eq!(r["pages"].as_u64(), Some(512), "{r}");
    let d = &r["distances"][0];
    assert_eq!(d["rtt_us"].as_f64(), Some(0.0), "{r}");
    assert!(d["ping_us"].as_f64().unwrap() > 0.0, "{r}");
    let rows = d["rows"].as_array().unwrap();
    // Four read sides by two orders, two write sides, by two thread counts.
    assert_eq!(rows.len(), (4 * 2 + 2) * 2, "{r}");
    let row = |side: &str, order: &str, threads: u64| {
        rows.iter()
            .find(|x| x["side"] == side && x["order"] == order && x["threads"] == threads)
            .unwrap_or_else(|| panic!("no {side} {order} x{threads} row: {r}"))
    };
    for order in ["seq", "random"] {
        for threads in [1, 2] {
            let naive = row("naive", order, threads);
            let batched = row("redis", order, threads);
            // One GET per page, and a little more (the open's metadata read).
            let n = naive["round_trips_per_page"].as_f64().unwrap();
            assert!((1.0..1.05).contains(&n), "{naive}");
            let b = batched["round_trips_per_page"].as_f64().unwrap();
            assert!(b > 0.0 && b < 0.25, "{batched}");
            // Speeds are measured, not asserted: one tiny run of a debug
            // build on a shared machine (docs/results.md has the release runs).
            assert!(batched["pages_per_s"].as_f64().unwrap() > 0.0, "{batched}");
            assert_eq!(
                row("file", order, threads)["round_trips_per_page"].as_f64(),
                Some(0.0)
            );
        }
    }
    for threads in [1, 2] {
        // WAIT rides in the write-back's own request: as many round trips,
        // give or take a retry or two on either side (a write the replica
        // had not acknowledged yet is sent again).
        let (plain, waited) = (
            row("write", "seq", threads),
            row("write-waited", "seq", threads),
        );
        let trips = |r: &serde_json::Value| r["round_trips_per_page"].as_f64().unwrap() * 512.0;
        assert!(trips(plain) > 0.0, "{plain}");
        assert!(
            (trips(waited) - trips(plain)).abs() <= 2.0 + 0.1 * trips(plain),
            "{plain} {waited}"
        );
    }
    assert_eq!(d["batched_vs_naive"].as_array().unwrap().len(), 4, "{r}");
    assert_eq!(d["replica_wait"].as_array().unwrap().len(), 2, "{r}");
}

#[test]
fn test_far_bench_at_a_distance_starts_its_own_cluster_whose_round_trips_pay_it() {
    let r = json(&[
        "bench",
        "far",
        "--rtt",
        "0,1ms",
        "--mb",
        "1",
        "--runs",
        "1",
        "--threads",
        "1",
        "--format",
        "json",
    ]);
    let distances = r["distances"].as_array().unwrap();
    assert_eq!(distances.len(), 2, "{r}");
    let far = &distances[1];
    assert_eq!(far["rtt_us"].as_f64(), Some(1000.0), "{r}");
    // A proxy never delivers before its delay: a floor, not a timing.
    assert!(far["ping_us"].as_f64().unwrap() >= 1000.0, "{far}");
    let naive = far["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["side"] == "naive" && x["order"] == "seq")
        .unwrap();
    assert!(naive["us_per_page"].as_f64().unwrap() >= 1000.0, "{naive}");
}

#[test]
fn test_far_bench_refuses_bad_input_naming_the_flag() {
    assert_refused_naming(&[
        (&["bench", "far", "--threads", "0"], "--threads"),
        (&["bench", "far", "--threads", "1,99"], "--threads"),
        (&["bench", "far", "--mb", "0"], "--mb"),
        (&["bench", "far", "--runs", "0"], "--runs"),
        (&["bench", "far", "--cluster", "nonsense"], "--cluster"),
        (&["bench", "far", "--rtt", "fast"], "--rtt"),
        (
            &["bench", "far", "--rtt", "100us", "--cluster", "127.0.0.1:1"],
            "--rtt",
        ),
    ]);
}
