//! Compiles C programs against `include/pagepilot.h` and the built
//! `libpagepilot.so` with the system's C compiler and runs them: the C API as
//! a C program sees it (mapping, touching, data checks, bad input).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`, where cargo put `libpagepilot.so` for this test run.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/c_api-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh scratch directory on the disk (target/tmp), not tmpfs.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Compiles `source` against the header and the library; returns the executable.
fn compile(source: &Path, out: &Path) -> PathBuf {
    let lib = lib_dir();
    assert!(
        lib.join("libpagepilot.so").exists(),
        "libpagepilot.so not built in {}",
        lib.display()
    );
    let exe = out.join(source.file_stem().expect("source name"));
    let status = Command::new("gcc")
        .args(["-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(repo_root().join("include"))
        .arg(source)
        .arg("-L")
        .arg(&lib)
        .arg("-lpagepilot")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed on {}", source.display());
    exe
}

#[test]
fn test_c_program_maps_touches_and_refuses_bad_input() {
    let dir = scratch("capi");
    let exe = compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/api_test.c"),
        &dir,
    );
    let out = Command::new(&exe)
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
    let out = Command::new(&exe)
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
