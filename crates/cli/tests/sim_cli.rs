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
