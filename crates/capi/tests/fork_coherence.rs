//! Forked workers see one memory, from C (docs/lifecycle.md): after `fork`,
//! a store by the parent or a child to a writable file region is seen by
//! the other at its next load, with no `pp_flush` and no `pp_invalidate`, as
//! with the kernel's `MAP_SHARED`; once no child holds the region, the
//! parent pages it again (`"resumes":1` in `pp_stats_json`).
//!
//! Each scenario is one run of `tests/c/fork_share.c SCENARIO SETUP DIR` in
//! a process group of its own, under a watchdog: workers filling what the
//! parent read, workers writing while the parent reads (and the parent
//! writing while a worker reads) page by page behind a counter, a
//! grandchild outliving its parent, a child outliving the parent, and
//! twenty share-and-resume cycles under a thread that keeps storing. The
//! program checks every byte it reads against its shadow copy and exits
//! non-zero on a mismatch; this driver checks its exit status and the file
//! it leaves against its own image of what the scenario writes. Setups:
//! handler threads, the faulting thread (`pp_options.faulting_thread`), a
//! pool (`pp_pool_create`), and a region joining a real `pagepilot daemon`
//! (`PAGEPILOT_DAEMON` in the program's environment; this driver checks that
//! the daemon lists the program's region before the program goes on).

mod common;

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{
    c_program, compile_for_this_run, kill_group, lib_dir, repo_root, run_watched, Scratch, Watched,
};

const PAGE: usize = 4096;
/// Pages of `data.dat`: 8 MiB (`N` in fork_share.c).
const PAGES: usize = 2048;
/// How long one program (or an orphan) may run before it counts as hung.
const WATCHDOG: Duration = Duration::from_secs(30);

/// What a byte holds; the same numbers as the tags of fork_share.c.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tag {
    /// The file's data before the program ran.
    Orig = 0,
    /// The parent's writes before the fork.
    P = 1,
    /// A worker's writes.
    W = 2,
    /// The parent's writes after the fork.
    Q = 3,
    /// The grandchild's writes.
    G = 4,
    /// The child's writes while its parent lives.
    C = 5,
    /// The orphaned child's writes.
    O = 6,
}

const TAGS: [Tag; 7] = [Tag::Orig, Tag::P, Tag::W, Tag::Q, Tag::G, Tag::C, Tag::O];

/// Byte `off` of page `page` written with `tag` (`page_byte` in fork_share.c).
fn page_byte(tag: Tag, page: usize, off: usize) -> u8 {
    let x = (page as u32).wrapping_mul(0x9E37_79B1)
        ^ (off as u32).wrapping_mul(0x85EB_CA77)
        ^ (tag as u32).wrapping_mul(0xC2B2_AE3D);
    (x ^ (x >> 15)) as u8
}

/// The file's bytes with every page written with `tag(page)`.
fn image(tag: impl Fn(usize) -> Tag) -> Vec<u8> {
    (0..PAGES * PAGE)
        .map(|i| page_byte(tag(i / PAGE), i / PAGE, i % PAGE))
        .collect()
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
        "other data (or a mix)".into()
    }
}

/// Ok if the file at `path` is `want`; else how many pages differ and the first.
fn check_file(path: &Path, want: &[u8]) -> Result<(), String> {
    let data = fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    if data.len() != want.len() {
        return Err(format!(
            "{} is {} bytes, want {}",
            path.display(),
            data.len(),
            want.len()
        ));
    }
    let bad: Vec<usize> = (0..PAGES)
        .filter(|&p| data[p * PAGE..(p + 1) * PAGE] != want[p * PAGE..(p + 1) * PAGE])
        .collect();
    match bad.first() {
        None => Ok(()),
        Some(&p) => {
            let (got, should) = (
                &data[p * PAGE..(p + 1) * PAGE],
                &want[p * PAGE..(p + 1) * PAGE],
            );
            let off = (0..PAGE).find(|&o| got[o] != should[o]).unwrap_or(0);
            Err(format!(
                "{} of {PAGES} pages of {} are wrong; the first, page {p}, at offset {off} holds \
                 {} (want {}): the page holds {}, should hold {}",
                bad.len(),
                path.display(),
                got[off],
                should[off],
                what_is(got, p),
                what_is(should, p)
            ))
        }
    }
}

// ------------------------------------------------------ the scenarios' images

