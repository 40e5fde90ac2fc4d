//! Compiles C programs against `include/pagepilot.h` and the built
//! `libpagepilot.so` with the system's C compiler and runs them: the C API as
//! a C program sees it (mapping, touching, data checks, bad input).

mod common;

use std::path::{Path, PathBuf};

use common::{c_program, compile, repo_root};

/// A fresh scratch directory on the disk (target/tmp), not tmpfs.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn test_c_program_maps_touches_and_refuses_bad_input() {
    let dir = scratch("capi");
    let exe = compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/api_test.c"),
        &dir,
    );
    let out = c_program(&exe)
        .arg(&dir)
        .output()
        .expect("run the C test program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && stdout.contains("\nOK\n"),
        "C test program failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Each refusal carried a message to the C side.
    for what in [
        "missing file",
        "unknown policy",
        "budget below one page",
        "read-only file mapped writable",
    ] {
        assert!(
            stdout.contains(&format!("refused {what}: ")),
            "no refusal of {what}:\n{stdout}"
        );
    }
}

#[test]
fn test_c_example_builds_and_runs() {
    let dir = scratch("capi-example");
    let exe = compile(&repo_root().join("examples/c/pagepilot_example.c"), &dir);
    let out = c_program(&exe)
        .arg(dir.join("example.dat"))
        .output()
        .expect("run the example");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sum ok"),
        "example failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
