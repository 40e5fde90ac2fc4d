//! `pagepilot sim` end to end: the real binary on real trace files.

use std::path::PathBuf;
use std::process::{Command, Output};

fn trace_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pagepilot-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagepilot"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap()
}

fn loop_trace(pages: u64, sweeps: u64) -> String {
    (0..sweeps)
        .flat_map(|_| 0..pages)
        .map(|p| format!("{p}\n"))
        .collect()
}

#[test]
fn test_sim_json_reports_every_policy_and_size_with_the_required_keys() {
    let path = trace_file("loop.txt", &loop_trace(10, 5));
    let out = sim(&[
        path.to_str().unwrap(),
        "--policy",
        "lru,opt,fifo",
        "--frames",
        "4,10",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for key in ["policy", "frames", "references", "faults", "cold_faults"] {
        assert!(rows.iter().all(|r| r.get(key).is_some()), "{key}");
    }
    // LRU on a loop larger than memory faults on every reference.
    assert_eq!(rows[0]["policy"], "lru");
    assert_eq!(rows[0]["faults"], 50);
    assert_eq!(rows[1]["faults"], 10);
    // Progress goes to a terminal only: stderr stays clean in a pipe.
    assert!(out.stderr.is_empty());
}

#[test]
fn test_sim_rejects_unknown_policy_empty_trace_and_opt_in_global_mode() {
    let path = trace_file("small.txt", &loop_trace(3, 2));
    let p = path.to_str().unwrap();
    let out = sim(&[p, "--policy", "lru,nosuch", "--frames", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("nosuch") && err.contains("clock"), "{err}");

    let empty = trace_file("empty.txt", "# nothing here\n");
    let out = sim(&[empty.to_str().unwrap(), "--frames", "2"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no references"));

    let out = sim(&["--global", p, p, "--policy", "opt", "--frames", "2"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("global mode"));
}

#[test]
fn test_sim_global_mode_reports_the_run_and_each_process_as_csv() {
    let a = trace_file("a.txt", &loop_trace(5, 4));
    let b = trace_file("b.txt", &loop_trace(3, 2));
    let out = sim(&[
        "--global",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--policy",
        "lru,clock",
        "--frames",
        "8",
        "--quantum",
        "4",
        "--service",
        "10",
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("policy,frames,process,references,faults,cold_faults"));
    assert_eq!(lines.len(), 1 + 2 * 3);
    // Memory holds all 8 pages: only first touches fault.
    assert!(lines[1].starts_with("lru,8,all,26,8,8,"), "{}", lines[1]);
}

/// Runs of consecutive pages of several lengths between scattered pages:
/// SEQ's fault counts change with L on it.
fn runs_trace() -> String {
    let mut x = 18u64;
    let mut pages = Vec::new();
    for i in 0..300u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = 2 + (x >> 33) % 40;
        let start = (x >> 20) % 900;
        pages.extend(start..start + len);
        pages.extend((0..i % 7).map(|k| (x >> (k + 8)) % 1000));
    }
    pages.iter().map(|p| format!("{p}\n")).collect()
}

fn faults_of(out: &Output) -> Vec<(String, u64, u64)> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let policy = r["policy"].as_str().unwrap().to_string();
            (
                policy,
                r["frames"].as_u64().unwrap(),
                r["faults"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn test_sweep_counts_equal_separate_runs_at_each_point() {
    let path = trace_file("runs.txt", &runs_trace());
    let p = path.to_str().unwrap();
    let json = ["--frames", "150,400", "--format", "json"];
    let swept = faults_of(&sim(&[&[p, "--sweep", "seq:L=2..30:4"][..], &json].concat()));
    assert_eq!(swept.len(), 8 * 2);
    let mut specs = Vec::new();
    for (i, l) in (2..=30).step_by(4).enumerate() {
        let spec = format!("seq:L={l}");
        let alone = faults_of(&sim(&[&[p, "--policy", &spec][..], &json].concat()));
        assert_eq!(alone[..], swept[2 * i..2 * i + 2], "{spec}");
        specs.push(spec);
    }
    let mut counts: Vec<u64> = swept.iter().map(|r| r.2).collect();
    counts.sort_unstable();
    counts.dedup();
    assert!(
        counts.len() > 2,
        "L changes nothing on this trace: {counts:?}"
    );
}

#[test]
fn test_sweep_with_a_baseline_prints_parameter_columns_and_plots() {
    let path = trace_file("runs-plot.txt", &runs_trace());
    let plot = path.with_extension("svg");
    let out = sim(&[
        path.to_str().unwrap(),
        "--policy",
        "lru",
        "--sweep",
        "seq:L=4,16,M=20,50",
        "--frames",
        "200",
        "--format",
        "csv",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 1 + 4, "{text}");
    assert!(lines[0].starts_with("policy,L,M,frames,"), "{text}");
    assert!(lines[1].starts_with("lru,,,200,"), "{text}");
    assert!(lines[3].starts_with("\"seq:L=4,M=50\",4,50,200,"), "{text}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("parameter L") && svg.contains("200 frames, M=50"));
}

#[test]
fn test_bad_sweep_specs_exit_non_zero_naming_what_is_wrong() {
    let path = trace_file("sweep-bad.txt", &loop_trace(10, 3));
    let p = path.to_str().unwrap();
    for (spec, says) in [
        ("seq:L=64..2", "empty range"),
        ("seq:L=2..64:0", "step of zero"),
        ("seq:Q=2..4", "L, M, N, X"),
        ("sqe:L=2..4", "unknown policy `sqe`"),
        ("fifo:L=2", "takes no parameters"),
        ("seq:N=0..3", "seq:N=0"),
        ("seq:L=2..x", "`x` is not a non-negative integer"),
        ("seq", "nothing to sweep"),
    ] {
        let out = sim(&[p, "--sweep", spec, "--frames", "4"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{spec}: {err}");
        assert!(
            err.contains("--sweep") && err.contains(says),
            "{spec}: {err}"
        );
        assert!(!err.contains("panicked"), "{spec}: {err}");
        assert!(out.stdout.is_empty(), "{spec}");
    }
}

#[test]
fn test_sim_pool_gives_each_process_its_policy_and_minimum_and_plots_frames_held() {
    // Two cyclic scans of 300 pages, 5 passes, 200 frames guaranteed each.
    let a = trace_file("pool-a.txt", &loop_trace(300, 5));
    let b = trace_file("pool-b.txt", &loop_trace(300, 5));
    let plot = std::env::temp_dir().join(format!("pagepilot-pool-{}.svg", std::process::id()));
    let out = sim(&[
        "--global",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--pool",
        "400",
        "--policies",
        "mru-live,clock",
        "--min-frames",
        "200",
        "--format",
        "json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let procs = run["processes"].as_array().unwrap();
    assert_eq!(procs[0]["policy"], "mru-live");
    // MRU by faults: HiPEC's PF_m plus one per pass; CLOCK: every reference.
    assert_eq!(procs[0]["faults"], 300 + 100 * 4 + 4);
    assert_eq!(procs[1]["faults"], 1500);
    for key in [
        "held_max",
        "reclaims",
        "forced_reclaims",
        "postponed",
        "postponed_delay_mean",
    ] {
        assert!(procs.iter().all(|p| p.get(key).is_some()), "{key}");
    }
    assert!(!run["samples"].as_array().unwrap().is_empty());
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("<svg") && svg.contains("frames held"), "plot");
    std::fs::remove_file(&plot).ok();

    // RAPHA in the table: limits per period, postponed faults reported.
    let out = sim(&[
        "--global",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--pool",
        "400",
        "--fault-limit",
        "5,3",
        "--fault-period",
        "100",
        "--reserve",
        "10,20",
        "--quantum",
        "100",
        "--service",
        "10",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("RAPHA: system limit 70"), "{table}");
    assert!(table.contains("postponed"), "{table}");
}

#[test]
fn test_sim_pool_rejects_bad_settings_with_clear_errors() {
    let a = trace_file("pool-bad.txt", &loop_trace(10, 2));
    let p = a.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        // The pool smaller than the minimums.
        (
            &["--pool", "100", "--min-frames", "60,50"],
            "smaller than the sum",
        ),
        (&["--pool", "0"], "at least one frame"),
        (
            &["--pool", "100", "--min-frames", "10,20,30"],
            "--min-frames: 3 values for 2 traces",
        ),
        (
            &["--pool", "100", "--fault-limit", "4", "--fault-period", "0"],
            "period must be positive",
        ),
        (
            &[
                "--pool",
                "100",
                "--fault-limit",
                "0",
                "--fault-period",
                "10",
            ],
            "at least one fault per period",
        ),
        (&["--pool", "100", "--fault-limit", "4"], "fault period"),
        (
            &["--pool", "100", "--fault-period", "10"],
            "without --fault-limit",
        ),
        (
            &[
                "--pool",
                "100",
                "--fault-limit",
                "10",
                "--fault-period",
                "100",
                "--reserve",
                "50,45",
            ],
            "Eq. 2",
        ),
        (
            &[
                "--pool",
                "100",
                "--fault-limit",
                "1",
                "--fault-period",
                "10",
                "--reserve",
                "150",
            ],
            "percentage",
        ),
        (
            &["--pool", "100", "--frames", "50"],
            "--frames does not apply",
        ),
        (&["--pool", "100", "--format", "csv"], "csv"),
        (&["--pool", "100", "--policies", "nosuch"], "nosuch"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["--global", p, p];
        args.extend_from_slice(extra);
        let out = sim(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} succeeded");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
    }
    // --pool belongs to --global.
    let out = sim(&[p, "--pool", "100"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--global"));
}