/// Pages written page by page behind a counter: [1, 1 + STREAM) (`STREAM`).
const STREAM: usize = PAGES * 3 / 4;
/// Pages the parent writes before a streaming fork (`DIRTY_FROM`).
const DIRTY_FROM: usize = PAGES * 7 / 8;
const WORKERS: usize = 4;

/// Four workers filled a quarter each.
fn filled(_stdout: &str) -> Vec<u8> {
    image(|_| Tag::W)
}

/// `stream-children-write`: the workers' pages, the parent's last eighth,
/// and in page 0 each worker's counter (at byte 64 w) at its last value.
fn streamed_by_children(_stdout: &str) -> Vec<u8> {
    let mut want = image(|p| match p {
        1..=STREAM => Tag::W,
        p if p >= DIRTY_FROM => Tag::P,
        _ => Tag::Orig,
    });
    for w in 0..WORKERS {
        want[64 * w..64 * w + 8].copy_from_slice(&((STREAM / WORKERS) as u64).to_ne_bytes());
    }
    want
}

/// `stream-parent-writes`: the parent's pages and its counter at its last value.
fn streamed_by_parent(_stdout: &str) -> Vec<u8> {
    let mut want = image(|p| match p {
        1..=STREAM => Tag::Q,
        p if p >= DIRTY_FROM => Tag::P,
        _ => Tag::Orig,
    });
    want[..8].copy_from_slice(&(STREAM as u64).to_ne_bytes());
    want
}

/// `grandchild`: the parent's first eighth, and every third byte the grandchild's.
fn grandchild_wrote(_stdout: &str) -> Vec<u8> {
    let mut want = image(|p| if p < PAGES / 8 { Tag::P } else { Tag::Orig });
    for (i, b) in want.iter_mut().enumerate().step_by(3) {
        *b = page_byte(Tag::G, i / PAGE, i % PAGE);
    }
    want
}

/// `switches-under-*`: the file's data, but for the first word of each
/// page: the round the thread's last write left there (`round_after` in
/// fork_share.c), from the count of writes the program printed.
fn rounds_written(stdout: &str) -> Vec<u8> {
    let writes: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("writes "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of writes in:\n{stdout}"));
    let mut want = image(|_| Tag::Orig);
    for p in 0..PAGES {
        let p64 = p as u64;
        let round = if writes > p64 {
            (writes - 1 - p64) / PAGES as u64 + 1
        } else {
            0
        };
        want[p * PAGE..p * PAGE + 8].copy_from_slice(&round.to_ne_bytes());
    }
    want
}

/// `orphan`: the parent's first half (before the fork), the child's eighth,
/// the parent's eighth after the fork, the orphan's last quarter.
fn orphan_wrote() -> Vec<u8> {
    image(|p| match p {
        p if p < PAGES / 2 => Tag::P,
        p if p < 5 * PAGES / 8 => Tag::C,
        p if p < 3 * PAGES / 4 => Tag::Q,
        _ => Tag::O,
    })
}

// ------------------------------------------------------------- the program

/// fork_share.c, compiled once per run of this test binary (into
/// target/tmp/fork_share-bin-PID, `compile_for_this_run`).
fn program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_for_this_run("fork_share"))
}

/// A scratch directory for scenario `name`, holding the original `data.dat`.
fn scratch(name: &str) -> Scratch {
    let dir = Scratch::new(&format!("fork-share-{name}"));
    fs::write(dir.file("data.dat"), image(|_| Tag::Orig)).expect("write data.dat");
    dir
}

// -------------------------------------------------------------- the daemon

/// The `pagepilot` command: `$PAGEPILOT_BIN` if set, else the one of this
/// workspace, built (or found up to date: `cargo test` of the CLI builds it
/// the same way) by cargo into this test run's target directory, in the
/// profile `cargo test` builds with.
fn pagepilot_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("PAGEPILOT_BIN") {
            return PathBuf::from(bin);
        }
        // target/<profile>/deps/<test>-<hash>, or target/<profile> (lib_dir).
        let lib = lib_dir();
        let profile_dir = if lib.ends_with("deps") {
            lib.parent().expect("target/<profile>").to_path_buf()
        } else {
            lib
        };
        let target = profile_dir.parent().expect("target dir");
        // `cargo test` builds in the `test` profile, whose output lands in
        // target/debug; `cargo test --release` in `release`'s.
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "test",
            Some(other) => other,
            None => panic!("no profile in {}", profile_dir.display()),
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
        let out = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "pagepilot-cli",
                "--bin",
                "pagepilot",
            ])
            .args(["--profile", profile])
            .env("CARGO_TARGET_DIR", target)
            .current_dir(repo_root())
            .output()
            .expect("run cargo build -p pagepilot-cli");
        assert!(
            out.status.success(),
            "cargo build -p pagepilot-cli failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = profile_dir.join("pagepilot");
        assert!(bin.exists(), "{} not built", bin.display());
        bin
    })
}

