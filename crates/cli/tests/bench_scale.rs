//! `pagepilot bench scale` as a user runs it, at small sizes: every row present, every written
//! byte read back from the file, the report's fields there; bad input refused with the
//! argument's name.

mod bench;

use bench::{assert_cleaned_up, pagepilot};
use serde_json::Value;

#[test]
fn test_scale_bench_measures_every_row_and_checks_every_written_byte() {
    let touches = 2000u64;
    let (out, pid) = pagepilot(&[
        "bench",
        "scale",
        "--sizes",
        "1G,64G",
        "--touches",
        "2000",
        "--runs",
        "1",
        "--kernel-madvise-random",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "bench scale failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_cleaned_up(pid);
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(r["bench"], "scale");
    assert_eq!(r["budget_mb"], 64);
    assert_eq!(r["touches"], touches);
    let kernel = r["kernel_skipped"].is_null();
    let rows = r["rows"].as_array().expect("rows");
    let mut want = Vec::new();
    for backing in ["file", "anon"] {
        for order in ["random", "sequential"] {
            for size in ["1G", "64G"] {
                want.push(format!("{backing} {order} {size} pagepilot"));
                if kernel {
                    want.push(format!("{backing} {order} {size} kernel"));
                }
            }
        }
    }
    let got: Vec<String> = rows
        .iter()
        .map(|row| {
            format!(
                "{} {} {} {}",
                row["backing"].as_str().unwrap(),
                row["order"].as_str().unwrap(),
                row["size"].as_str().unwrap(),
                row["side"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(got, want);
    for row in rows {
        let name = format!("{} {} {}", row["backing"], row["order"], row["size"]);
        assert_eq!(row["runs"].as_array().map(Vec::len), Some(1), "{name}");
        let status = row["status"].as_str().unwrap();
        if row["side"] == "kernel" && row["backing"] == "anon" && status == "oom" {
            // 2000 pages fit the budget, but a machine's cgroup may still say no: allowed.
            continue;
        }
        assert_eq!(status, "ok", "{name}");
        let m = &row["medians"];
        for field in [
            "map_ms",
            "touch_p50_us",
            "touch_mean_us",
            "touch_p99_us",
            "unmap_ms",
            "resident_pages",
            "rss_growth_mib",
            "anon_growth_mib",
            "frames_mib",
            "beyond_budget_mib",
            "pte_growth_kib",
            "bookkeeping_mib",
        ] {
            assert!(m.get(field).is_some(), "{name}: no {field}");
        }
        let (reads, writes) = (m["reads_checked"].as_u64(), m["writes_checked"].as_u64());
        let reads = reads.unwrap();
        assert!(
            (touches / 3..touches * 2 / 3).contains(&reads),
            "{name}: {reads} reads checked"
        );
        if row["backing"] == "file" {
            // About half the touches write, nearly all at distinct bytes: every one read back.
            let writes = writes.unwrap();
            assert!(
                (touches / 3..touches * 2 / 3).contains(&writes),
                "{name}: {writes} written bytes checked"
            );
        }
        assert!(m["resident_pages"].as_u64().unwrap() > 0, "{name}");
        assert!(m["frames_mib"].as_f64().unwrap() > 0.0, "{name}");
        assert_eq!(
            m["beyond_budget_mib"].is_null(),
            row["side"] == "kernel",
            "{name}: judged for pagepilot only"
        );
        let ratios = &row["ratios"];
        if row["size"] == "64G" {
            for field in [
                "reference_size",
                "touch_p50",
                "touch_mean",
                "unmap",
                "resident",
            ] {
                assert!(ratios.get(field).is_some(), "{name}: no ratio {field}");
            }
            assert_eq!(ratios["reference_size"], "1G");
        } else {
            assert!(ratios.is_null(), "{name}: the reference has no ratios");
        }
    }
    // No size of 1 TiB: no target to judge.
    assert_eq!(r["targets"].as_array().map(Vec::len), Some(0));
}

#[test]
fn test_scale_bench_refuses_bad_input_naming_the_argument() {
    let cases: [(&[&str], &str); 6] = [
        (&["--sizes", "0"], "--sizes"),
        (&["--sizes", "1G,lots"], "--sizes"),
        (&["--sizes", "1Q"], "--sizes"),
        (&["--budget-mb", "0"], "--budget-mb"),
        (&["--touches", "0"], "--touches"),
        (&["--runs", "0"], "--runs"),
    ];
    for (extra, name) in cases {
        let mut args = vec!["bench", "scale"];
        args.extend_from_slice(extra);
        let (out, _) = pagepilot(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(
            err.contains(name),
            "{extra:?}: error does not name {name}: {err}"
        );
        assert!(out.stdout.is_empty(), "{extra:?}: printed a report");
    }
}
