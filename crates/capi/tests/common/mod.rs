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

/// A test's scratch directory under `target/tmp` (`NAME-PID`), removed on
/// drop unless the test is failing (then kept, and named, to look at).
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh, empty scratch directory `name`.
    pub fn new(name: &str) -> Scratch {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    /// The path of `name` in it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The text of file `name`, or a note of why it cannot be read.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).unwrap_or_else(|e| format!("<{name}: {e}>"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch directory kept: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Kills process group `pgid` (a program and the children it left behind).
pub fn kill_group(pgid: i32) {
    // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

/// How a program run by [`run_watched`] ended.
pub struct Watched {
    /// Its exit status; `None`: it ran past the watchdog and was killed.
    pub status: Option<std::process::ExitStatus>,
    /// Its process group (its pid): children it left behind are in it.
    pub pgid: i32,
    /// Its stdout and stderr, labelled.
    pub output: String,
}

/// Runs `command` in a process group of its own, its output to
/// `stdout.txt` and `stderr.txt` in `dir` (a child that outlives it cannot
/// hold a pipe open), calling `tick` every `poll` while it runs; past
/// `watchdog` the group is killed.
pub fn run_watched(
    command: &mut Command,
    dir: &Scratch,
    watchdog: std::time::Duration,
    poll: std::time::Duration,
    mut tick: impl FnMut(&mut std::process::Child),
) -> Watched {
    use std::os::unix::process::CommandExt;
    let file = |name| std::fs::File::create(dir.file(name)).expect("output file");
    let mut child = command
        .stdout(file("stdout.txt"))
        .stderr(file("stderr.txt"))
        .process_group(0)
        .spawn()
        .expect("run the program");
    let pgid = child.id() as i32;
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the program") {
            break Some(status);
        }
        tick(&mut child);
        if start.elapsed() > watchdog {
            // Where every thread of the group stands, before the kill.
            let report = pagepilot_testkit::hang::report(pgid);
            let _ = std::fs::write(dir.file("hang.txt"), report);
            kill_group(pgid);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(poll);
    };
    let mut output = format!(
        "--- stdout\n{}--- stderr\n{}",
        dir.read("stdout.txt"),
        dir.read("stderr.txt")
    );
    if status.is_none() {
        output += &format!("--- where it hung\n{}", dir.read("hang.txt"));
    }
    Watched {
        status,
        pgid,
        output,
    }
}
