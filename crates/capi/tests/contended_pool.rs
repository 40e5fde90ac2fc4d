//! A contended pool does not kill its program (issue 30): regions of 16 MiB
//! with budgets of 4 MiB each, drawing from one pool of 4 MiB, a thread per
//! region making random reads and writes through the C API. A fault waits
//! for a frame; it is never refused one (a SIGBUS in the region).
//!
//! Each run is one process of `tests/c/contended_pool.c` (in a process
//! group of its own, under a watchdog), which checks every read, then each
//! region whole, against a shadow copy it keeps in ordinary memory, and each
//! file region's file, read with read(2), after `pp_flush` and after
//! `pp_unmap`. This driver runs it `RUNS` times per variant (another seed
//! each time) and fails on the first run that does not exit 0: a signal (the
//! SIGBUS of the issue), a failed check, a hang.
//!
//! Variants: the three regions (an `mru` file, an `lru` anonymous
//! region, a `clock` file; `min_frames` 256 each), and eight regions of the
//! four policies, files and anonymous (`min_frames` 96 each: eight times 256
//! would not fit in the pool).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{c_program, compile_for_this_run, run_watched, Scratch};

/// Runs of each variant in a row (`PAGEPILOT_CONTENDED_RUNS` overrides;
/// before the fix nearly every run died of SIGBUS, so a few runs catch it).
const RUNS: usize = 10;
/// How long one run may take before it counts as hung.
const WATCHDOG: Duration = Duration::from_secs(60);

fn program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_for_this_run("contended_pool"))
}

fn runs() -> usize {
    std::env::var("PAGEPILOT_CONTENDED_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS)
}

/// One run: the program's exit status (`None`: hung, killed) and output.
fn run_once(
    dir: &Scratch,
    regions: usize,
    pool_mib: usize,
    min_frames: usize,
    ops: usize,
    seed: u64,
) -> (Option<ExitStatus>, String) {
    let run = run_watched(
        c_program(program())
            .arg(&dir.0)
            .args([regions, pool_mib, min_frames, ops].map(|n| n.to_string()))
            .arg(seed.to_string()),
        dir,
        WATCHDOG,
        Duration::from_millis(10),
        |_| {},
    );
    (run.status, run.output)
}

/// Runs the program `runs()` times in a row, `ops` random accesses per
/// thread; fails at the first run that does not exit 0.
fn contended(name: &str, regions: usize, pool_mib: usize, min_frames: usize, ops: usize) {
    let dir = Scratch::new(&format!("contended-pool-{name}"));
    let base = (std::process::id() as u64 * 100 + regions as u64) * 1000;
    let total = runs();
    let all = Instant::now();
    for run in 0..total {
        let seed = base + run as u64;
        let start = Instant::now();
        let (status, output) = run_once(&dir, regions, pool_mib, min_frames, ops, seed);
        let took = start.elapsed();
        let what = format!(
            "{name}: run {} of {total} ({regions} regions, a {pool_mib} MiB pool, min_frames \
             {min_frames}, seed {seed})",
            run + 1
        );
        match status {
            None => panic!("{what} hung: killed after {WATCHDOG:?}\n{output}"),
            Some(s) if s.success() => {
                assert!(
                    output.contains("\nok\n"),
                    "{what}: exit 0 without ok\n{output}"
                );
                println!("{what}: ok in {took:.2?}");
            }
            Some(s) => match s.signal() {
                Some(sig) => panic!(
                    "{what}: killed by signal {sig}{} after {took:.2?}\n{output}",
                    if sig == libc::SIGBUS { " (SIGBUS)" } else { "" }
                ),
                None => panic!("{what}: exit {s}\n{output}"),
            },
        }
    }
    println!(
        "{name}: {total} runs in a row passed in {:.2?}",
        all.elapsed()
    );
}

/// The scenario: an `mru` file, an `lru` anonymous region and a
/// `clock` file, 16 MiB each with budgets of 4 MiB and `min_frames` 256, in
/// a pool of 4 MiB.
#[test]
fn three_regions_in_a_4_mib_pool() {
    contended("three", 3, 4, 256, 2000);
}

/// Eight regions and threads (files and anonymous regions under `mru`,
/// `lru`, `clock` and `fifo`) in the same pool of 4 MiB.
#[test]
fn eight_regions_in_a_4_mib_pool() {
    contended("eight", 8, 4, 96, 500);
}
