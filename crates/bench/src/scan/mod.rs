//! `pagepilot bench scan`: first touches of a file (1 GiB by default) by 1, 2, 4 application
//! threads, each on its own contiguous part, under budgets above and below the file's size,
//! from a cold and a warm page cache, in sequential, random (every page once) and sparse
//! (one page in 64) order, optionally mixed with writes: pages per second of pagepilot with
//! its defaults and tuned, side by side in the same rounds with the kernel's `mmap` of the
//! same file in a memory cgroup of the same limit (cold) or buffered `pread` (warm).

pub(crate) mod cases;
mod fileio;
pub(crate) mod report;

use crate::error::IoContext;
use std::time::{Duration, Instant};

use cases::{Case, Context, Knobs, Side};
use report::{ScanPoint, ScanReport, SideRuns};

use super::datafile::DataFile;
use super::measure::{check_range, FileBenchArgs, OutOfRange};
use super::workload::{Cache, Pattern, Plan, Workload};
use super::{kernel, live};
use crate::emit::emit;
use crate::BenchResult;

const MB: usize = 1 << 20;

/// Arguments of `pagepilot bench scan`.
#[derive(clap::Args)]
pub struct Args {
    /// Size of the data file, MB (the old small benchmark: `--file-mb 64 --budgets-mb 16
    /// --patterns sequential,uniform --cache cold`).
    #[arg(long, default_value_t = 1024)]
    file_mb: usize,
    /// Budgets, MB: pagepilot's frames and the kernel's cgroup limit (above and below the
    /// file's size).
    #[arg(long, default_value = "2048,256", value_delimiter = ',')]
    budgets_mb: Vec<usize>,
    /// The page cache at the start of each run: cold (dropped) or warm (the file in it).
    #[arg(long, value_enum, default_value = "cold,warm", value_delimiter = ',')]
    cache: Vec<Cache>,
    /// Orders of touches: sequential, twopass (every page in order, twice), random (every page
    /// once), sparse (one page in 64), uniform (`--ops` reads of pages drawn from the whole
    /// file).
    #[arg(
        long,
        value_enum,
        default_value = "sequential,random,sparse",
        value_delimiter = ','
    )]
    patterns: Vec<Pattern>,
    /// Application thread counts.
    #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Reads per run of the uniform order (all threads together).
    #[arg(long, default_value_t = 3000)]
    ops: usize,
    /// Share of the touched pages also written (0 to 1; the regions and mappings are then
    /// writable and the times include writing the dirty pages back).
    #[arg(long, default_value_t = 0.0)]
    write_fraction: f64,
    /// pagepilot's policy.
    #[arg(long, default_value = "lru")]
    policy: String,
    /// Tuned row: read-ahead window in pages on sequential scans (asynchronous).
    #[arg(long, default_value_t = 128)]
    readahead: usize,
    /// Tuned row: windows read ahead of sequential scans.
    #[arg(long, default_value_t = 4)]
    readahead_depth: usize,
    /// Tuned row: pages read per fault by the random, sparse and uniform orders (1: none
    /// around the faulting page).
    #[arg(long, default_value_t = 1)]
    fault_around: usize,
    /// Tuned row: fault-handler threads; default: one per application thread.
    #[arg(long)]
    handler_threads: Option<usize>,
    /// Tuned row: the faulting thread serves its own fault (SIGBUS) instead of handler
    /// threads.
    #[arg(long)]
    faulting_thread: bool,
    /// Longest a kernel run may take, seconds; a slower one is killed and counted at this
    /// time (its rate an upper bound). Random reads under a small cgroup can thrash for tens
    /// of minutes.
    #[arg(long, default_value_t = 30)]
    kernel_timeout_s: usize,
    #[command(flatten)]
    common: FileBenchArgs,
}

/// A `--write-fraction` outside [0, 1].
#[derive(Debug, thiserror::Error)]
#[error("--write-fraction must be between 0 and 1, not {0}")]
pub struct BadWriteFraction(f64);