/// What the daemon's status says, as these tests read it.
struct DaemonStatus {
    total_frames: u64,
    free_frames: u64,
    /// Each client's pid and its regions' held frames.
    regions_of: Vec<(u32, Vec<u64>)>,
}

/// A `pagepilot daemon` in the foreground on a socket of its own in `dir`,
/// killed when dropped (its log printed if the test failed).
struct Daemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let config = dir.join("daemon.toml");
        // Twice the region's pages; one user (root) may hold them all.
        fs::write(
            &config,
            format!(
                "[machine]\nbudget_frames = {}\n[default]\nframes = {}\n",
                2 * PAGES,
                2 * PAGES
            ),
        )
        .expect("write daemon.toml");
        let socket = dir.join("pagepilot.sock");
        let log = dir.join("daemon.log");
        let child = Command::new(pagepilot_bin())
            .arg("daemon")
            .arg("--foreground")
            .arg("--socket")
            .arg(&socket)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("daemon.log"))
            .spawn()
            .expect("start pagepilot daemon");
        let daemon = Daemon { child, socket, log };
        let start = Instant::now();
        while std::os::unix::net::UnixStream::connect(&daemon.socket).is_err() {
            assert!(
                start.elapsed() < WATCHDOG,
                "the daemon does not listen:\n{}",
                daemon.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        daemon
    }

    /// What the daemon holds, for clients other than this process.
    fn status(&self) -> DaemonStatus {
        let client = pagepilot_pager::Client::open(&self.socket).expect("connect for status");
        let status = client.status().expect("status");
        let me = std::process::id();
        DaemonStatus {
            total_frames: status.total_frames,
            free_frames: status.free_frames,
            regions_of: status
                .clients
                .iter()
                .filter(|c| c.pid != me)
                .map(|c| (c.pid, c.regions.iter().map(|r| r.held_frames).collect()))
                .collect(),
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}--- end ---", self.log());
        }
    }
}

// -------------------------------------------------------------- the runs

/// How the program's region is mapped (SETUP of fork_share.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    HandlerThreads,
    FaultingThread,
    Pool,
    Daemon,
}

impl Setup {
    fn arg(self) -> &'static str {
        match self {
            Setup::HandlerThreads => "handler",
            Setup::FaultingThread => "faulting",
            Setup::Pool => "pool",
            Setup::Daemon => "daemon",
        }
    }
}

/// One run of the program: its exit status and its output.
struct Run {
    name: String,
    status: ExitStatus,
    /// Its process group (its pid): children it left behind are in it.
    pgid: i32,
    output: String,
}

impl Run {
    fn assert_success(&self) {
        if !self.status.success() {
            kill_group(self.pgid);
        }
        assert!(
            self.status.success(),
            "fork_share {} failed ({}):\n{}",
            self.name,
            self.status,
            self.output
        );
    }
}

/// Under the daemon: once the program prints `mapped PID`, checks that the
/// daemon lists that process with one region holding frames, and says
/// `go`. Returns whether it did.
fn let_go_once_joined(daemon: &Daemon, dir: &Scratch, child: &mut Child) -> bool {
    let Some(pid) = dir
        .read("stdout.txt")
        .lines()
        .find_map(|l| l.strip_prefix("mapped "))
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return false;
    };
    assert_eq!(pid, child.id(), "the program printed another pid");
    let status = daemon.status();
    let regions = status
        .regions_of
        .iter()
        .find(|(p, _)| *p == pid)
        .map(|(_, r)| r.clone());
    let joined = matches!(regions.as_deref(), Some([held]) if *held > 0);
    if !joined {
        kill_group(child.id() as i32);
        panic!(
            "the daemon does not list the program ({pid}) with one region holding frames: \
             {regions:?} of {:?}\n{}",
            status.regions_of,
            dir.read("stdout.txt")
        );
    }
    let stdin = child.stdin.as_mut().expect("the program's stdin");
    stdin.write_all(b"go\n").expect("say go");
    true
}

