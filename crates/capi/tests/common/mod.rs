//! Helpers of the C API's tests: compiling C programs against the header
//! and the `libpagepilot.so` built for this test run, and running them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding the `libpagepilot.so` built for this test run:
/// `target/<profile>/deps` (where `cargo test` alone leaves it), else
/// `target/<profile>` (after `cargo build`).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash>
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    if deps.join("libpagepilot.so").exists() {
        return deps;
    }
    deps.parent().expect("target/<profile>").to_path_buf()
}

/// The workspace's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles `source` against the header and the library; returns the executable.
pub fn compile(source: &Path, out: &Path) -> PathBuf {
    let lib = lib_dir();
    assert!(
        lib.join("libpagepilot.so").exists(),
        "libpagepilot.so not built in {}",
        lib.display()
    );
    let exe = out.join(source.file_stem().expect("source name"));
    let status = Command::new("gcc")
        .args([
            "-std=gnu11",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pthread",
            "-I",
        ])
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

/// A command running a compiled C program: with the library it was linked
/// against (its rpath), not one an earlier `cargo build` left on the
/// `LD_LIBRARY_PATH` cargo sets for tests.
pub fn c_program(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env_remove("LD_LIBRARY_PATH");
    cmd
}

/// `tests/c/<name>.c`, compiled into `target/tmp/<name>-bin-PID` for this
/// run of the test binary (directories of runs that have ended are
/// removed): call once per run (from a `OnceLock`).
pub fn compile_for_this_run(name: &str) -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let prefix = format!("{name}-bin-");
    for entry in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let entry_name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = entry_name.strip_prefix(&prefix) {
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = tmp.join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bin dir");
    compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c")),
        &dir,
    )
}
