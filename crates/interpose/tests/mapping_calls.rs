//! The mapping calls under `pagepilot run`. Each test runs one mode of
//! `tests/c/mapping_calls.c` (mmap at offsets and addresses, shared and
//! private stores, partial munmap, mremap, msync, madvise, mprotect, file
//! I/O beside a mapping, fork, exec) twice: plainly, and under `pagepilot
//! run --min-size 0 --budget 64K` (16 frames for 1 MiB files, so pages are
//! evicted and written back). It asserts the same exit status, the same
//! stdout byte for byte and byte-identical files left behind, and that the
//! interposer's log shows the data file taken over (not left to the
//! kernel), except where leaving a mapping to the kernel is allowed.
//!
//! The C program checks the kernel's semantics itself (a failed check
//! prints `FAIL` and exits 1), so the plain run must succeed: it is the
//! reference the run under `pagepilot run` is held to.

use harness::{pattern, run_both, stamp_byte};

/// Compiling the C program, running it both ways under a watchdog, and
/// comparing what the two runs left.
mod harness {
    use std::fs::File;
    use std::path::{Path, PathBuf};
    use std::process::{Command, ExitStatus};
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    /// A run still going after this is killed, and the test fails.
    const WATCHDOG: Duration = Duration::from_secs(60);
    /// The file each mode creates in its scratch directory.
    pub const DATA: &str = "data";

    /// Byte `off` of a data file as created (as `pattern` in the C program).
    pub fn pattern(off: usize) -> u8 {
        (off.wrapping_mul(7) + (off >> 12) * 31 + 3) as u8
    }

    /// Byte `i` of the C program's stamp `seed` (as `stamp_byte` there).
    pub fn stamp_byte(seed: usize, i: usize) -> u8 {
        (seed * 0x9d + i * 13 + (i >> 12)) as u8
    }