/// Runs `fork_share SCENARIO SETUP DIR` in a process group of its own,
/// output to files in `dir` (a child that outlives the program cannot hold
/// a pipe open); kills the group and fails the test if it runs longer than
/// the watchdog. Under the daemon, the program joins `daemon`.
fn run(scenario: &str, setup: Setup, dir: &Scratch, daemon: Option<&Daemon>) -> Run {
    let name = format!("{scenario} {}", setup.arg());
    let mut command = c_program(program());
    command
        .arg(scenario)
        .arg(setup.arg())
        .arg(&dir.0)
        .env_remove(pagepilot_pager::DAEMON_ENV);
    match daemon {
        Some(d) => command
            .env(pagepilot_pager::DAEMON_ENV, &d.socket)
            .stdin(Stdio::piped()),
        None => command.stdin(Stdio::null()),
    };
    let mut said_go = false;
    let Watched {
        status,
        pgid,
        output,
    } = run_watched(
        &mut command,
        dir,
        WATCHDOG,
        Duration::from_millis(5),
        |child| {
            if let (Some(d), false) = (daemon, said_go) {
                said_go = let_go_once_joined(d, dir, child);
            }
        },
    );
    match status {
        Some(status) => {
            if daemon.is_some() && status.success() {
                assert!(
                    said_go,
                    "{name}: ended without joining the daemon:\n{output}"
                );
            }
            Run {
                name,
                status,
                pgid,
                output,
            }
        }
        None => panic!("fork_share {name} hung: killed after {WATCHDOG:?}\n{output}"),
    }
}

