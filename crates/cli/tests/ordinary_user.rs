//! The `pagepilot` command run by an ordinary user (`nobody`): the demo
//! without the kernel's rows (its baseline needs root), and, with no way
//! into userfaultfd left (a seccomp filter refuses the system call, as in a
//! container), `doctor` failing with the fix and a map refused with every
//! way named.

#[path = "../../capi/tests/common/no_userfaultfd.rs"]
mod no_userfaultfd;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use no_userfaultfd::{as_nobody_without_userfaultfd, assert_names_every_way_and_its_fix};

/// A fresh directory every user may write in, under the build's scratch
/// directory (whose parents every user may enter).
fn open_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn pagepilot() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_pagepilot"))
}

/// `pagepilot args` as `nobody` in no group, userfaultfd as the machine
/// allows it (the sysctl is 0 on a fresh machine: user-mode-only).
fn as_nobody(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(pagepilot())
        .args(args)
        .output()
        .expect("run pagepilot as nobody")
}

#[test]
fn test_the_demo_runs_for_an_ordinary_user_and_says_why_the_kernel_rows_are_missing() {
    let dir = open_dir("demo-nobody");
    let out = as_nobody(&["demo", "--out", dir.join("plots").to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed for nobody: {}\n{stdout}",
        text(&out.stderr)
    );
    // The live join ran its pagepilot rows with defaults...
    let row = |label: &str| stdout.lines().find(|l| l.trim_start().starts_with(label));
    for label in ["lru defaults", "mru defaults", "seq defaults"] {
        assert!(row(label).is_some(), "no {label:?} row:\n{stdout}");
    }
    // ...and no kernel row, saying why once.
    assert!(row("kernel").is_none(), "{stdout}");
    assert_eq!(stdout.matches("no kernel rows: ").count(), 1, "{stdout}");
    assert!(stdout.contains("needs root"), "{stdout}");
}

#[test]
fn test_doctor_exits_non_zero_with_the_fix_when_no_way_into_userfaultfd_is_left() {
    let out = as_nobody_without_userfaultfd(pagepilot())
        .args(["doctor", "--format", "json"])
        .output()
        .expect("run doctor");
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("this user cannot map a region"),
        "{}",
        text(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert!(report["uffd_access"].is_null(), "{report}");
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} check: {report}"))
            .clone()
    };
    assert_eq!(check("userfaultfd")["state"], "fail", "{report}");
    let seccomp = check("seccomp");
    assert_eq!(seccomp["state"], "fail", "{report}");
    assert!(
        seccomp["fix"]
            .as_str()
            .unwrap()
            .contains("container's profile"),
        "{seccomp}"
    );
    // The other checks still ran: the file system's, the cgroup's.
    assert_eq!(check("memory cgroup")["state"], "warn", "{report}");
}

#[test]
fn test_a_command_refused_userfaultfd_names_each_way_and_its_fix() {
    let dir = open_dir("join-refused");
    let out = as_nobody_without_userfaultfd(pagepilot())
        .args(["bench", "join", "--outer-mb", "8", "--budget-mb", "4"])
        .args(["--policies", "mru", "--loops", "2", "--dir"])
        .arg(&dir)
        .output()
        .expect("run bench join");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success(),
        "mapped without userfaultfd: {stderr}"
    );
    let message = stderr
        .lines()
        .find(|l| l.starts_with("pagepilot: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert_names_every_way_and_its_fix(message);
}
