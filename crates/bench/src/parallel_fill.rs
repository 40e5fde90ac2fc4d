//! `pagepilot bench parallel-fill`: forked workers filling one array (the
//! issue's scenario for "forked workers see one memory"). A `--file-mb`
//! (256) file is mapped writable; the parent reads it once (it is resident,
//! as far as the budget goes), forks `--workers` (4) workers that each fill
//! a slice with sequential stores of a pattern, joins them, and checks
//! every byte while summing the array (a mismatch is an error, not a time).
//!
//! Each variant runs in a child process of its own (this binary re-executed
//! with a hidden flag) inside a fresh memory cgroup whose limit is
//! `--budget-mb` (64) and `--slack-mb` (8) plus what the child holds before
//! the workload (binary, heap, the region's bookkeeping and threads), after
//! the page cache was
//! dropped: the kernel's `MAP_SHARED` mapping of the file, a pagepilot
//! region of the budget with the public API's defaults, and tuned. The
//! workers are forked from the child, so their memory is in the cgroup too.
//! Variants alternate within each run; reported are medians and, per run,
//! each variant's wall time (fill and check) over the kernel's.

use crate::error::IoContext;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cgroup::MemCgroup;
use super::child::{self as harness, ChildError, Exit, Role};
use super::datafile::{self, DataFile};
use super::measure::{check_range, median, ratio, Format};
use crate::emit::emit;
use crate::BenchResult;

mod child;

pub(crate) use child::{child_main, Job};

const MB: usize = 1 << 20;

/// Arguments of `pagepilot bench parallel-fill`.
#[derive(clap::Args)]
pub struct Args {
    /// Size of the array (the file) in MB.
    #[arg(long, default_value_t = 256)]
    file_mb: usize,
    /// The memory cgroup's limit for every variant, and pagepilot's budget, in MB.
    #[arg(long, default_value_t = 64)]
    budget_mb: usize,
    /// Forked workers, each filling an equal slice.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Runs of every variant; medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Variants, in the first run's order: kernel, defaults, tuned.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "kernel,defaults,tuned"
    )]
    variants: Vec<Variant>,
    /// MB each variant's cgroup allows beyond the budget and what its process holds once
    /// mapped (as `bench fork --slack-mb`: the pager's own memory grows as it runs, and its
    /// frames are shmem, which the cgroup cannot reclaim without swap).
    #[arg(long, default_value_t = 8)]
    slack_mb: usize,
    /// Longest one variant's child may run, seconds.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Directory for the data file (must be on a disk, not tmpfs).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Who maps the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The kernel's `MAP_SHARED` mapping of the file.
    Kernel,
    /// A pagepilot region of the budget, public API, no option but the budget
    /// (policy `clock`, the default).
    Defaults,
    /// A pagepilot region tuned for the parent's sequential passes, as `bench scan` tunes a
    /// sequential scan: 128-page read-ahead windows, 4 ahead.
    Tuned,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    /// The array did not hold what was stored.
    #[error(
        "{variant:?}: {phase}: {bad} word(s) differ, first at byte {offset:#x}: \
         {got:#018x} instead of {want:#018x}"
    )]
    Mismatch {
        /// The variant.
        variant: Variant,
        /// `read` (the previous run's data) or `check` (the workers').
        phase: &'static str,
        /// Differing 8-byte words.
        bad: u64,
        /// Byte offset of the first.
        offset: usize,
        /// What it held.
        got: u64,
        /// What it should have.
        want: u64,
    },
    /// A worker failed.
    #[error("worker {0} ended with {1}")]
    Worker(usize, std::process::ExitStatus),
    /// A variant's child failed (its stderr was passed through).
    #[error("{0:?} child failed ({1}); killed by its cgroup's OOM killer?")]
    Child(Variant, std::process::ExitStatus),
    /// A variant's child ran past `--timeout-s` and was killed.
    #[error("{0:?} child killed after {1:?} (--timeout-s)")]
    TimedOut(Variant, Duration),
}

