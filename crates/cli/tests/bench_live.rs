//! The live benchmarks as a user runs them: `pagepilot bench
//! join|faults|scan|fork|parallel-fill|fork-ways --format json` against real
//! userfaultfd regions, real files and real memory cgroups, at small sizes.

mod bench;

use std::path::Path;

use bench::{assert_refused_naming, json, pagepilot};
use serde_json::Value;

fn within(measured: u64, analytic: u64, tolerance: f64) -> bool {
    (measured as f64 - analytic as f64).abs() <= tolerance * analytic as f64
}

/// `bench join` over a 24 MB outer table (6144 pages) with a 16 MB budget (4096 pages), as JSON.
fn small_join(loops: &str, policies: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "bench",
        "join",
        "--outer-mb",
        "24",
        "--budget-mb",
        "16",
        "--loops",
        loops,
        "--policies",
        policies,
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

#[test]
fn test_join_bench_lru_and_mru_faults_match_analytic_beside_the_kernel() {
    let r = small_join("4", "lru,mru,kernel", &[]);
    let size = &r["sizes"][0];
    let (o, m) = (
        size["outer_pages"].as_u64().unwrap(),
        size["budget_pages"].as_u64().unwrap(),
    );
    assert_eq!((o, m), (6144, 4096));
    assert_eq!(size["pf_lru"].as_u64(), Some(o * 4));
    assert_eq!(size["pf_mru"].as_u64(), Some(o + (o - m) * 3));
    let policies = size["policies"].as_array().unwrap();
    let by = |name: &str| policies.iter().find(|p| p["policy"] == name).expect(name);
    let lru = by("lru")["faults"].as_u64().unwrap();
    let mru = by("mru")["faults"].as_u64().unwrap();
    assert!(
        within(lru, o * 4, 0.01),
        "LRU page-ins {lru} vs PF_l {}",
        o * 4
    );
    assert!(
        within(mru, o + (o - m) * 3, 0.01),
        "MRU page-ins {mru} vs PF_m"
    );
    let kernel = by("kernel");
    // The kernel read the table from the device at least once (caches were dropped).
    assert!(
        kernel["bytes_read"].as_u64().unwrap() >= 24 << 20,
        "kernel read {kernel}"
    );
    assert!(by("mru")["speedup_vs_kernel"].as_f64().unwrap() > 0.0);
    // Every run computed the same join result.
    let sums: Vec<u64> = policies
        .iter()
        .map(|p| p["runs"][0]["checksum"].as_u64().unwrap())
        .collect();
    assert!(
        sums.windows(2).all(|w| w[0] == w[1]) && sums[0] > 0,
        "checksums {sums:?}"
    );
}

/// The C API's helpers (compiling C programs against the `libpagepilot.so` built for this
/// test run, the pagepilot-capi dev-dependency).
#[path = "../../capi/tests/common/mod.rs"]
mod capi;

#[test]
fn test_join_bench_runs_the_c_program_through_the_c_api_in_the_same_rounds() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("join-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let exe = capi::compile(&capi::repo_root().join("crates/bench/c/join.c"), &dir);
    let r = small_join(
        "2",
        "mru,kernel",
        &["--runs", "2", "--c-program", exe.to_str().unwrap()],
    );
    let _ = std::fs::remove_dir_all(&dir);
    let size = &r["sizes"][0];
    let rows = size["policies"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|p| p["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["mru", "mru defaults", "mru defaults (C API)", "kernel"]
    );
    let c = &rows[2];
    assert_eq!(
        (c["c_api"].as_bool(), c["defaults"].as_bool()),
        (Some(true), Some(true))
    );
    // Page-ins are the region's missing faults, within 5% of PF_m with the pager's defaults.
    let pf_m = size["pf_mru"].as_u64().unwrap();
    assert!(within(c["faults"].as_u64().unwrap(), pf_m, 0.05), "{c}");
    assert!(c["speedup_vs_kernel"].as_f64().unwrap() > 0.0, "{c}");
    assert_eq!(
        c["speedup_per_round"]["rounds"].as_array().unwrap().len(),
        2,
        "{c}"
    );
    // The C program counted what every other row counted (the bench checks it too).
    let sums: Vec<&Value> = rows.iter().map(|p| &p["runs"][1]["checksum"]).collect();
    assert!(sums.windows(2).all(|w| w[0] == w[1]), "checksums {sums:?}");
}

#[test]
fn test_join_bench_window_rows_page_in_by_the_window_formula() {
    let r = small_join("3", "mru,kernel", &["--windows", "32x1,40x0"]);
    let size = &r["sizes"][0];
    let (o, m) = (6144u64, 4096u64);
    // The C API's row is there when a `pp-join-c` was built beside the binary.
    let rows: Vec<&Value> = size["policies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["c_api"] != true)
        .collect();
    let labels: Vec<&str> = rows.iter().map(|p| p["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["mru", "mru 32x1", "mru 40x0", "mru defaults", "kernel"]
    );
    // Each row's windows keep (depth + 1) * k frames outside MRU's resident set.
    for (row, frames) in [(rows[1], 64), (rows[2], 40)] {
        let want = o + (o - m + frames) * 2;
        assert_eq!(row["window_formula_faults"].as_u64(), Some(want), "{row}");
        assert_eq!(row["faults"].as_u64(), Some(want), "{row}");
        assert!(row["speedup_vs_kernel"].as_f64().unwrap() > 0.0, "{row}");
        let rounds = row["speedup_per_round"]["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 1, "{row}");
    }
    assert_eq!(rows[2]["window"]["depth"].as_u64(), Some(0));
    assert!(rows[4]["window"].is_null() && rows[4]["speedup_vs_kernel"].is_null());
    // The defaults row: the public API with no option but the policy, beside the kernel.
    let defaults = rows[3];
    assert_eq!(defaults["defaults"].as_bool(), Some(true), "{defaults}");
    assert!(defaults["window"].is_null(), "{defaults}");
    let tuning = defaults["tuning"].as_object().unwrap();
    assert!(
        tuning
            .iter()
            .all(|(k, v)| v.is_null() || (k == "faulting_thread" && v == false)),
        "options were set: {defaults}"
    );
    assert!(
        defaults["speedup_vs_kernel"].as_f64().unwrap() > 0.0,
        "{defaults}"
    );
    assert!(
        defaults["faults"].as_u64().unwrap() >= o + (o - m) * 2,
        "{defaults}"
    );
}

#[test]
fn test_faults_bench_times_pagepilot_and_kernel_faults_with_a_breakdown() {
    let r = json(&[
        "bench", "faults", "--pages", "256", "--rounds", "2", "--format", "json",
    ]);
    for key in ["kernel_missing", "kernel_minor"] {
        assert!(r[key]["mean_ns"].as_u64().unwrap() > 0, "{key}: {r}");
    }
    for key in [
        "pager_missing",
        "pager_missing_faulting_thread",
        "pager_missing_handler_pinned",
    ] {
        assert!(
            r[key]["cost"]["mean_ns"].as_u64().unwrap() > 0,
            "{key}: {r}"
        );
        // Ratios are taken within each round, then their median.
        for ratio in ["ratio_p50", "ratio_mean", "ratio_wall"] {
            assert!(r[key][ratio].as_f64().unwrap() > 0.0, "{key}.{ratio}: {r}");
        }
    }
    // The faulting thread's fault: the bare SIGBUS probe's access is timed around the store,
    // its UFFDIO_ZEROPAGE separately inside the handler. Each fault's ioctl lies inside its
    // access, so the ioctl's median is below the access's (same faults, same count), and
    // delivery (fault entry, signal, sigreturn), the difference, is left over.
    let b = &r["faulting_thread_breakdown"];
    let probe = b["probe"]["cost"]["p50_ns"].as_u64().unwrap();
    let ioctl = b["zeropage_ioctl_ns"].as_u64().unwrap();
    assert!(ioctl > 0, "the handler's ioctl was not timed: {b}");
    assert!(ioctl < probe, "the ioctl took the whole fault: {b}");
    assert!(b["delivery_ns"].as_u64().unwrap() > 0, "{b}");
    for kind in ["probe_missing_zero", "probe_missing_copy", "probe_minor"] {
        let b = &r[kind];
        let total = b["total"]["mean_ns"].as_u64().unwrap();
        let parts: u64 = ["delivery", "fill", "map_and_resume"]
            .iter()
            .map(|p| b[p]["mean_ns"].as_u64().unwrap())
            .sum();
        // The parts of each fault add up to it (means: up to rounding).
        assert!(total.abs_diff(parts) <= 3, "{kind}: {total} != {parts}");
        assert!(b["delivery"]["mean_ns"].as_u64().unwrap() > 0);
        assert!(b["ratio_to_kernel_mean"].as_f64().unwrap() > 0.0);
    }
    // First-touch streams with zero clusters: a sequential one takes a fault per cluster, a
    // random one about one per page; each against the kernel in the same order.
    for (row, fewer) in [
        ("sequential_faulting_thread", true),
        ("sequential_handler_thread", true),
        ("random_faulting_thread", false),
        ("random_handler_thread", false),
    ] {
        let s = &r["stream"][row];
        let events = s["fault_events_per_page"].as_f64().unwrap();
        assert!(
            if fewer { events < 0.25 } else { events > 0.8 },
            "{row}: {s}"
        );
        assert!(s["ratio_wall"].as_f64().unwrap() > 0.0, "{row}: {s}");
        assert!(s["kernel_per_page_ns"].as_u64().unwrap() > 0, "{row}: {s}");
    }
}

/// `bench scan` over an 8 MB file (2048 pages) with budgets above (16 MB) and below (2 MB)
/// it, as JSON.
fn small_scan(extra: &[&str]) -> Value {
    let mut args = vec![
        "bench",
        "scan",
        "--file-mb",
        "8",
        "--budgets-mb",
        "16,2",
        "--kernel-timeout-s",
        "5",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

/// The sides of a scan point, by name.
fn scan_sides(p: &Value) -> Vec<&str> {
    let sides = p["sides"].as_array().unwrap();
    sides.iter().map(|s| s["side"].as_str().unwrap()).collect()
}

#[test]
fn test_scan_bench_runs_every_case_beside_its_baseline_in_the_same_rounds() {
    let patterns = ["sequential", "random", "sparse", "uniform"];
    let r = small_scan(&[
        "--threads",
        "1,2",
        "--patterns",
        "sequential,random,sparse,uniform",
        "--ops",
        "400",
        "--runs",
        "1",
    ]);
    assert_eq!(r["file_mb"].as_u64(), Some(8));
    let points = r["points"].as_array().unwrap();
    let mut want = Vec::new();
    for budget in [16, 2] {
        for cache in ["cold", "warm"] {
            for pattern in patterns {
                for threads in [1, 2] {
                    want.push((budget, cache, pattern, threads));
                }
            }
        }
    }
    let got: Vec<_> = points
        .iter()
        .map(|p| {
            (
                p["budget_mb"].as_u64().unwrap(),
                p["cache"].as_str().unwrap(),
                p["pattern"].as_str().unwrap(),
                p["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    for p in points {
        let (cache, pattern) = (p["cache"].as_str().unwrap(), p["pattern"].as_str().unwrap());
        // Every page once (sequential, random), one in 64 (sparse), --ops (uniform).
        let touched = match pattern {
            "sparse" => 32,
            "uniform" => 400,
            _ => 2048,
        };
        assert_eq!(p["pages_touched"].as_u64(), Some(touched), "{p}");
        // Cold: the kernel's mmap in a cgroup; warm: buffered pread, the kernel's mmap beside.
        let baseline = if cache == "cold" {
            "kernel-mmap"
        } else {
            "pread"
        };
        let reference = match (cache, pattern) {
            ("warm", _) => Some("kernel-mmap"),
            (_, "uniform") => Some("kernel-madv-random"),
            _ => None,
        };
        assert_eq!(p["baseline"], baseline, "{p}");
        assert_eq!(p["reference"].as_str(), reference, "{p}");
        let mut sides = vec!["defaults", "tuned", baseline];
        sides.extend(reference);
        assert_eq!(scan_sides(p), sides, "{p}");
        for s in p["sides"].as_array().unwrap() {
            let runs = s["runs"].as_array().unwrap();
            // One run each in the round, unless the 2 MB cgroup's OOM killer ended the child.
            assert_eq!(
                runs.len() as u64 + s["oom_kills"].as_u64().unwrap(),
                1,
                "{s}"
            );
            // A run killed at its time limit (a loaded machine) measured nothing.
            let finished: Vec<_> = runs.iter().filter(|r| r["timed_out"] != true).collect();
            for run in &finished {
                let cached = run["cached_pages_before"].as_u64();
                assert_eq!(cached, (cache == "warm").then_some(2048), "{s}");
                assert_eq!(run["written_pages_checked"].as_u64(), Some(0), "{s}");
                // Every side's CPU time is its own process's, all its threads.
                assert!(run["cpu_us"].as_u64().unwrap() > 0, "{s}");
            }
            if !finished.is_empty() {
                let busy = s["cpus_busy"].as_f64().unwrap();
                assert!(busy > 0.0 && busy < 64.0, "{s}");
            }
        }
        for key in [
            "defaults_pages_per_s",
            "tuned_pages_per_s",
            "defaults_vs_tuned",
        ] {
            assert!(p[key].as_f64().unwrap() > 0.0, "{key}: {p}");
        }
        if p["baseline_pages_per_s"].is_f64() {
            assert!(p["defaults_vs_baseline"].as_f64().unwrap() > 0.0, "{p}");
            assert!(p["tuned_vs_baseline"].as_f64().unwrap() > 0.0, "{p}");
        }
        // The tuned row: 128-page windows 4 ahead on sequential scans, else one page a fault,
        // a handler thread per application thread.
        let t = &p["tuning"];
        if pattern == "sequential" {
            assert_eq!(
                (t["readahead"].as_u64(), t["readahead_depth"].as_u64()),
                (Some(128), Some(4)),
                "{t}"
            );
        } else {
            assert_eq!(
                (t["readahead"].as_u64(), t["fault_around"].as_u64()),
                (Some(1), Some(1)),
                "{t}"
            );
        }
        assert_eq!(t["handler_threads"], p["threads"], "{t}");
        // Pages read from the disk per page touched: one a fault, for a cold sparse scan.
        if cache == "cold" && pattern == "sparse" {
            let tuned = &p["sides"][1];
            let disk = tuned["disk_pages_per_touched"].as_f64().unwrap();
            assert!((disk - 1.0).abs() < 0.01, "{tuned}");
        }
    }
}

#[test]
fn test_scan_bench_writes_reach_the_file_in_every_run_of_every_side() {
    let r = small_scan(&[
        "--threads",
        "2",
        "--patterns",
        "random,sparse",
        "--write-fraction",
        "0.25",
        "--runs",
        "2",
    ]);
    assert_eq!(r["write_fraction"].as_f64(), Some(0.25));
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 8);
    for p in points {
        let mut checked = Vec::new();
        let mut sums = Vec::new();
        for s in p["sides"].as_array().unwrap() {
            for run in s["runs"].as_array().unwrap() {
                if run["timed_out"] == false {
                    // Read back from the file after the run: every written page has its stamp.
                    checked.push(run["written_pages_checked"].as_u64().unwrap());
                    sums.push(run["checksum"].as_u64().unwrap());
                }
            }
        }
        // The same pages are written by every side in every round (a quarter of them) and
        // the tags they read stay right, written over by earlier runs or not.
        let want = if p["pattern"] == "random" {
            400..620
        } else {
            1..32
        };
        assert!(want.contains(&checked[0]), "{p}");
        assert!(checked.iter().all(|&c| c == checked[0]), "{checked:?}: {p}");
        assert!(sums.iter().all(|&c| c == sums[0]), "{sums:?}: {p}");
        // pagepilot's runs at least (a kernel child may time out, thrashing under 2 MB).
        assert!(checked.len() >= 4, "{p}");
    }
}

#[test]
fn test_fork_bench_writes_back_exactly_the_dirty_pages_and_waits_for_the_resume() {
    let r = json(&[
        "bench",
        "fork",
        "--budget-mb",
        "4",
        "--dirty-mb",
        "0,2",
        "--runs",
        "3",
        "--format",
        "json",
    ]);
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, dirty_mb) in points.iter().zip([0u64, 2]) {
        assert_eq!(
            p["written_back_per_fork"].as_u64(),
            Some(dirty_mb << 20),
            "{p}"
        );
        assert_eq!(p["pagepilot_runs"].as_array().unwrap().len(), 3, "{p}");
        for key in ["fork_ratio", "after_ratio", "total_ratio"] {
            assert!(p[key].as_f64().unwrap() > 0.0, "{key}: {p}");
        }
        // pagepilot waited for its region to be paged again, then paged its working set in;
        // the kernel's stayed mapped.
        let (pp, k) = (&p["pagepilot"], &p["kernel"]);
        assert!(pp["resume_wait_ns"].as_u64().unwrap() > 0, "{p}");
        assert!(pp["retouch_page_ins"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(k["resume_wait_ns"].as_u64(), Some(0), "{p}");
    }
}

#[test]
fn test_parallel_fill_bench_checks_every_variant_beside_the_kernel() {
    let r = json(&[
        "bench",
        "parallel-fill",
        "--file-mb",
        "16",
        "--budget-mb",
        "4",
        "--runs",
        "1",
        "--format",
        "json",
    ]);
    let variants = r["variants"].as_array().unwrap();
    let names: Vec<_> = variants
        .iter()
        .map(|v| v["variant"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kernel", "defaults", "tuned"]);
    for v in variants {
        let run = &v["runs"][0];
        assert!(run["fill_ns"].as_u64().unwrap() > 0, "{v}");
        assert!(v["wall_vs_kernel"].as_f64().unwrap() > 0.0, "{v}");
        // pagepilot shared the region with its workers once (the first fork).
        let shares = if v["variant"] == "kernel" { 0 } else { 1 };
        assert_eq!(run["shares"].as_u64(), Some(shares), "{v}");
    }
}

#[test]
fn test_fork_ways_probe_serves_the_childs_faults_through_its_own_userfaultfd() {
    let r = json(&[
        "bench",
        "fork-ways",
        "--mb",
        "4",
        "--forks",
        "3",
        "--runs",
        "1",
        "--format",
        "json",
    ]);
    let fork = r["fork"].as_array().unwrap();
    let names: Vec<_> = fork
        .iter()
        .map(|f| f["variant"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["dontfork", "inherit", "event-fork", "event-fork-empty"]
    );
    for f in fork {
        assert_eq!(f["fork_ns"].as_array().unwrap().len(), 3, "{f}");
    }
    // The probe itself fails unless every fault of the child went through the child's
    // userfaultfd and its stores reached the parent's memfd.
    for f in r["faults"].as_array().unwrap() {
        assert!(f["child_us"].as_f64().unwrap() > 0.0, "{f}");
        assert!(f["parent_us"].as_f64().unwrap() > 0.0, "{f}");
    }
}

#[test]
fn test_benches_refuse_bad_input_with_a_named_error() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "join", "--outer-mb", "20..x"], "--outer-mb"),
        (
            &[
                "bench",
                "join",
                "--outer-mb",
                "8",
                "--policies",
                "no-such-policy",
            ],
            "no-such-policy",
        ),
        (
            &["bench", "join", "--outer-mb", "8", "--runs", "0"],
            "--runs",
        ),
        (
            &["bench", "join", "--outer-mb", "8", "--windows", "64x99"],
            "--windows",
        ),
        (
            &[
                "bench",
                "join",
                "--outer-mb",
                "8",
                "--c-program",
                "/nonexistent/pp-join-c",
            ],
            "--c-program",
        ),
        (&["bench", "scan", "--threads", "0"], "--threads"),
        (&["bench", "scan", "--file-mb", "0"], "--file-mb"),
        (&["bench", "scan", "--budgets-mb", "16,0"], "--budgets-mb"),
        (
            &["bench", "scan", "--write-fraction", "1.5"],
            "--write-fraction",
        ),
        (
            &["bench", "scan", "--write-fraction", "NaN"],
            "--write-fraction",
        ),
        (&["bench", "scan", "--patterns", "diagonal"], "--patterns"),
        (&["bench", "scan", "--cache", "tepid"], "--cache"),
        (
            &["bench", "scan", "--kernel-timeout-s", "0"],
            "--kernel-timeout-s",
        ),
        (&["bench", "faults", "--pages", "0"], "--pages"),
        (&["bench", "fork", "--dirty-mb", "32"], "--dirty-mb"),
        (&["bench", "fork", "--working-mb", "64"], "--working-mb"),
        (&["bench", "parallel-fill", "--workers", "0"], "--workers"),
        (&["bench", "fork-ways", "--mb", "0"], "--mb"),
        (&["bench", "share", "--loops", "0"], "--loops"),
        (&["bench", "share", "--budget-mb", "1"], "--budget-mb"),
    ];
    assert_refused_naming(cases);
    // A data directory on tmpfs is refused: O_DIRECT and the kernel's reads need a disk.
    if Path::new("/dev/shm").is_dir() {
        let (out, _) = pagepilot(&["bench", "join", "--outer-mb", "8", "--dir", "/dev/shm"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("tmpfs"));
    }
}