/// Checks every argument; the first bad one is named in the error.
fn validate(args: &Args) -> BenchResult {
    check_range("--file-mb", args.file_mb, 1 << 20)?;
    check_range("--runs", args.common.runs, 100)?;
    check_range("--ops", args.ops, 1 << 26)?;
    check_range("--readahead", args.readahead, 1 << 16)?;
    check_range("--readahead-depth", args.readahead_depth, 64)?;
    check_range("--kernel-timeout-s", args.kernel_timeout_s, 86_400)?;
    check_range("--fault-around", args.fault_around, 1 << 12)?;
    if let Some(n) = args.handler_threads {
        check_range("--handler-threads", n, 256)?;
    }
    let lists: [(&'static str, &[usize], usize); 2] = [
        ("--budgets-mb", &args.budgets_mb, 1 << 20),
        ("--threads", &args.threads, 256),
    ];
    for (name, list, max) in lists {
        if list.is_empty() {
            return Err(OutOfRange(name, max).into());
        }
        for &v in list {
            check_range(name, v, max)?;
        }
    }
    if args.patterns.is_empty() {
        return Err(crate::BenchError::EmptyList {
            option: "--patterns",
            why: "needs at least one order",
        });
    }
    if args.cache.is_empty() {
        return Err(crate::BenchError::EmptyList {
            option: "--cache",
            why: "needs cold, warm or both",
        });
    }
    if !(0.0..=1.0).contains(&args.write_fraction) {
        return Err(BadWriteFraction(args.write_fraction).into());
    }
    live::check_policy(&args.policy)?;
    Ok(())
}

/// `xs` without repeats, in their first order.
fn distinct<T: PartialEq + Copy>(xs: &[T]) -> Vec<T> {
    let mut v = Vec::new();
    for &x in xs {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// The cases in the order they run: by budget, then cache, pattern, threads.
fn cases(args: &Args) -> Vec<Case> {
    let mut v = Vec::new();
    for &budget_mb in &distinct(&args.budgets_mb) {
        for &cache in &distinct(&args.cache) {
            for &pattern in &distinct(&args.patterns) {
                for &threads in &distinct(&args.threads) {
                    v.push(Case {
                        budget_mb,
                        cache,
                        pattern,
                        threads,
                    });
                }
            }
        }
    }
    v
}

/// Runs `pagepilot bench scan`.
pub fn run(args: Args) -> BenchResult {
    let format = args.common.format;
    let report = measure(args)?;
    let mut out = std::io::stdout().lock();
    emit(&mut out, format, &report, |out| {
        report::write_text(out, &report)
    })
    .doing("writing the report")?;
    Ok(())
}

/// Runs the cases `args` ask for (not a kernel child's job).
pub(crate) fn measure(args: Args) -> Result<ScanReport, crate::BenchError> {
    validate(&args)?;
    let t0 = Instant::now();
    let cases = cases(&args);
    let runs = args.common.runs;
    let kernel_skipped = kernel::baseline_available()
        .err()
        .map(|e| pagepilot_policy::chain(&e).to_string());
    let sides_of = |case: &Case| -> Vec<Side> {
        let mut sides = case.sides();
        sides.retain(|s| kernel_skipped.is_none() || !s.is_kernel());
        sides
    };
    let sides: usize = cases.iter().map(|c| sides_of(c).len()).sum();
    let children: usize = cases
        .iter()
        .flat_map(sides_of)
        .filter(|s| s.is_kernel())
        .count();
    eprintln!(
        "bench scan: {} cases x {runs} run(s): {} measured runs ({} in kernel children)",
        cases.len(),
        sides * runs,
        children * runs
    );
    let file = DataFile::create(
        &super::datafile::default_dir(args.common.dir),
        "scan",
        args.file_mb * MB,
    )?;
    let cx = Context {
        file: &file,
        policy: &args.policy,
        knobs: Knobs {
            readahead: args.readahead,
            readahead_depth: args.readahead_depth,
            fault_around: args.fault_around,
            handler_threads: args.handler_threads,
            faulting_thread: args.faulting_thread,
        },
        kernel_timeout: Duration::from_secs(args.kernel_timeout_s as u64),
    };
    let mut stamps = 0u64;
    let mut points = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        eprintln!("[{}/{}] {}", i + 1, cases.len(), case.label());
        let w = Workload::Scan {
            pattern: case.pattern,
            threads: case.threads,
            ops: args.ops,
            seed: 0x5eed,
            write_fraction: args.write_fraction,
            stamp: 0,
        };
        let mut plan = Plan::new(w, file.len());
        let order = sides_of(case);
        let mut sides: Vec<SideRuns> = order.iter().map(|&s| SideRuns::new(s)).collect();
        for round in 0..runs {
            // Each round runs every side once, back to back, starting one side further each
            // round, so that no side always runs first (after the file was made or warmed).
            for k in 0..order.len() {
                let at = (round + k) % order.len();
                stamps += 1;
                plan.set_stamp(0x5ca1_ab1e_0000_0000 | stamps);
                match cases::run_side(order[at], case, &cx, &plan)? {
                    Some(r) => sides[at].runs.push(r),
                    None => sides[at].oom_kills += 1,
                }
            }
        }
        let tuning = cases::tuning(case, &cx.knobs);
        points.push(ScanPoint::new(*case, plan.pages_touched(), tuning, sides));
    }
    let report = ScanReport {
        bench: "scan",
        file_mb: file.len() / MB,
        policy: args.policy,
        runs,
        write_fraction: args.write_fraction,
        kernel_timeout_s: args.kernel_timeout_s as u64,
        read_ahead_kb: fileio::read_ahead_kb(file.path()),
        points,
        wall_s: t0.elapsed().as_secs_f64(),
        kernel_skipped,
    };
    Ok(report)
}