/// One variant's run, as its child measured it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FillRun {
    /// The parent's first pass over the array (resident as far as the limit goes), ns.
    pub read_ns: u64,
    /// Forking the workers to having reaped the last, ns.
    pub fill_ns: u64,
    /// The parent's check of every byte after the join, ns.
    pub check_ns: u64,
    /// `fill_ns + check_ns`.
    pub wall_ns: u64,
    /// Sum of the array's 8-byte words after the join.
    pub checksum: u64,
    /// What the child held in its cgroup before the workload (added to the limit).
    pub cgroup_baseline_bytes: u64,
    /// The cgroup's peak charge over the run, minus the baseline.
    pub peak_bytes: u64,
    /// pagepilot: times the region was shared, during the run.
    pub shares: u64,
    /// pagepilot: whether it was paged again before the check started.
    pub resumed_before_check: bool,
    /// pagepilot: whether it was paged again during the check.
    pub resumed_during_check: bool,
    /// pagepilot: page-ins during the check (missing faults).
    pub check_page_ins: u64,
}

/// A variant's runs and medians.
#[derive(Serialize)]
pub struct VariantReport {
    /// Which.
    pub variant: Variant,
    /// Median wall time (fill and check), ns.
    pub wall_ns: u64,
    /// Median fill time, ns.
    pub fill_ns: u64,
    /// Median check time, ns.
    pub check_ns: u64,
    /// Median first-read time, ns.
    pub read_ns: u64,
    /// Median over runs of this variant's wall time / the kernel's in the same run.
    pub wall_vs_kernel: Option<f64>,
    /// The same for the fill.
    pub fill_vs_kernel: Option<f64>,
    /// The same for the check.
    pub check_vs_kernel: Option<f64>,
    /// Runs whose child the cgroup's OOM killer ended (not measured).
    pub oom_kills: usize,
    /// Every run measured, in order.
    pub runs: Vec<FillRun>,
}

/// The whole report.
#[derive(Serialize)]
pub struct FillReport {
    /// Always "parallel-fill".
    pub bench: &'static str,
    /// Array size, MB.
    pub file_mb: usize,
    /// pagepilot's budget, MB; the cgroups' limit is this and `slack_mb` on top of what each
    /// child held once mapped.
    pub budget_mb: usize,
    /// `--slack-mb`.
    pub slack_mb: usize,
    /// Workers.
    pub workers: usize,
    /// Runs per variant.
    pub runs: usize,
    /// Variants in the first run's order.
    pub variants: Vec<VariantReport>,
}

/// Runs one variant's child in a fresh cgroup, the page cache dropped first.
/// `None`: the child was killed by its cgroup's OOM killer (an outcome of the variant, counted
/// in `oom_kills`, not a failure of the benchmark).
fn run_child(mut job: Job, timeout: Duration) -> Result<Option<FillRun>, crate::BenchError> {
    let cg = MemCgroup::create(job.budget as usize)?;
    crate::cold::make_cold(&[&job.file], true).on("dropping the cached pages of", &job.file)?;
    job.cgroup = cg.dir().to_path_buf();
    let variant = job.variant;
    let run = match harness::run(
        "bench parallel-fill",
        &Role::ParallelFill(job),
        Some(timeout),
    ) {
        Ok(Exit::Reported(run)) => run,
        Ok(Exit::TimedOut(_)) => return Err(FillError::TimedOut(variant, timeout).into()),
        Ok(Exit::Killed(_)) => {
            eprintln!(
                "pagepilot: bench parallel-fill: the {variant:?} child was killed (its cgroup's \
                 OOM killer): counted in oom_kills"
            );
            return Ok(None);
        }
        Err(ChildError::Failed { status, .. }) => {
            return Err(FillError::Child(variant, status).into())
        }
        Err(e) => return Err(e.into()),
    };
    drop(cg);
    Ok(Some(run))
}

