//! `pagepilot bench rapha`: RAPHA's experiment (its Figures 8-11), live. A
//! periodic task with deadlines (the "decoder", RAPHA's `mpeg_play`: every
//! period it reads chunks of its file, mostly from the disk since its
//! budget holds a fraction of the file, and computes for a fixed processor
//! time) runs alone; then a "launcher" starts beside it (a second process
//! faulting through every page of a large file, scattered, from several
//! threads, as fast as it can). Under three configurations side by side in
//! every round: (a) the kernel, both on `mmap` each in a memory cgroup of
//! its budget, the page cache dropped first; (b) pagepilot regions, no
//! limit; (c) pagepilot with RAPHA's limits: the launcher's region may take
//! so many faults per 100 ms, what the decoder's processor reserve leaves
//! (Eq. 1-4, [`limits`]); (d) the same as (c), each task's process joined
//! to a `pagepilot daemon` of their two budgets, the decoder's region
//! declaring its reserve and fault limit to the daemon's admission control
//! (issue 15: the same results within 10%, and the messages per fault).
//! Reported: the decoder's deadline miss ratio and
//! average delay while the launcher runs (Figure 11), the launcher's faults
//! per interval and resident set over time (Figures 8-10, plotted with
//! `--plot`), and its completion time.

mod decoder;
mod job;
mod launcher;
pub(crate) mod limits;
mod mapped;
mod plot;
pub(crate) mod report;
pub(crate) mod round;
pub(crate) mod summary;

use crate::error::IoContext;
use std::path::PathBuf;
use std::time::Duration;

use super::datafile::{self, DataFile};
use super::kernel;
use super::measure::Format;
use crate::emit::emit;
use crate::measure::ratio;
use crate::BenchResult;
pub(crate) use job::Job;
use job::{Config, DecoderJob, LauncherJob, Mapping, Priority};
use summary::Row;

const MB: usize = 1 << 20;
const MS: u64 = 1_000_000;

/// Arguments of `pagepilot bench rapha`.
#[derive(clap::Args)]
pub struct Args {
    /// The decoder's period (and relative deadline), ms.
    #[arg(long, default_value_t = 33)]
    period: u64,
    /// Processor time the decoder computes each period, ms (its reserve).
    #[arg(long, default_value_t = 22)]
    compute_ms: u64,
    /// Chunks of its file the decoder reads each period, at scattered places.
    #[arg(long, default_value_t = 16)]
    chunks: usize,
    /// Size of a chunk, KiB (a multiple of 4).
    #[arg(long, default_value_t = 4)]
    chunk_kb: usize,
    /// The decoder's file, MB.
    #[arg(long, default_value_t = 32)]
    decoder_mb: usize,
    /// The decoder's frames, MB (below its file: it keeps reading the disk).
    #[arg(long, default_value_t = 8)]
    decoder_budget_mb: usize,
    /// The launcher's file, MB.
    #[arg(long, default_value_t = 64)]
    launcher_mb: usize,
    /// The launcher's frames, MB (pagepilot's budget, the kernel's cgroup).
    #[arg(long, default_value_t = 32)]
    launcher_budget_mb: usize,
    /// Threads of the launcher faulting at once.
    #[arg(long, default_value_t = 8)]
    launcher_threads: usize,
    /// How long the decoder runs alone before the launch, ms.
    #[arg(long, default_value_t = 1000)]
    alone_ms: u64,
    /// RAPHA's fault_unit: time of the fault service per fault, us.
    #[arg(long, default_value_t = 100)]
    fault_unit_us: u64,
    /// The launcher's fault period under RAPHA, ms (at most 100, the
    /// system's): its limit is counted per this period. The default
    /// disperses its faults finest (RAPHA's fault dispersion): a few each
    /// millisecond, never a burst that holds both processors.
    #[arg(long, default_value_t = 1)]
    launcher_fault_period_ms: u64,
    /// Interval of the launcher's samples (faults, resident set), ms.
    #[arg(long, default_value_t = 100)]
    sample_ms: u64,
    /// Rounds; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Directory of the data files (default: the benchmarks' data directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Writes the launcher's faults per interval and resident set over
    /// time (the last round), one line per configuration (.png or .svg).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// The decoder's priority: `normal` (time sharing, as RAPHA's Linux
    /// baseline: the launcher's fault service competes with it), `nice`
    /// (-20, the largest time-sharing weight) or `fifo` (`SCHED_FIFO`, which
    /// also puts its reads first in the disk's queue). `nice` and `fifo`
    /// need root; without it the report says the priority was not set.
    #[arg(long, value_enum, default_value_t = Priority::Normal)]
    decoder_priority: Priority,
}

