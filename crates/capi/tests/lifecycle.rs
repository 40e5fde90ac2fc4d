//! What an ordinary C program does around its regions, each scenario in its
//! own process (`tests/c/lifecycle.c MODE DIR`): exit without unmapping
//! (return from `main`, `exit`, the last thread after `pthread_exit`, in
//! faulting-thread mode), fork (child first, parent first, child touching an
//! anonymous region), exec after fork, and the application's own `SIGBUS`
//! handler (or its default action). Defaults as a new user would write them: `pp_map_file(path, 1,
//! 4 MiB, "lru")` over a 16 MiB file. Each program checks what it reads and
//! exits non-zero on a mismatch; this driver checks its exit status and the
//! files it leaves behind. Every process runs under a watchdog: a hang fails
//! the test with the program's output.

mod common;

use std::fs::{self};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{c_program, compile_for_this_run, kill_group, run_watched, Scratch, Watched};

const PAGE: usize = 4096;
/// Pages of `data.dat`: 16 MiB, four times the 4 MiB budget.
const PAGES: usize = 4096;
/// How long one process may run (or an orphan take to finish) before it counts as hung.
const WATCHDOG: Duration = Duration::from_secs(30);

/// What a page holds; the same numbers as the tags of `lifecycle.c`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tag {
    /// The file's data before the program ran.
    Orig = 0,
    /// The parent's writes before fork.
    P = 1,
    /// The child's writes.
    C = 2,
    /// The parent's writes after the fork.
    Q = 3,
    /// Written just before the process exits.
    W = 4,
}

const TAGS: [Tag; 5] = [Tag::Orig, Tag::P, Tag::C, Tag::Q, Tag::W];

/// Byte `off` of page `page` written with `tag` (`page_byte` in lifecycle.c).
fn page_byte(tag: Tag, page: usize, off: usize) -> u8 {
    let x = (page as u32).wrapping_mul(0x9E37_79B1)
        ^ (off as u32).wrapping_mul(0x85EB_CA77)
        ^ (tag as u32).wrapping_mul(0xC2B2_AE3D);
    (x ^ (x >> 15)) as u8
}

fn page_image(tag: Tag, page: usize) -> Vec<u8> {
    (0..PAGE).map(|off| page_byte(tag, page, off)).collect()
}

/// What page `page` holds: a tag, zeros, or neither.
fn what_is(bytes: &[u8], page: usize) -> String {
    for tag in TAGS {
        if bytes
            .iter()
            .enumerate()
            .all(|(off, &b)| b == page_byte(tag, page, off))
        {
            return format!("{tag:?}");
        }
    }
    if bytes.iter().all(|&b| b == 0) {
        "zeros".into()
    } else {
        "other data".into()
    }
}

fn write_orig(path: &Path, pages: usize) {
    let data: Vec<u8> = (0..pages).flat_map(|p| page_image(Tag::Orig, p)).collect();
    fs::write(path, data).expect("write the original file");
}

/// Ok if page p of the file holds `want(p)` for every page; else how many
/// pages are wrong and what the first one holds.
fn check_file(path: &Path, pages: usize, want: impl Fn(usize) -> Tag) -> Result<(), String> {
    let data = fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    if data.len() != pages * PAGE {
        return Err(format!(
            "{} is {} bytes, want {}",
            path.display(),
            data.len(),
            pages * PAGE
        ));
    }
    let bad: Vec<usize> = (0..pages)
        .filter(|&p| data[p * PAGE..(p + 1) * PAGE] != page_image(want(p), p)[..])
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&p) => Err(format!(
            "{} of {pages} pages of {} are wrong; the first, page {p}, should hold {:?} and holds {}",
            bad.len(),
            path.display(),
            want(p),
            what_is(&data[p * PAGE..(p + 1) * PAGE], p)
        )),
    }
}

/// lifecycle.c, compiled once per run of this test binary (into
/// target/tmp/lifecycle-bin-PID, `compile_for_this_run`).
fn program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_for_this_run("lifecycle"))
}

/// A scratch directory for scenario `name`, holding the original `data.dat`.
fn scratch(name: &str) -> Scratch {
    let dir = Scratch::new(&format!("lifecycle-{name}"));
    write_orig(&dir.file("data.dat"), PAGES);
    dir
}