/// Runs `pagepilot bench parallel-fill`.
pub fn run(args: Args) -> BenchResult {
    check_range("--file-mb", args.file_mb, 1 << 16)?;
    check_range("--budget-mb", args.budget_mb, 1 << 14)?;
    check_range("--workers", args.workers, 64)?;
    check_range("--runs", args.runs, 1000)?;
    check_range("--timeout-s", args.timeout_s as usize, 3600)?;
    if args.variants.is_empty() {
        return Err(crate::BenchError::EmptyList {
            option: "--variants",
            why: "name at least one",
        });
    }
    super::kernel::baseline_available()?;
    let dir = datafile::default_dir(args.dir.clone());
    let file = DataFile::create(&dir, "parallel-fill", args.file_mb * MB)?;
    let timeout = Duration::from_secs(args.timeout_s);
    let n = args.variants.len();
    let mut runs: Vec<Vec<Option<FillRun>>> = vec![Vec::new(); n];
    let mut previous = None;
    for run in 0..args.runs {
        // Alternated: each run starts with the next variant.
        for k in 0..n {
            let v = (run + k) % n;
            let seed = ((run * n + k + 1) as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
            let job = Job {
                variant: args.variants[v],
                file: file.path().to_path_buf(),
                cgroup: PathBuf::new(),
                budget: (args.budget_mb * MB) as u64,
                slack: (args.slack_mb * MB) as u64,
                workers: args.workers,
                seed,
                previous,
            };
            let out = run_child(job, timeout)?;
            // A killed run left the array half filled: the next first read checks nothing.
            previous = out.is_some().then_some(seed);
            runs[v].push(out);
        }
    }
    let report = report(&args, runs);
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

fn report(args: &Args, runs: Vec<Vec<Option<FillRun>>>) -> FillReport {
    let kernel = args.variants.iter().position(|&v| v == Variant::Kernel);
    let kernel_runs = kernel.map(|k| runs[k].clone());
    // Per run, where both ran to the end.
    let vs = |mine: &[Option<FillRun>], f: fn(&FillRun) -> u64| {
        let theirs = kernel_runs.as_ref()?;
        let per_run: Vec<f64> = mine
            .iter()
            .zip(theirs)
            .filter_map(|(m, k)| {
                Some(ratio(f(m.as_ref()?) as f64, f(k.as_ref()?) as f64).unwrap_or(0.0))
            })
            .collect();
        (!per_run.is_empty()).then(|| median(per_run))
    };
    let variants = args
        .variants
        .iter()
        .zip(runs)
        .map(|(&variant, all)| {
            let runs: Vec<FillRun> = all.iter().flatten().cloned().collect();
            let m = |f: fn(&FillRun) -> u64| median(runs.iter().map(f).collect());
            VariantReport {
                variant,
                wall_ns: m(|r| r.wall_ns),
                fill_ns: m(|r| r.fill_ns),
                check_ns: m(|r| r.check_ns),
                read_ns: m(|r| r.read_ns),
                wall_vs_kernel: vs(&all, |r| r.wall_ns),
                fill_vs_kernel: vs(&all, |r| r.fill_ns),
                check_vs_kernel: vs(&all, |r| r.check_ns),
                oom_kills: all.iter().filter(|r| r.is_none()).count(),
                runs,
            }
        })
        .collect();
    FillReport {
        bench: "parallel-fill",
        file_mb: args.file_mb,
        budget_mb: args.budget_mb,
        slack_mb: args.slack_mb,
        workers: args.workers,
        runs: args.runs,
        variants,
    }
}

fn print_text(r: &FillReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "parallel fill: {} forked workers fill a {} MB file, each a slice; budget {} MB, \
         memory cgroups of the budget + {} MB; median of {}",
        r.workers, r.file_mb, r.budget_mb, r.slack_mb, r.runs
    )?;
    writeln!(
        out,
        "{:>9} {:>9} {:>9} {:>9} {:>9} | {:>8} {:>8} {:>8} | {:>7} {:>8} {:>4}",
        "variant",
        "wall ms",
        "fill ms",
        "check ms",
        "read ms",
        "wall/k",
        "fill/k",
        "check/k",
        "resumed",
        "page-ins",
        "oom"
    )?;
    let ms = |ns: u64| ns as f64 / 1e6;
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for v in &r.variants {
        let resumed = v
            .runs
            .iter()
            .filter(|r| r.resumed_before_check || r.resumed_during_check)
            .count();
        let page_ins = median(v.runs.iter().map(|r| r.check_page_ins).collect());
        writeln!(
            out,
            "{:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1} | {:>8} {:>8} {:>8} | {:>7} {:>8} {:>4}",
            format!("{:?}", v.variant).to_lowercase(),
            ms(v.wall_ns),
            ms(v.fill_ns),
            ms(v.check_ns),
            ms(v.read_ns),
            x(v.wall_vs_kernel),
            x(v.fill_vs_kernel),
            x(v.check_vs_kernel),
            format!("{resumed}/{}", v.runs.len()),
            page_ins,
            v.oom_kills
        )?;
    }
    writeln!(
        out,
        "wall = fill + check (the parent's check of every byte after the join); x/k: median over \
         runs of the variant's time / the kernel's in the same run; resumed: runs in which the \
         region was paged again before or during the check; page-ins: during the check; oom: \
         runs the cgroup's OOM killer ended (not measured)"
    )
}
