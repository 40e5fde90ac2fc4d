//! `pagepilot bench scan`: random and sequential page reads over a file four times larger than
//! the budget, by 1, 2, 4 application threads: pages per second of pagepilot against the
//! kernel's `mmap` of the same file under a memory cgroup of the same size.

use std::io::Write;

use serde::Serialize;

use super::datafile::DataFile;
use super::kernel::{Advice, KernelError};
use super::measure::{check_range, median_of, ratio, FileBenchArgs, Format, Measured, OutOfRange};
use super::workload::{Pattern, Workload};
use super::{kernel, live};
use crate::BenchResult;

const MB: usize = 1 << 20;

/// Arguments of `pagepilot bench scan`.
#[derive(clap::Args)]
pub struct Args {
    /// Application thread counts.
    #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Budget in MB; the file is four times larger.
    #[arg(long, default_value_t = 16)]
    budget_mb: usize,
    /// Random page reads per run (all threads together).
    #[arg(long, default_value_t = 3000)]
    ops: usize,
    /// pagepilot's policy.
    #[arg(long, default_value = "lru")]
    policy: String,
    /// pagepilot's read-ahead window in pages on sequential scans (asynchronous).
    #[arg(long, default_value_t = 128)]
    readahead: usize,
    /// pagepilot's fault-handler threads; default: one per application thread.
    #[arg(long)]
    handler_threads: Option<usize>,
    /// The faulting thread serves its own fault (SIGBUS) instead of handler threads.
    #[arg(long)]
    faulting_thread: bool,
    #[command(flatten)]
    common: FileBenchArgs,
}

/// One (pattern, threads) point.
#[derive(Serialize)]
pub struct ScanPoint {
    /// Read order.
    pub pattern: Pattern,
    /// Application threads.
    pub threads: usize,
    /// Pages read per run.
    pub pages: u64,
    /// pagepilot pages per second (median run).
    pub pagepilot_pages_per_s: f64,
    /// Kernel pages per second (median run).
    pub kernel_pages_per_s: f64,
    /// pagepilot / kernel throughput.
    pub ratio: f64,
    /// pagepilot through the public API with no option but the policy (its defaults), pages
    /// per second (median run).
    pub defaults_pages_per_s: f64,
    /// pagepilot's defaults / kernel throughput.
    pub ratio_defaults: f64,
    /// Random reads: the kernel told `MADV_RANDOM` (no read-around), pages per second.
    pub kernel_madv_random_pages_per_s: Option<f64>,
    /// pagepilot / kernel with `MADV_RANDOM`.
    pub ratio_madv_random: Option<f64>,
    /// pagepilot's options.
    pub tuning: live::Tuning,
    /// pagepilot runs.
    pub pagepilot: Vec<Measured>,
    /// pagepilot runs with its defaults.
    pub pagepilot_defaults: Vec<Measured>,
    /// Kernel runs.
    pub kernel: Vec<Measured>,
    /// Kernel runs with `MADV_RANDOM` (random reads only).
    pub kernel_madv_random: Vec<Measured>,
    /// Kernel runs OOM-killed by the cgroup (not in the medians; a rate with no run left is 0).
    pub kernel_oom_kills: u32,
}

/// The whole report.
#[derive(Serialize)]
pub struct ScanReport {
    /// Always "scan".
    pub bench: &'static str,
    /// Budget in MB.
    pub budget_mb: usize,
    /// File size in MB.
    pub file_mb: usize,
    /// pagepilot's policy.
    pub policy: String,
    /// Runs per point.
    pub runs: usize,
    /// Points.
    pub points: Vec<ScanPoint>,
}