/// One run of the program: its exit status and its output.
struct Run {
    mode: String,
    status: ExitStatus,
    /// Its process group (its pid): children it left behind are in it.
    pgid: i32,
    output: String,
}

impl Run {
    /// Fails (with the output) unless the program exited 0.
    fn assert_success(&self) {
        if !self.status.success() {
            kill_group(self.pgid);
        }
        assert!(
            self.status.success(),
            "lifecycle {} failed ({}):\n{}",
            self.mode,
            self.status,
            self.output
        );
    }
}

/// Runs `lifecycle MODE DIR` in a process group of its own, output to files
/// in `dir` (a child that outlives the program cannot hold a pipe open);
/// kills the group and fails the test if it runs longer than the watchdog.
fn run(mode: &str, dir: &Scratch) -> Run {
    let Watched {
        status,
        pgid,
        output,
    } = run_watched(
        c_program(program())
            .arg(mode)
            .arg(&dir.0)
            .stdin(Stdio::null()),
        dir,
        WATCHDOG,
        Duration::from_millis(10),
        |_| {},
    );
    match status {
        Some(status) => Run {
            mode: mode.into(),
            status,
            pgid,
            output,
        },
        None => panic!("lifecycle {mode} hung: killed after {WATCHDOG:?}\n{output}"),
    }
}

/// Runs a scenario that must succeed, then checks `data.dat` against `want`.
fn run_and_check(mode: &str, want: impl Fn(usize) -> Tag) -> (Scratch, Run) {
    let dir = scratch(mode);
    let run = run(mode, &dir);
    run.assert_success();
    if let Err(e) = check_file(&dir.file("data.dat"), PAGES, want) {
        panic!("lifecycle {mode}: afterwards {e}\n{}", run.output);
    }
    (dir, run)
}

// ------------------------------------------------------------------ 1. exit

#[test]
fn test_return_from_main_without_unmap_keeps_every_write() {
    run_and_check("exit-return", |_| Tag::W);
}

#[test]
fn test_exit_without_unmap_keeps_every_write_of_every_region() {
    let (dir, run) = run_and_check("exit-exit", |_| Tag::W);
    if let Err(e) = check_file(&dir.file("second.dat"), 1024, |_| Tag::W) {
        panic!(
            "lifecycle exit-exit, the second region: {e}\n{}",
            run.output
        );
    }
}

#[test]
fn test_last_thread_ending_after_main_pthread_exit_keeps_every_write() {
    let (_dir, run) = run_and_check("exit-last-thread", |_| Tag::W);
    assert!(
        run.output.contains("the last thread wrote every page"),
        "{}",
        run.output
    );
}

#[test]
fn test_exit_in_faulting_thread_mode_keeps_every_write() {
    run_and_check("exit-faulting-thread", |_| Tag::W);
}

/// `_exit` skips the exit handlers: pages still dirty in the pager are not
/// guaranteed to reach the file (the daemon is the answer). What the file
/// holds is still whole pages, each the old data or the new, never zeros.
#[test]
fn test_underscore_exit_leaves_whole_old_or_new_pages() {
    let dir = scratch("exit-underscore");
    let run = run("exit-underscore", &dir);
    run.assert_success();
    let data = fs::read(dir.file("data.dat")).expect("read data.dat");
    assert_eq!(data.len(), PAGES * PAGE);
    let mut written = 0;
    for p in 0..PAGES {
        let page = &data[p * PAGE..(p + 1) * PAGE];
        if page == &page_image(Tag::W, p)[..] {
            written += 1;
        } else {
            assert!(
                page == &page_image(Tag::Orig, p)[..],
                "after _exit, page {p} holds {}, neither the old data nor the new",
                what_is(page, p)
            );
        }
    }
    println!(
        "note: after _exit(0), {written} of {PAGES} written pages reached the file \
         (not guaranteed: _exit runs no exit handler)"
    );
}

// ------------------------------------------------------------------ 2. fork

/// The file after a fork scenario in which the parent waited: P on the first
/// half, the original data on the third quarter, C on the last quarter, Q
/// (the parent's writes after the fork) on pages 2560..2816 and on every
/// third page (`fork_final_tag` in lifecycle.c).
fn fork_image(p: usize) -> Tag {
    if p.is_multiple_of(3) || (5 * PAGES / 8..5 * PAGES / 8 + PAGES / 16).contains(&p) {
        Tag::Q
    } else {
        orphan_image(p)
    }
}

