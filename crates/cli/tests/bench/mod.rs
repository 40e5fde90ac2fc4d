//! Running `pagepilot bench ...` as a user does, one benchmark at a time,
//! and checking that a run left nothing behind; shared by the benchmarks'
//! CLI tests.
#![allow(dead_code)]

use std::process::{Command, Output};

use serde_json::Value;

/// Held while a benchmark runs: benchmarks drop the whole page cache before
/// their cold runs, which would empty a warm case of another benchmark
/// running beside it (and both time what they do), so they run one at a time.
static ONE_BENCH_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn pagepilot(args: &[&str]) -> (Output, u32) {
    let _alone = ONE_BENCH_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let child = Command::new(env!("CARGO_BIN_EXE_pagepilot"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start pagepilot");
    let pid = child.id();
    (child.wait_with_output().expect("run pagepilot"), pid)
}

pub fn json(args: &[&str]) -> Value {
    let (out, pid) = pagepilot(args);
    assert!(
        out.status.success(),
        "pagepilot {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_cleaned_up(pid);
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// Each `(args, flag)` is refused: a failure naming `flag`, no panic,
/// nothing left behind.
pub fn assert_refused_naming(cases: &[(&[&str], &str)]) {
    for (args, flag) in cases {
        let (out, pid) = pagepilot(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(flag),
            "{args:?}: error {err:?} does not name {flag}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert_cleaned_up(pid);
    }
}

/// Neither memory cgroups nor data files of run `pid` are left behind.
pub fn assert_cleaned_up(pid: u32) {
    let prefix = format!("pagepilot-{pid}-");
    if let Ok(cgroups) = std::fs::read_dir("/sys/fs/cgroup/memory") {
        for e in cgroups.flatten() {
            assert!(
                !e.file_name().to_string_lossy().starts_with(&prefix),
                "cgroup left: {e:?}"
            );
        }
    }
    let files = std::fs::read_dir(std::env::temp_dir()).expect("temp dir");
    let prefix = format!("pagepilot-bench-{pid}-");
    for e in files.flatten() {
        assert!(
            !e.file_name().to_string_lossy().starts_with(&prefix),
            "file left: {e:?}"
        );
    }
}
