//! `pagepilot bench sim`: simulator throughput and the cost of whole curves.
//!
//! One synthetic trace (sweeps up and down, loops and random references),
//! then, round after round so that every measurement sees the same machine
//! noise: single-size runs of LRU, FIFO and CLOCK through `simulate()`, one
//! single-size OPT run, and the one-pass LRU and OPT curves. 100 separate
//! single-size runs are extrapolated from a sample of sizes spread over the
//! curve. Medians over `--runs` rounds.
//!
//! `--trace PATH` runs on a trace file instead of the synthetic trace,
//! `--trace-set hit-heavy` on the recorded hit-heavy real trace
//! ([`trace_set`]);
//! `--against libcachesim` compares with libCacheSim side by side
//! ([`against`]).

use crate::error::IoContext;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use pagepilot_policy::registry::{self, Setup};
use pagepilot_sim::curve::StackPolicy;
use pagepilot_sim::sweep::auto_frames;
use pagepilot_sim::{simulate, Trace};
use serde::Serialize;

use std::io::{self, Write};

use crate::emit::{emit, Format};
use crate::measure::median;

use crate::BenchResult;

mod against;
pub(crate) mod lcs;
mod synthetic;
mod trace_set;

use synthetic::synthetic;
use trace_set::TraceSet;

/// Arguments of `pagepilot bench sim`.
#[derive(clap::Args)]
pub struct Args {
    /// References in the synthetic trace.
    /// With --trace: only the first this many references of the file
    /// [default: 50000000 for the synthetic trace, all of a --trace file].
    #[arg(long)]
    refs: Option<u64>,
    /// Distinct pages in the synthetic trace.
    #[arg(long, default_value_t = 65_536)]
    pages: u64,
    /// References of the trace's prefix the OPT figures use (default: the
    /// whole trace).
    #[arg(long, default_value_t = u64::MAX)]
    opt_refs: u64,
    /// Rounds; each figure is the median over them.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Points of the whole curves.
    #[arg(long, default_value_t = 100)]
    points: usize,
    /// Sizes actually run to extrapolate the separate single-size runs.
    #[arg(long, default_value_t = 5)]
    sample: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// A trace file (any format `pagepilot sim` reads) instead of the
    /// synthetic trace.
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// A named trace instead: `hit-heavy` is the real trace
    /// `scripts/hit-heavy-trace` records into target/hit-heavy.pptrace (its
    /// first 64 M references unless --refs says otherwise).
    #[arg(
        long,
        value_enum,
        value_name = "SET",
        default_value = "synthetic",
        conflicts_with = "trace"
    )]
    trace_set: TraceSet,
    /// Compare with another simulator, side by side in the same rounds.
    #[arg(long, value_enum, value_name = "SIMULATOR")]
    against: Option<Against>,
    /// With --against libcachesim: a Python that has the libcachesim package
    /// (default: target/libcachesim-venv, else python3, else that venv is
    /// created).
    #[arg(long, value_name = "PYTHON")]
    python: Option<PathBuf>,
}

/// `--against` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Against {
    /// libCacheSim, through its Python bindings (PyPI `libcachesim`).
    Libcachesim,
}

/// Errors in the benchmark's arguments.
#[derive(Debug, thiserror::Error)]
pub enum SimArgError {
    #[error("--refs, --pages, --runs, --points and --sample must be positive; --pages at most --refs and below 2^32")]
    BadArgs,
    /// A `--trace-set` whose trace has not been recorded.
    #[error("{} not found: record it with scripts/hit-heavy-trace {} (4-6 minutes), or pass --trace PATH", .0.display(), .0.display())]
    MissingTrace(PathBuf),
}

/// The benchmark's findings.
#[derive(Serialize)]
struct Report {
    references: u64,
    distinct_pages: usize,
    /// References of the prefix the OPT figures use.
    opt_references: u64,
    trace_source: String,
    frames_single: usize,
    runs: usize,
    /// Single-size throughput through `simulate()`, million references per second.
    lru_mrefs_per_s: f64,
    fifo_mrefs_per_s: f64,
    clock_mrefs_per_s: f64,
    opt_mrefs_per_s: f64,
    /// Faults per reference of the single-size runs.
    lru_fault_ratio: f64,
    fifo_fault_ratio: f64,
    clock_fault_ratio: f64,
    opt_fault_ratio: f64,
    lru_single_s: f64,
    opt_single_s: f64,
    curve_points: usize,
    lru_curve_s: f64,
    opt_curve_s: f64,
    /// Curve time over one single-size run.
    lru_curve_over_single: f64,
    opt_curve_over_single: f64,
    /// The separate single-size runs' total time, extrapolated from a sample.
    lru_separate_runs_s: f64,
    opt_separate_runs_s: f64,
    separate_runs_sampled: usize,
    /// Separate runs' time over the curve's.
    lru_speedup: f64,
    opt_speedup: f64,
    /// Whether the curves matched the sampled single-size runs.
    curves_match_single_runs: bool,
}