/// The file after a fork scenario without the parent's last writes.
fn orphan_image(p: usize) -> Tag {
    if p < PAGES / 2 {
        Tag::P
    } else if p >= 3 * PAGES / 4 {
        Tag::C
    } else {
        Tag::Orig
    }
}

#[test]
fn test_fork_child_and_parent_see_each_others_writes_handler_threads_child_unmaps() {
    run_and_check("fork-handler-unmap", fork_image);
}

#[test]
fn test_fork_child_and_parent_see_each_others_writes_handler_threads_child_exits_mapped() {
    run_and_check("fork-handler-exit", fork_image);
}

#[test]
fn test_fork_child_and_parent_see_each_others_writes_faulting_thread_child_unmaps() {
    run_and_check("fork-faulting-unmap", fork_image);
}

#[test]
fn test_fork_child_and_parent_see_each_others_writes_faulting_thread_child_exits_mapped() {
    run_and_check("fork-faulting-exit", fork_image);
}

/// Parent exits (without unmapping) right after fork; the child waits until
/// it is an orphan, checks, writes, unmaps and leaves `child.done`.
fn child_outlives_parent(mode: &str) {
    let dir = scratch(mode);
    let run = run(mode, &dir);
    let child_log = |dir: &Scratch| {
        format!(
            "{}\n--- the child's log\n{}",
            run.output,
            dir.read("child.log")
        )
    };
    if !run.status.success() {
        kill_group(run.pgid);
        panic!(
            "lifecycle {mode}: the parent failed ({}):\n{}",
            run.status,
            child_log(&dir)
        );
    }
    let start = Instant::now();
    let marker = loop {
        if let Ok(text) = fs::read_to_string(dir.file("child.done")) {
            break text;
        }
        if start.elapsed() > WATCHDOG {
            kill_group(run.pgid);
            panic!(
                "lifecycle {mode}: the orphaned child did not finish within {WATCHDOG:?}\n{}",
                child_log(&dir)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let Some(pid) = marker
        .strip_prefix("ok ")
        .and_then(|s| s.trim().parse::<u32>().ok())
    else {
        panic!(
            "lifecycle {mode}: the orphaned child failed: {marker}\n{}",
            child_log(&dir)
        );
    };
    // Its exit (exit handlers, unmapped region) ends too: gone or a zombie.
    let start = Instant::now();
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            break;
        }
        if start.elapsed() > WATCHDOG {
            kill_group(run.pgid);
            panic!(
                "lifecycle {mode}: the orphaned child {pid} did not exit within {WATCHDOG:?} \
                 after its work (state {state:?})\n{}",
                child_log(&dir)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Err(e) = check_file(&dir.file("data.dat"), PAGES, orphan_image) {
        panic!("lifecycle {mode}: afterwards {e}\n{}", child_log(&dir));
    }
}

#[test]
fn test_fork_child_outliving_its_parent_reads_and_writes_the_file_handler_threads() {
    child_outlives_parent("orphan-handler");
}

#[test]
fn test_fork_child_outliving_its_parent_reads_and_writes_the_file_faulting_thread() {
    child_outlives_parent("orphan-faulting");
}

#[test]
fn test_fork_child_touching_anonymous_region_gets_sigsegv_handler_threads() {
    // The parent checks the children's SIGSEGV and its own data.
    let dir = scratch("anon-handler");
    run("anon-handler", &dir).assert_success();
}

#[test]
fn test_fork_child_touching_anonymous_region_gets_sigsegv_faulting_thread() {
    let dir = scratch("anon-faulting");
    run("anon-faulting", &dir).assert_success();
}

// ------------------------------------------------------------------ 3. exec

/// "FD -> TARGET" pairs of a listing (`ls -l /proc/self/fd/` or lifecycle.c's own).
fn fd_pairs(listing: &str) -> Vec<(String, String)> {
    listing
        .lines()
        .filter_map(|line| {
            let (left, target) = line.split_once(" -> ")?;
            let fd = left.split_whitespace().last()?;
            Some((fd.to_string(), target.trim().to_string()))
        })
        .collect()
}

/// Names of descriptors only the pager holds.
const PAGER_FD_NAMES: [&str; 5] = [
    "userfaultfd",
    "memfd:pagepilot",
    "eventfd",
    "eventpoll",
    "io_uring",
];

fn exec_after_fork(mode: &str) {
    let (dir, run) = run_and_check(mode, |p| if p < PAGES / 2 { Tag::P } else { Tag::Orig });
    let (before, parent, child_listing) = (
        dir.read("before_fds.txt"),
        dir.read("parent_fds.txt"),
        dir.read("child_fds.txt"),
    );
    let context = format!(
        "--- before the maps\n{before}--- the parent with its regions\n{parent}\
         --- the exec'd child\n{child_listing}{}",
        run.output
    );
    // The pager's descriptors: the parent's, less those it had before mapping
    // and those of the listing itself.
    let before = fd_pairs(&before);
    let pager: Vec<(String, String)> = fd_pairs(&parent)
        .into_iter()
        .filter(|pair| !before.contains(pair))
        .filter(|(_, target)| !target.ends_with("_fds.txt") && !target.starts_with("/proc/"))
        .collect();
    assert!(
        pager
            .iter()
            .any(|(_, target)| target.contains("userfaultfd")),
        "lifecycle {mode}: the parent shows no userfaultfd, so the check below would see \
         nothing:\n{context}"
    );
    let child = fd_pairs(&child_listing);
    assert!(
        child.iter().any(|(fd, _)| fd == "1"),
        "lifecycle {mode}: the exec'd ls listed nothing:\n{context}"
    );
    for (fd, target) in &child {
        assert!(
            !PAGER_FD_NAMES.iter().any(|name| target.contains(name)),
            "lifecycle {mode}: the exec'd child holds fd {fd} -> {target}:\n{context}"
        );
        assert!(
            !pager.contains(&(fd.clone(), target.clone())),
            "lifecycle {mode}: the exec'd child inherited the pager's fd {fd} -> {target}:\n{context}"
        );
    }
}

#[test]
fn test_exec_after_fork_leaves_no_pager_descriptor_handler_threads() {
    exec_after_fork("exec-handler");
}

#[test]
fn test_exec_after_fork_leaves_no_pager_descriptor_faulting_thread() {
    exec_after_fork("exec-faulting");
}

// ---------------------------------------------------------------- 4. SIGBUS

/// The application's SIGBUS handler, installed before the first map of a
/// faulting-thread region, is called for its own SIGBUS (a store beyond the
/// end of a small mapped file) after the map, after paging the whole region
/// and after the unmap; the region's data is right throughout.
fn foreign_sigbus(mode: &str) {
    let (_dir, run) = run_and_check(mode, |_| Tag::P);
    for when in [
        "after the map",
        "after paging the whole region",
        "after the unmap",
    ] {
        assert!(
            run.output.contains(&format!(
                "{when}: the application's SIGBUS handler was called"
            )),
            "lifecycle {mode}: no call of the application's handler {when}:\n{}",
            run.output
        );
    }
}

#[test]
fn test_foreign_sigbus_handler_with_siginfo_is_called_for_its_own_faults() {
    foreign_sigbus("sigbus-siginfo");
}

#[test]
fn test_foreign_plain_sigbus_handler_is_called_for_its_own_faults() {
    foreign_sigbus("sigbus-plain");
}

/// With no handler of the application (the default action) before the map,
/// its own SIGBUS kills the process with SIGBUS, as without pagepilot: not
/// a hang, not another signal, not ignored.
#[test]
fn test_foreign_sigbus_with_the_default_action_kills_the_process_with_sigbus() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("sigbus-default");
    let run = run("sigbus-default", &dir);
    assert!(
        run.output.contains("the region works") && !run.output.contains("survived"),
        "lifecycle sigbus-default ({}):\n{}",
        run.status,
        run.output
    );
    assert_eq!(
        run.status.signal(),
        Some(libc::SIGBUS),
        "lifecycle sigbus-default ended with {}, want SIGBUS:\n{}",
        run.status,
        run.output
    );
    if let Err(e) = check_file(&dir.file("data.dat"), PAGES, |_| Tag::P) {
        panic!("lifecycle sigbus-default: afterwards {e}\n{}", run.output);
    }
}
