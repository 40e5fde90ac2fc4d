//! One error convention: a cause is in its error's message or returned by
//! `source()`, never both, so an error shown with its causes (`chain`, as
//! the CLI, the C API and Python show them) names each cause once. Errors
//! here come from real failing operations of several crates.

use std::error::Error;
use std::path::Path;
use std::process::Command;

use pagepilot_pager::dataspace::PersistentManager;
use pagepilot_pager::Region;
use pagepilot_policy::chain;

/// Asserts that no error of `e`'s chain shows its source's text, and that
/// `chain` shows each cause exactly once.
fn assert_each_cause_once(what: &str, e: &(dyn Error + 'static)) {
    let shown = chain(e).to_string();
    let mut err: &dyn Error = e;
    let mut depth = 0;
    while let Some(cause) = err.source() {
        let (message, cause_text) = (err.to_string(), cause.to_string());
        assert!(
            !message.contains(&cause_text),
            "{what}: `{message}` shows its cause `{cause_text}` and returns it from source()"
        );
        assert_eq!(
            shown.matches(&cause_text).count(),
            1,
            "{what}: `{shown}` does not show `{cause_text}` once"
        );
        err = cause;
        depth += 1;
    }
    assert!(depth > 0, "{what}: `{shown}` has no cause to check");
}

/// A path whose parent is a regular file: every open under it fails with
/// ENOTDIR.
fn under_a_file(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    file.join("below")
}

#[test]
fn a_file_region_that_cannot_be_opened_names_the_system_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = Region::map_file(&under_a_file(dir.path()), false, 1 << 20, "lru").unwrap_err();
    assert_eq!(e.errno(), libc::ENOTDIR, "{}", chain(&e));
    assert_each_cause_once("map_file", &e);
}

#[test]
fn a_dataspace_that_cannot_be_created_names_the_system_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = PersistentManager::new(under_a_file(dir.path()))
        .create_named("d", 4096)
        .unwrap_err();
    assert_each_cause_once("create_named", &e);
}

#[test]
fn a_trace_that_cannot_be_read_names_the_system_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = pagepilot_sim::trace::load(&dir.path().join("missing.trace")).unwrap_err();
    assert_each_cause_once("trace::load", &e);
}

#[test]
fn the_cli_shows_why_no_daemon_answers_once() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_pagepilot"))
        .args(["status", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // What failed, then why, each once.
    assert!(err.contains("no daemon answers at"), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}
