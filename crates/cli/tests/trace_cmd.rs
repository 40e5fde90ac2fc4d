//! `pagepilot trace ...` end to end: real files, the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn pagepilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagepilot"))
        .args(args)
        .output()
        .unwrap()
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pagepilot-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stats_json(path: &Path) -> serde_json::Value {
    let out = pagepilot(&["trace", "stats", s(path), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn test_trace_stats_counts_references_pages_footprint_writes() {
    let dir = scratch("stats");
    let f = dir.join("t.txt");
    std::fs::write(&f, "# x\n1\n2 w\n0x1\n3\n2\n").unwrap();
    let v = stats_json(&f);
    assert_eq!(v["references"], 5);
    assert_eq!(v["distinct_pages"], 3);
    assert_eq!(v["footprint_bytes"], 3 * 4096);
    assert_eq!(v["writes"], 1);
    assert_eq!(v["format"], "text");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_trace_errors_exit_nonzero_naming_file_and_position() {
    let dir = scratch("errors");
    let f = dir.join("bad.txt");
    std::fs::write(&f, "1\n2\nthree\n").unwrap();
    let out = pagepilot(&["trace", "stats", s(&f)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.txt: line 3"), "{err}");

    let e = dir.join("empty.txt");
    std::fs::write(&e, "# nothing\n").unwrap();
    let out = pagepilot(&["trace", "stats", s(&e)]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no references"));

    let out = pagepilot(&["trace", "convert", s(&f), "-o", "x", "--to", "lackey"]);
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_trace_convert_round_trips_through_binary_and_zstd() {
    let dir = scratch("convert");
    let lk = dir.join("run.lackey");
    std::fs::write(&lk, "==1== hi\n L 0ffe,4\n S 5000,8\nI  1000,2\n").unwrap();
    let bin = dir.join("run.pptrace.zst");
    let out = pagepilot(&[
        "trace",
        "convert",
        s(&lk),
        "-o",
        s(&bin),
        "--page-size",
        "4k",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let txt = dir.join("back.txt");
    let out = pagepilot(&["trace", "convert", s(&bin), "-o", s(&txt)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&txt).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "# pagepilot page trace, page size 4096 bytes",
            "0",
            "1",
            "5 w"
        ]
    );
    let v = stats_json(&bin);
    assert_eq!(v["format"], "binary");
    assert_eq!(v["references"], 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_trace_record_runs_the_program_under_lackey() {
    // CI has valgrind (scripts/setup installs it): its absence is a failure, not a skip.
    let have = Command::new("valgrind").arg("--version").output();
    assert!(
        have.is_ok_and(|o| o.status.success()),
        "valgrind is not installed: `trace record` runs programs under it (scripts/setup installs it)"
    );
    let dir = scratch("record");
    let path = dir.join("true.pptrace");
    let out = pagepilot(&[
        "trace",
        "record",
        "--page-size",
        "8192",
        "-o",
        s(&path),
        "--",
        "/bin/true",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = stats_json(&path);
    assert_eq!(v["page_size"], 8192);
    assert!(v["references"].as_u64().unwrap() > 1000);
    assert!(v["writes"].as_u64().unwrap() > 0);
    let out = pagepilot(&["trace", "record", "-o", s(&path), "--", "/bin/false"]);
    assert!(!out.status.success(), "the program's failure is reported");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_trace_convert_writes_oracle_general_that_reads_back_and_record_refuses_it() {
    let dir = scratch("oracle");
    let text = dir.join("t.txt");
    std::fs::write(&text, "5\n9\n5\n0x20\n9\n").unwrap();
    let lcs = dir.join("t.oracleGeneral");
    let out = pagepilot(&["trace", "convert", s(&text), "-o", s(&lcs)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&lcs).unwrap().len(), 5 * 24);
    let back = dir.join("back.txt");
    let out = pagepilot(&["trace", "convert", s(&lcs), "-o", s(&back)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: Vec<String> = std::fs::read_to_string(&back)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.trim().to_string())
        .collect();
    let expected: Vec<String> = ["5", "9", "5", "32", "9"].map(String::from).into();
    let hex: Vec<String> = ["0x5", "0x9", "0x5", "0x20", "0x9"]
        .map(String::from)
        .into();
    assert!(pages == expected || pages == hex, "{pages:?}");

    let out = pagepilot(&[
        "trace",
        "record",
        "-o",
        s(&lcs),
        "--to",
        "oracle-general",
        "--",
        "true",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot record"));
}