/// Runs `pagepilot bench scan`.
pub fn run(args: Args) -> BenchResult {
    if let Some(job) = args.common.internal_kernel_child {
        return Ok(kernel::child_main(&job)?);
    }
    check_range("--budget-mb", args.budget_mb, 1 << 14)?;
    check_range("--ops", args.ops, 1 << 26)?;
    check_range("--runs", args.common.runs, 100)?;
    if args.threads.is_empty() {
        return Err(OutOfRange("--threads", 256).into());
    }
    for &t in &args.threads {
        check_range("--threads", t, 256)?;
    }
    live::check_policy(&args.policy)?;
    let budget = args.budget_mb * MB;
    let file = DataFile::create(
        &super::datafile::default_dir(args.common.dir),
        "scan",
        4 * budget,
    )?;
    let mut points = Vec::new();
    for pattern in [Pattern::Sequential, Pattern::Random] {
        for &threads in &args.threads {
            let w = Workload::Scan {
                pattern,
                threads,
                ops: args.ops,
                seed: 0x5eed,
            };
            let sequential = pattern == Pattern::Sequential;
            let tuning = live::Tuning {
                readahead: Some(if sequential { args.readahead } else { 1 }),
                async_readahead: Some(sequential),
                handler_threads: Some(args.handler_threads.unwrap_or(threads)),
                faulting_thread: args.faulting_thread,
                ..Default::default()
            };
            let (mut pp, mut k, mut kr) = (Vec::new(), Vec::new(), Vec::new());
            let mut defaults = Vec::new();
            let mut kernel_oom_kills = 0;
            let mut kernel_run = |runs: &mut Vec<Measured>, advice| -> Result<(), KernelError> {
                match kernel::run("scan", &file, budget, w, advice) {
                    Ok(m) => runs.push(m),
                    Err(e) if e.is_oom_kill() => kernel_oom_kills += 1,
                    Err(e) => return Err(e),
                }
                Ok(())
            };
            for _ in 0..args.common.runs {
                pp.push(live::run(&file, budget, &args.policy, tuning, w)?);
                defaults.push(live::run(
                    &file,
                    budget,
                    &args.policy,
                    live::Tuning::default(),
                    w,
                )?);
                kernel_run(&mut k, Advice::Normal)?;
                if !sequential {
                    kernel_run(&mut kr, Advice::Random)?;
                }
            }
            let pages = w.pages_read(file.len());
            let rate =
                |runs: &[Measured]| ratio(pages as f64, median_of(runs).elapsed_ns as f64 / 1e9);
            let (p_rate, k_rate, d_rate) = (rate(&pp), rate(&k), rate(&defaults));
            let kr_rate = (!kr.is_empty()).then(|| rate(&kr));
            points.push(ScanPoint {
                pattern,
                threads,
                pages,
                pagepilot_pages_per_s: p_rate,
                kernel_pages_per_s: k_rate,
                ratio: ratio(p_rate, k_rate),
                defaults_pages_per_s: d_rate,
                ratio_defaults: ratio(d_rate, k_rate),
                pagepilot_defaults: defaults,
                kernel_madv_random_pages_per_s: kr_rate,
                ratio_madv_random: kr_rate.map(|r| ratio(p_rate, r)),
                kernel_madv_random: kr,
                kernel_oom_kills,
                tuning,
                pagepilot: pp,
                kernel: k,
            });
        }
    }
    let report = ScanReport {
        bench: "scan",
        budget_mb: args.budget_mb,
        file_mb: file.len() / MB,
        policy: args.policy,
        runs: args.common.runs,
        points,
    };
    let mut out = std::io::stdout().lock();
    match args.common.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Format::Text => {
            writeln!(
                out,
                "page reads over a {} MB file, budget {} MB, pagepilot policy {}, median of {}",
                report.file_mb, report.budget_mb, report.policy, report.runs
            )?;
            writeln!(
                out,
                "{:<11} {:>7} {:>8} {:>16} {:>14} {:>8} {:>22} {:>8} {:>15} {:>8}",
                "pattern",
                "threads",
                "pages",
                "pagepilot pg/s",
                "kernel pg/s",
                "ratio",
                "kernel MADV_RANDOM pg/s",
                "ratio",
                "defaults pg/s",
                "ratio"
            )?;
            for p in &report.points {
                writeln!(
                    out,
                    "{:<11} {:>7} {:>8} {:>16.0} {:>14.0} {:>8.3} {:>22} {:>8} {:>15.0} {:>8.3}",
                    format!("{:?}", p.pattern).to_lowercase(),
                    p.threads,
                    p.pages,
                    p.pagepilot_pages_per_s,
                    p.kernel_pages_per_s,
                    p.ratio,
                    p.kernel_madv_random_pages_per_s
                        .map_or_else(|| "-".into(), |r| format!("{r:.0}")),
                    p.ratio_madv_random
                        .map_or_else(|| "-".into(), |r| format!("{r:.3}")),
                    p.defaults_pages_per_s,
                    p.ratio_defaults,
                )?;
            }
            writeln!(
                out,
                "defaults: the region mapped through the public API with no option but the \
                 policy (what a user gets), in the same rounds as the tuned runs."
            )?;
        }
    }
    Ok(())
}