/// Bad arguments.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// A value out of its range.
    #[error("--{name} must be {want}, got {got}")]
    Range {
        /// The flag.
        name: &'static str,
        /// What it must be.
        want: &'static str,
        /// What it was.
        got: u64,
    },
}

fn check(
    name: &'static str,
    got: u64,
    lo: u64,
    hi: u64,
    want: &'static str,
) -> Result<(), ArgError> {
    if got < lo || got > hi {
        return Err(ArgError::Range { name, want, got });
    }
    Ok(())
}

impl Args {
    fn check(&self) -> Result<(), ArgError> {
        check("period", self.period, 1, 10_000, "between 1 and 10000 ms")?;
        let compute_want = "between 1 ms and less than --period";
        check(
            "compute-ms",
            self.compute_ms,
            1,
            self.period.saturating_sub(1),
            compute_want,
        )?;
        check("chunks", self.chunks as u64, 1, 4096, "between 1 and 4096")?;
        check(
            "chunk-kb",
            self.chunk_kb as u64,
            4,
            65536,
            "between 4 and 65536",
        )?;
        if !self.chunk_kb.is_multiple_of(4) {
            return Err(ArgError::Range {
                name: "chunk-kb",
                want: "a multiple of 4 (whole pages)",
                got: self.chunk_kb as u64,
            });
        }
        check(
            "decoder-mb",
            self.decoder_mb as u64,
            1,
            1 << 16,
            "between 1 and 65536",
        )?;
        let chunk_mb = (self.chunk_kb as u64).div_ceil(1024);
        check(
            "decoder-mb",
            self.decoder_mb as u64,
            chunk_mb,
            1 << 16,
            "at least one chunk",
        )?;
        check(
            "decoder-budget-mb",
            self.decoder_budget_mb as u64,
            1,
            1 << 16,
            "between 1 and 65536",
        )?;
        check(
            "launcher-mb",
            self.launcher_mb as u64,
            1,
            1 << 16,
            "between 1 and 65536",
        )?;
        check(
            "launcher-budget-mb",
            self.launcher_budget_mb as u64,
            1,
            1 << 16,
            "between 1 and 65536",
        )?;
        check(
            "launcher-threads",
            self.launcher_threads as u64,
            1,
            64,
            "between 1 and 64",
        )?;
        check("alone-ms", self.alone_ms, 0, 600_000, "at most 600000")?;
        check(
            "fault-unit-us",
            self.fault_unit_us,
            1,
            1_000_000,
            "between 1 and 1000000",
        )?;
        let lp = "between 1 and 100 (the system's fault period)";
        check(
            "launcher-fault-period-ms",
            self.launcher_fault_period_ms,
            1,
            100,
            lp,
        )?;
        check(
            "sample-ms",
            self.sample_ms,
            1,
            10_000,
            "between 1 and 10000",
        )?;
        check("runs", self.runs as u64, 1, 100, "between 1 and 100")
    }
}

/// Runs a child's job: the decoder or the launcher.
pub(crate) fn child_main(job: Job) -> BenchResult {
    match job {
        Job::Decoder(j) => decoder::main(&j),
        Job::Launcher(j) => launcher::main(&j),
    }
}