/// Runs a scenario that must succeed and checks the file it leaves; under
/// the daemon, also that the daemon has every frame back afterwards.
fn scenario(scenario: &str, setup: Setup, want: fn(&str) -> Vec<u8>) {
    let dir = scratch(&format!("{scenario}-{}", setup.arg()));
    let daemon = (setup == Setup::Daemon).then(|| Daemon::start(&dir.0));
    let run = run(scenario, setup, &dir, daemon.as_ref());
    run.assert_success();
    println!("fork_share {}:\n{}", run.name, run.output);
    if let Err(e) = check_file(&dir.file("data.dat"), &want(&dir.read("stdout.txt"))) {
        panic!("fork_share {}: afterwards {e}\n{}", run.name, run.output);
    }
    if let Some(daemon) = &daemon {
        let start = Instant::now();
        loop {
            let status = daemon.status();
            if status.regions_of.is_empty() && status.free_frames == status.total_frames {
                break;
            }
            assert!(
                start.elapsed() < WATCHDOG,
                "the daemon still holds frames for {:?} ({} of {} free)",
                status.regions_of,
                status.free_frames,
                status.total_frames
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

// ------------------------------------------ 1. workers fill, parent reads

#[test]
fn test_workers_fill_what_the_parent_read_whole_with_handler_threads() {
    scenario("fill-all", Setup::HandlerThreads, filled);
}

#[test]
fn test_workers_fill_what_the_parent_read_whole_in_the_faulting_thread() {
    scenario("fill-all", Setup::FaultingThread, filled);
}

#[test]
fn test_workers_fill_what_the_parent_read_whole_in_a_pool() {
    scenario("fill-all", Setup::Pool, filled);
}

#[test]
fn test_workers_fill_what_the_parent_read_whole_under_the_daemon() {
    scenario("fill-all", Setup::Daemon, filled);
}

#[test]
fn test_workers_fill_what_the_parent_read_under_a_quarter_budget_with_handler_threads() {
    scenario("fill-quarter", Setup::HandlerThreads, filled);
}

#[test]
fn test_workers_fill_what_the_parent_read_under_a_quarter_budget_in_the_faulting_thread() {
    scenario("fill-quarter", Setup::FaultingThread, filled);
}

// ------------------------------------------------------------ 2. streaming

#[test]
fn test_parent_reads_each_page_as_workers_publish_it_with_handler_threads() {
    scenario(
        "stream-children-write",
        Setup::HandlerThreads,
        streamed_by_children,
    );
}

#[test]
fn test_parent_reads_each_page_as_workers_publish_it_in_the_faulting_thread() {
    scenario(
        "stream-children-write",
        Setup::FaultingThread,
        streamed_by_children,
    );
}

#[test]
fn test_parent_reads_each_page_as_workers_publish_it_in_a_pool() {
    scenario("stream-children-write", Setup::Pool, streamed_by_children);
}

#[test]
fn test_parent_reads_each_page_as_workers_publish_it_under_the_daemon() {
    scenario("stream-children-write", Setup::Daemon, streamed_by_children);
}

#[test]
fn test_worker_reads_each_page_as_the_parent_publishes_it_with_handler_threads() {
    scenario(
        "stream-parent-writes",
        Setup::HandlerThreads,
        streamed_by_parent,
    );
}

#[test]
fn test_worker_reads_each_page_as_the_parent_publishes_it_in_the_faulting_thread() {
    scenario(
        "stream-parent-writes",
        Setup::FaultingThread,
        streamed_by_parent,
    );
}

// ----------------------------------------------------------- 3. grandchild

#[test]
fn test_grandchild_outliving_the_child_keeps_the_region_shared_and_its_writes_reach_the_parent_with_handler_threads(
) {
    scenario("grandchild", Setup::HandlerThreads, grandchild_wrote);
}

#[test]
fn test_grandchild_outliving_the_child_keeps_the_region_shared_and_its_writes_reach_the_parent_in_the_faulting_thread(
) {
    scenario("grandchild", Setup::FaultingThread, grandchild_wrote);
}

// --------------------------------------------------------------- 4. orphan

/// The parent sees the child's writes and exits soon after the fork
/// (`exit(0)`, the region mapped); the child, orphaned, reads both sides'
/// writes, writes more and leaves `child.done`; the file holds every write.
fn child_outlives_parent(setup: Setup) {
    let dir = scratch(&format!("orphan-{}", setup.arg()));
    let run = run("orphan", setup, &dir, None);
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
            "fork_share {}: the parent failed ({}):\n{}",
            run.name,
            run.status,
            child_log(&dir)
        );
    }
    assert!(
        run.output.contains("saw the child's writes"),
        "{}",
        run.output
    );
    let start = Instant::now();
    let marker = loop {
        if let Ok(text) = fs::read_to_string(dir.file("child.done")) {
            break text;
        }
        if start.elapsed() > WATCHDOG {
            kill_group(run.pgid);
            panic!(
                "fork_share {}: the orphaned child did not finish within {WATCHDOG:?}\n{}",
                run.name,
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
            "fork_share {}: the orphaned child failed: {marker}\n{}",
            run.name,
            child_log(&dir)
        );
    };
    // Its exit ends too: gone or a zombie.
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
                "fork_share {}: the orphaned child {pid} did not exit within {WATCHDOG:?} \
                 (state {state:?})\n{}",
                run.name,
                child_log(&dir)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Err(e) = check_file(&dir.file("data.dat"), &orphan_wrote()) {
        panic!(
            "fork_share {}: afterwards {e}\n{}",
            run.name,
            child_log(&dir)
        );
    }
}

#[test]
fn test_child_outliving_its_parent_sees_and_keeps_both_sides_writes_with_handler_threads() {
    child_outlives_parent(Setup::HandlerThreads);
}

#[test]
fn test_child_outliving_its_parent_sees_and_keeps_both_sides_writes_in_the_faulting_thread() {
    child_outlives_parent(Setup::FaultingThread);
}

// ----------------------------------- 5. switches while a thread keeps storing

/// Twenty times: a child forked and reaped, the region shared and paged again,
/// while a thread of the parent keeps storing into it (a quarter budget: it
/// keeps faulting). Every page holds at least what the stores before each
/// fork left there, in the child and in the parent, after the fork and once
/// paged again; no store is lost; the process lives through every switch.
#[test]
fn test_thread_storing_through_repeated_shares_and_resumes_loses_no_store_with_handler_threads() {
    scenario(
        "switches-under-writes",
        Setup::HandlerThreads,
        rounds_written,
    );
}

#[test]
fn test_thread_storing_through_repeated_shares_and_resumes_loses_no_store_in_the_faulting_thread() {
    scenario(
        "switches-under-writes",
        Setup::FaultingThread,
        rounds_written,
    );
}

/// The same under demand paging (one page per fault, no read-ahead window
/// in flight at a switch).
#[test]
fn test_thread_storing_through_repeated_shares_and_resumes_under_demand_paging_with_handler_threads(
) {
    scenario(
        "switches-under-demand-writes",
        Setup::HandlerThreads,
        rounds_written,
    );
}

#[test]
fn test_thread_storing_through_repeated_shares_and_resumes_under_demand_paging_in_the_faulting_thread(
) {
    scenario(
        "switches-under-demand-writes",
        Setup::FaultingThread,
        rounds_written,
    );
}