/// Runs `pagepilot bench sim`.
pub fn run(mut args: Args) -> BenchResult {
    if let Some((path, refs)) = args.trace_set.file()? {
        args.trace = Some(path);
        args.refs = Some(args.refs.unwrap_or(refs));
    }
    let refs = args.refs.unwrap_or(50_000_000);
    if refs == 0
        || args.pages == 0
        || (args.trace.is_none() && args.pages > refs)
        || args.pages >= u64::from(u32::MAX)
        || args.runs == 0
        || args.points == 0
        || args.sample == 0
        || args.opt_refs == 0
    {
        return Err(SimArgError::BadArgs.into());
    }
    let (trace, source) = match &args.trace {
        Some(path) => {
            eprintln!("loading {}...", path.display());
            let trace = pagepilot_sim::trace::load(path)?;
            match args.refs {
                Some(n) if (n as usize) < trace.len() => {
                    let prefix = trace.refs[..n as usize].iter();
                    let pages = prefix.map(|&s| trace.pages[s as usize]);
                    let source = format!("{}, first {n} references", path.display());
                    (Trace::from_pages(pages), source)
                }
                _ => (trace, path.display().to_string()),
            }
        }
        None => {
            eprintln!("building a synthetic trace of {refs} references...");
            let (trace, what) = stored(synthetic(refs, args.pages))?;
            (trace, format!("synthetic, {what}"))
        }
    };
    if let Some(Against::Libcachesim) = args.against {
        return against::run(against::Setting {
            trace: &trace,
            source,
            runs: args.runs,
            points: args.points,
            sample: args.sample,
            python: args.python.as_deref(),
            format: args.format,
        });
    }
    let prefix = trace.refs[..trace.len().min(args.opt_refs as usize)].iter();
    let opt_trace = Trace::from_pages(prefix.map(|&s| trace.pages[s as usize]));
    let distinct = trace.distinct();
    let single = distinct / 2;
    let points = auto_frames(distinct, args.points);
    let sample: Vec<usize> = auto_frames(points.len(), args.sample)
        .into_iter()
        .map(|i| points[i - 1])
        .collect();

    let opt_points = auto_frames(opt_trace.distinct(), args.points);
    let opt_sample: Vec<usize> = auto_frames(opt_points.len(), args.sample)
        .into_iter()
        .map(|i| opt_points[i - 1])
        .collect();
    let mut times: [Vec<Duration>; 6] = Default::default();
    let mut curves_match = true;
    let mut faults = [0u64; 4];
    let mut sampled = [Duration::ZERO; 2];
    for round in 0..args.runs {
        eprintln!("round {}/{}...", round + 1, args.runs);
        for (k, name) in ["lru", "fifo", "clock"].into_iter().enumerate() {
            let (t, f) = timed(|| single_run(&trace, name, single));
            times[k].push(t);
            faults[k] = f;
        }
        let opt_single = opt_trace.distinct() / 2;
        let (t, f) = timed(|| single_run(&opt_trace, "opt", opt_single));
        times[3].push(t);
        faults[3] = f;
        let (t, lru) = timed(|| StackPolicy::Lru.curve(&trace.refs, distinct));
        times[4].push(t);
        let (t, opt) = timed(|| StackPolicy::Opt.curve(&opt_trace.refs, opt_trace.distinct()));
        times[5].push(t);
        if round == 0 {
            // The separate runs, once: a sample of the curve's sizes.
            let runs = [
                (StackPolicy::Lru, &lru, &trace, &sample),
                (StackPolicy::Opt, &opt, &opt_trace, &opt_sample),
            ];
            for (k, (stack, curve, trace, sample)) in runs.into_iter().enumerate() {
                for &f in sample.iter() {
                    let (t, faults) = timed(|| single_run(trace, stack.name(), f));
                    sampled[k] += t;
                    curves_match &= faults == curve.faults(f);
                }
            }
        }
    }
    let med: Vec<f64> = times.iter().map(|t| median_s(t)).collect();
    let rate = |n: usize, s: f64| n as f64 / s / 1e6;
    let scale = points.len() as f64 / sample.len() as f64;
    let separate = [
        sampled[0].as_secs_f64() * scale,
        sampled[1].as_secs_f64() * scale,
    ];
    let report = Report {
        references: trace.len() as u64,
        distinct_pages: distinct,
        opt_references: opt_trace.len() as u64,
        trace_source: source,
        frames_single: single,
        runs: args.runs,
        lru_mrefs_per_s: rate(trace.len(), med[0]),
        fifo_mrefs_per_s: rate(trace.len(), med[1]),
        clock_mrefs_per_s: rate(trace.len(), med[2]),
        opt_mrefs_per_s: rate(opt_trace.len(), med[3]),
        lru_fault_ratio: faults[0] as f64 / trace.len() as f64,
        fifo_fault_ratio: faults[1] as f64 / trace.len() as f64,
        clock_fault_ratio: faults[2] as f64 / trace.len() as f64,
        opt_fault_ratio: faults[3] as f64 / opt_trace.len() as f64,
        lru_single_s: med[0],
        opt_single_s: med[3],
        curve_points: points.len(),
        lru_curve_s: med[4],
        opt_curve_s: med[5],
        lru_curve_over_single: med[4] / med[0],
        opt_curve_over_single: med[5] / med[3],
        lru_separate_runs_s: separate[0],
        opt_separate_runs_s: separate[1],
        separate_runs_sampled: sample.len(),
        lru_speedup: separate[0] / med[4],
        opt_speedup: separate[1] / med[5],
        curves_match_single_runs: curves_match,
    };
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        print_table(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

fn print_table(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "trace: {} references, {} pages ({}); single-size runs at {} frames; medians of {} rounds",
        r.references, r.distinct_pages, r.trace_source, r.frames_single, r.runs
    )?;
    writeln!(out, "single-size throughput (simulate, one thread):")?;
    for (name, v, f) in [
        ("lru", r.lru_mrefs_per_s, r.lru_fault_ratio),
        ("fifo", r.fifo_mrefs_per_s, r.fifo_fault_ratio),
        ("clock", r.clock_mrefs_per_s, r.clock_fault_ratio),
        ("opt", r.opt_mrefs_per_s, r.opt_fault_ratio),
    ] {
        writeln!(
            out,
            "  {name:<6} {v:8.1} M refs/s  ({:.2}% of references fault)",
            f * 100.0
        )?;
    }
    writeln!(
        out,
        "whole {}-point curves (separate runs extrapolated from {} sizes):",
        r.curve_points, r.separate_runs_sampled
    )?;
    writeln!(
        out,
        "  policy  one run  curve  curve/one run  {} runs  runs/curve",
        r.curve_points
    )?;
    for (name, one, curve, ratio, sep, speedup) in [
        (
            "lru",
            r.lru_single_s,
            r.lru_curve_s,
            r.lru_curve_over_single,
            r.lru_separate_runs_s,
            r.lru_speedup,
        ),
        (
            "opt",
            r.opt_single_s,
            r.opt_curve_s,
            r.opt_curve_over_single,
            r.opt_separate_runs_s,
            r.opt_speedup,
        ),
    ] {
        writeln!(
            out,
            "  {name:<6} {one:7.2}s {curve:5.2}s {ratio:13.2}x {sep:7.1}s {speedup:10.1}x"
        )?;
    }
    writeln!(
        out,
        "OPT figures on the first {} references; curves match the sampled single-size runs: {}",
        r.opt_references, r.curves_match_single_runs
    )?;
    let verdict = |ok: bool| if ok { "met" } else { "not met" };
    writeln!(
        out,
        "targets: LRU >= 30 M refs/s: {}; LRU curve <= 3x one run: {}; OPT curve <= 3x one run: {}",
        verdict(r.lru_mrefs_per_s >= 30.0),
        verdict(r.lru_curve_over_single <= 3.0),
        verdict(r.opt_curve_over_single <= 3.0)
    )?;
    Ok(())
}

/// The trace as the benchmark reads it: written in pagepilot's binary
/// format and read back, so the runs see what `pagepilot sim` would load.
fn stored(trace: Trace) -> Result<(Trace, &'static str), pagepilot_sim::trace::TraceError> {
    let path = std::env::temp_dir().join(format!(
        "pagepilot-bench-sim-{}.pptrace",
        std::process::id()
    ));
    let result = pagepilot_sim::trace::save(&trace, &path, pagepilot_sim::trace::Format::Binary)
        .and_then(|()| pagepilot_sim::trace::load(&path));
    let _ = std::fs::remove_file(&path);
    Ok((result?, "binary trace file, written and read back"))
}

fn single_run(trace: &Trace, name: &str, frames: usize) -> u64 {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    // The names are built-ins; building cannot fail.
    match registry::build(name, &setup) {
        Ok(policy) => simulate(trace, policy, frames).faults,
        Err(_) => 0,
    }
}

/// Times `f`.
pub(crate) fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

/// The median of `times`, in seconds.
pub(crate) fn median_s(times: &[Duration]) -> f64 {
    median(times.to_vec()).as_secs_f64()
}