/// Runs `pagepilot bench rapha`.
pub fn run(args: Args) -> BenchResult {
    let report = measure(&args)?;
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        report::print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

/// Runs the rounds `args` ask for (not a child's job) and writes the plot if asked.
pub(crate) fn measure(args: &Args) -> Result<report::Report, crate::BenchError> {
    args.check()?;
    let (period_ns, compute_ns) = (args.period * MS, args.compute_ms * MS);
    let limits = limits::derive(
        period_ns,
        compute_ns,
        args.chunks as u64,
        args.fault_unit_us * 1000,
        args.launcher_fault_period_ms * MS,
    )?;
    let kernel_skipped = kernel::baseline_available()
        .err()
        .map(|e| pagepilot_policy::chain(&e).to_string());
    let dir = datafile::default_dir(args.dir.clone());
    let dec_file = DataFile::create(&dir, "rapha-decoder", args.decoder_mb * MB)?;
    let lau_file = DataFile::create(&dir, "rapha-launcher", args.launcher_mb * MB)?;
    let setup = round::Setup {
        decoder: DecoderJob {
            file: dec_file.path().to_path_buf(),
            budget: (args.decoder_budget_mb * MB) as u64,
            mapping: Mapping::Kernel {
                cgroup: PathBuf::new(),
            },
            period_ns,
            compute_ns,
            chunks: args.chunks,
            chunk_pages: args.chunk_kb / 4,
            seed: 0x5eed,
            priority: args.decoder_priority,
        },
        launcher: LauncherJob {
            file: lau_file.path().to_path_buf(),
            budget: (args.launcher_budget_mb * MB) as u64,
            mapping: Mapping::Kernel {
                cgroup: PathBuf::new(),
            },
            threads: args.launcher_threads,
            sample_ns: args.sample_ms * MS,
            seed: 0x1a0c,
        },
        launcher_limit: (
            limits.launcher_fault_limit,
            args.launcher_fault_period_ms * MS,
        ),
        decoder_reserve: (limits.decoder_pc, (limits.decoder_fault_limit, period_ns)),
        fault_unit_us: args.fault_unit_us,
        alone: Duration::from_millis(args.alone_ms),
        root: kernel_skipped.is_none(),
    };
    let mut configs = vec![Config::Pagepilot, Config::Rapha, Config::RaphaDaemon];
    if kernel_skipped.is_none() {
        configs.insert(0, Config::Kernel);
    }
    let mut runs: Vec<Vec<round::ConfigRun>> = configs.iter().map(|_| Vec::new()).collect();
    for r in 0..args.runs {
        for k in round_order(configs.len(), r) {
            let config = configs[k];
            eprintln!("round {}/{}: {}...", r + 1, args.runs, config.name());
            runs[k].push(round::run(config, &setup)?);
        }
    }
    let limit = (limits.launcher_fault_limit, args.launcher_fault_period_ms);
    let limit_of = |c: Config| matches!(c, Config::Rapha | Config::RaphaDaemon).then_some(limit);
    let rows: Vec<Row> = configs
        .iter()
        .zip(&runs)
        .filter_map(|(&c, r)| summary::row(r, period_ns, limit_of(c), args.sample_ms))
        .collect();
    let find = |name: &str| rows.iter().find(|r| r.config == name);
    let (kern, pp, rapha) = (find("kernel"), find("pagepilot"), find("rapha"));
    let under_daemon = find(Config::RaphaDaemon.name());
    let vs = |f: fn(&Row) -> f64, base: Option<&Row>| {
        rapha.zip(base).and_then(|(a, b)| ratio(f(a), f(b)))
    };
    let miss = |r: &Row| r.with_launcher.miss_pct;
    let delay = |r: &Row| r.with_launcher.avg_delay_ms;
    let done = |r: &Row| r.launcher_ms;
    let daemon_vs =
        |f: fn(&Row) -> f64| under_daemon.zip(rapha).and_then(|(a, b)| ratio(f(a), f(b)));
    let timelines = configs
        .iter()
        .zip(&runs)
        .filter_map(|(c, r)| {
            Some(summary::LauncherTimeline {
                config: c.name(),
                points: summary::fault_rate(&r.last()?.launcher),
            })
        })
        .collect();
    let report = report::Report {
        bench: "rapha",
        period_ms: args.period,
        compute_ms: args.compute_ms,
        chunks: args.chunks,
        chunk_kb: args.chunk_kb,
        decoder_mb: args.decoder_mb,
        decoder_budget_mb: args.decoder_budget_mb,
        launcher_mb: args.launcher_mb,
        launcher_budget_mb: args.launcher_budget_mb,
        launcher_threads: args.launcher_threads,
        runs: args.runs,
        decoder_priority: args.decoder_priority,
        decoder_priority_set: runs.iter().flatten().all(|r| r.decoder.realtime),
        limits,
        miss_vs_kernel: vs(miss, kern),
        delay_vs_kernel: vs(delay, kern),
        miss_vs_pagepilot: vs(miss, pp),
        delay_vs_pagepilot: vs(delay, pp),
        launcher_slowdown_vs_pagepilot: vs(done, pp),
        launcher_slowdown_vs_kernel: vs(done, kern),
        daemon_miss_vs_rapha: daemon_vs(miss),
        daemon_delay_vs_rapha: daemon_vs(delay),
        daemon_launcher_vs_rapha: daemon_vs(done),
        rows,
        timelines,
        kernel_skipped,
    };
    if let Some(out) = &args.plot {
        plot::write(&report.timelines, args.sample_ms, out)?;
    }
    Ok(report)
}

/// The order of the configurations in round `round`: as listed, the last
/// two (`rapha` and `rapha+daemon`, compared with each other) taking turns
/// going first.
fn round_order(configs: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..configs).collect();
    if round % 2 == 1 && configs >= 2 {
        order.swap(configs - 2, configs - 1);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::round_order;

    #[test]
    fn test_rapha_and_rapha_daemon_take_turns_going_first() {
        assert_eq!(round_order(4, 0), [0, 1, 2, 3]);
        assert_eq!(round_order(4, 1), [0, 1, 3, 2]);
        assert_eq!(round_order(3, 2), [0, 1, 2]);
        assert_eq!(round_order(3, 3), [0, 2, 1]);
    }
}