    /// `tests/c/mapping_calls.c`, compiled once per run of this test binary
    /// into `target/tmp/mapping_calls-bin-PID` (those of ended runs removed).
    fn program() -> &'static Path {
        static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
        PROGRAM.get_or_init(|| {
            let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
            let prefix = "mapping_calls-bin-";
            for entry in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix(prefix) {
                    if !Path::new("/proc").join(pid).exists() {
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
            }
            let dir = tmp.join(format!("{prefix}{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("the program's directory");
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mapping_calls.c");
            let exe = dir.join("mapping_calls");
            let out = Command::new("cc")
                .args(["-O1", "-Wall", "-Werror", "-o"])
                .arg(&exe)
                .arg(&source)
                .output()
                .expect("run cc");
            assert!(
                out.status.success(),
                "cc failed on {}:\n{}",
                source.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            exe
        })
    }

    /// How one run ended.
    pub struct Run {
        /// Its exit status.
        pub status: ExitStatus,
        /// Its standard output.
        pub stdout: String,
        /// Its standard error.
        pub stderr: String,
    }

    /// Runs `command` in a process group of its own, output to files in
    /// `out` (a child left behind cannot hold a pipe open); past the
    /// watchdog the group is killed and the test fails.
    fn run_watched(command: &mut Command, out: &Path, label: &str) -> Run {
        use std::os::unix::process::CommandExt;
        let (stdout, stderr) = (
            out.join(format!("{label}.out")),
            out.join(format!("{label}.err")),
        );
        let mut child = command
            .stdout(File::create(&stdout).expect("stdout file"))
            .stderr(File::create(&stderr).expect("stderr file"))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{label} run: cannot start {command:?}: {e}"));
        let start = Instant::now();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"));
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the program") {
                break status;
            }
            if start.elapsed() > WATCHDOG {
                let pgid = child.id() as libc::pid_t;
                // Where every thread stands, before the kill.
                let stacks = pagepilot_testkit::hang::report(pgid);
                // SAFETY: kill(2) of the process group the child leads; no memory is involved.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                let _ = child.wait();
                panic!(
                    "{label} run of {command:?} still running after {WATCHDOG:?}: killed (a hang)\n\
                     --- stdout\n{}--- stderr\n{}--- where it hung\n{stacks}",
                    read(&stdout),
                    read(&stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Run {
            status,
            stdout: read(&stdout),
            stderr: read(&stderr),
        }
    }

    /// The two runs of one mode and what they left.
    pub struct Both {
        /// The plain run (in scratch directory A).
        pub plain: Run,
        /// The run under `pagepilot run` (in scratch directory B).
        pub piloted: Run,
        /// The interposer's log of the second run.
        pub log: String,
        /// The data file of the second run, as the interposer names it.
        pub data_b: PathBuf,
        /// The data file's bytes (the same in both).
        pub data: Vec<u8>,
    }

    /// The lines that differ between `a` and `b` (at most 12).
    fn line_diff(a: &str, b: &str) -> String {
        let (la, lb): (Vec<_>, Vec<_>) = (a.lines().collect(), b.lines().collect());
        let mut diff = String::new();
        let mut shown = 0;
        for i in 0..la.len().max(lb.len()) {
            let (x, y) = (la.get(i).copied(), lb.get(i).copied());
            if x != y && shown < 12 {
                shown += 1;
                diff += &format!(
                    "line {}:\n  plain:    {}\n  piloted:  {}\n",
                    i + 1,
                    x.unwrap_or("<none>"),
                    y.unwrap_or("<none>")
                );
            }
        }
        diff
    }

    /// Asserts directories `a` and `b` hold the same files with the same bytes.
    fn assert_same_files(a: &Path, b: &Path, context: &str) {
        let names = |d: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .expect("a scratch directory")
                .map(|e| e.expect("an entry").file_name())
                .collect();
            v.sort();
            v
        };
        let (na, nb) = (names(a), names(b));
        assert_eq!(na, nb, "the runs left different files{context}");
        for name in na {
            let (x, y) = (
                std::fs::read(a.join(&name)).unwrap(),
                std::fs::read(b.join(&name)).unwrap(),
            );
            if x != y {
                let first = x
                    .iter()
                    .zip(&y)
                    .position(|(p, q)| p != q)
                    .unwrap_or(x.len().min(y.len()));
                panic!(
                    "{name:?} differs: plain {} bytes, piloted {} bytes, first difference at byte {first} \
                     (plain {:?}, piloted {:?}){context}",
                    x.len(), y.len(), x.get(first), y.get(first)
                );
            }
        }
    }

    /// Runs `mode` plainly (which must succeed), then under `pagepilot
    /// run`, and asserts the same status, stdout and files.
    pub fn run_both(mode: &str) -> Both {
        let (program, pagepilot) = (
            program(),
            pagepilot_testkit::run::pagepilot_beside_interposer(),
        );
        let scratch = || tempfile::tempdir().expect("a scratch directory");
        let (out, a, b) = (scratch(), scratch(), scratch());
        let (a, b) = (
            a.path().canonicalize().unwrap(),
            b.path().canonicalize().unwrap(),
        );
        let mut plain = Command::new(program);
        plain.arg(mode).arg(&a).env_remove("LD_PRELOAD");
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("PAGEPILOT_RUN") {
                plain.env_remove(var);
            }
        }
        let plain = run_watched(&mut plain, out.path(), "plain");
        assert!(
            plain.status.success(),
            "the plain run of mode {mode} failed ({}): the kernel does not do what the test expects\n\
             --- stdout\n{}--- stderr\n{}",
            plain.status, plain.stdout, plain.stderr
        );
        let log_path = out.path().join("run.log");
        let mut piloted = Command::new(pagepilot);
        piloted.args(["run", "--min-size", "0", "--budget", "64K", "--log"]);
        piloted
            .arg(&log_path)
            .arg("--")
            .arg(program)
            .arg(mode)
            .arg(&b);
        let piloted = run_watched(&mut piloted, out.path(), "piloted");
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let context = format!(
            "\n--- piloted stdout\n{}--- piloted stderr\n{}--- log\n{log}",
            piloted.stdout, piloted.stderr
        );
        assert!(
            piloted.stdout == plain.stdout,
            "the outputs differ:\n{}{context}",
            line_diff(&plain.stdout, &piloted.stdout)
        );
        assert_eq!(
            piloted.status, plain.status,
            "the exit statuses differ{context}"
        );
        assert_same_files(&a, &b, &context);
        let data = std::fs::read(a.join(DATA)).expect("the data file");
        Both {
            plain,
            piloted,
            log,
            data_b: b.join(DATA),
            data,
        }
    }

    impl Both {
        /// Asserts the log shows the data file taken over, at least `times`
        /// times, as `kind` (`shared read`, `shared write`, `private read`,
        /// or `shared` for either): the one place these assertions live.
        pub fn assert_took(&self, kind: &str, times: usize) {
            let took = format!("]: took {} offset=", self.data_b.display());
            let kind = format!(" {kind} ");
            let n = self
                .log
                .lines()
                .filter(|l| l.contains(&took) && l.contains(&kind))
                .count();
            assert!(
                n >= times,
                "the log shows {} taken as{kind}{n} times, want at least {times}:\n{}",
                self.data_b.display(),
                self.log
            );
        }
    }
}

#[test]
fn shared_mapping_at_an_offset_reads_the_file_as_the_kernel_does() {
    run_both("offset").assert_took("shared read", 2);
}

#[test]
fn address_hints_and_fixed_mappings_land_where_the_kernel_puts_them() {
    // MAP_FIXED may be left to the kernel; the hint and NOREPLACE ones not.
    run_both("placement").assert_took("shared read", 2);
}

#[test]
fn shared_stores_reach_the_file_after_munmap_msync_and_exit() {
    let both = run_both("shared-write");
    both.assert_took("shared write", 3);
    // The last 512K were stored and the program exited without munmap.
    let half = both.data.len() / 2;
    assert_eq!(both.data.len(), 1 << 20);
    let stored = both.data[half..]
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == stamp_byte(4, i))
        .count();
    assert_eq!(
        stored, half,
        "the stores made before exit are not all in the file"
    );
}

#[test]
fn two_shared_mappings_of_one_file_see_each_others_stores_at_once() {
    run_both("two-shared").assert_took("shared write", 3);
}

#[test]
fn private_mappings_read_the_file_and_keep_their_stores_private() {
    let both = run_both("private");
    // A writable private mapping may be left to the kernel; a read-only one not.
    both.assert_took("private read", 1);
    let unchanged = both
        .data
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == pattern(i))
        .count();
    assert_eq!(unchanged, 1 << 20, "private stores reached the file");
}

#[test]
fn munmap_of_middle_pages_keeps_the_rest_and_faults_in_the_hole() {
    run_both("partial-unmap").assert_took("shared write", 1);
}

#[test]
fn mremap_grows_shrinks_and_moves_a_file_mapping_with_its_contents() {
    run_both("mremap").assert_took("shared write", 1);
}

#[test]
fn msync_flags_and_errors_are_the_kernels() {
    run_both("msync").assert_took("shared write", 1);
}

#[test]
fn madvise_keeps_a_shared_mappings_stores_and_changes_no_content() {
    run_both("madvise").assert_took("shared write", 1);
}

#[test]
fn mprotect_faults_stores_to_read_only_and_loads_from_none_and_comes_back() {
    run_both("mprotect").assert_took("shared write", 1);
}

#[test]
fn file_io_truncation_and_hole_punching_are_seen_through_the_mapping() {
    run_both("fd-io").assert_took("shared write", 1);
}

#[test]
fn a_forked_child_and_its_parent_see_each_others_stores() {
    run_both("fork").assert_took("shared write", 1);
}

#[test]
fn an_execd_image_reads_the_stores_of_the_image_before_it() {
    let both = run_both("exec");
    // One mapping before exec, one after: the interposer is in both images.
    both.assert_took("shared write", 2);
    assert!(
        both.plain
            .stderr
            .contains("exec'd image: PAGEPILOT_RUN=unset"),
        "plain run's stderr: {}",
        both.plain.stderr
    );
    assert!(
        both.piloted
            .stderr
            .contains("exec'd image: PAGEPILOT_RUN=1"),
        "under pagepilot run the exec'd image has no PAGEPILOT_RUN=1: {}",
        both.piloted.stderr
    );
}
