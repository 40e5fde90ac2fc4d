//! `bench sim --against libcachesim`: pagepilot's simulator and libCacheSim
//! side by side on one trace, in the same rounds.
//!
//! The trace is written once in pagepilot's binary format and once in
//! libCacheSim's oracleGeneral (one object of size 1 per page). Each round
//! runs, one after another on one core, pagepilot's single-size run of every
//! policy (loading the binary trace, building the policy, simulating) and
//! then libCacheSim's (its driver opens the oracleGeneral trace, builds the
//! cache and runs `process_trace`): trace loading is timed on both sides.
//! Then pagepilot's one-pass LRU and OPT curves against libCacheSim's
//! separate runs of LRU and Belady, extrapolated to every size from a sample
//! run once; and pagepilot's policies over one loaded trace all at once, one
//! thread each, against the same runs one after another (as `pagepilot sim`
//! runs several policies). Figures are medians over the rounds.

use crate::error::IoContext;
use crate::BenchError;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pagepilot_policy::registry::{self, Setup};
use pagepilot_sim::curve::StackPolicy;
use pagepilot_sim::sweep::auto_frames;
use pagepilot_sim::trace::{self, Format};
use pagepilot_sim::{simulate, Trace};
use serde::Serialize;

use super::lcs::{Driver, Run};
use super::{median_s, timed};
use std::io::{self, Write};

use crate::emit::{emit, Format as OutFormat};
use crate::measure::median;
use crate::BenchResult;

/// pagepilot's policy, libCacheSim's class and its keyword arguments; the
/// timed pairs.
const PAIRS: [(&str, &str, &str); 7] = [
    ("lru", "LRU", ""),
    ("fifo", "FIFO", ""),
    ("clock", "Clock", ""),
    ("arc", "ARC", ""),
    ("s3fifo", "S3FIFO", ""),
    ("sieve", "Sieve", ""),
    ("opt", "Belady", ""),
];

/// libCacheSim set to pagepilot's definition where its parameters allow:
/// miss counts only (`docs/bench-sim.md` says why they differ by default).
const VARIANTS: [(&str, &str, &str); 2] = [
    ("clock", "Clock", r#"{"init_freq": 1}"#),
    ("s3fifo", "S3FIFO", r#"{"move_to_main_threshold": 1}"#),
];

/// Policies whose miss counts must be equal on both sides.
const EXACT: [&str; 3] = ["lru", "fifo", "opt"];

/// What the comparison is run on.
pub struct Setting<'a> {
    /// The trace.
    pub trace: &'a Trace,
    /// What it is, for the report.
    pub source: String,
    /// Rounds.
    pub runs: usize,
    /// Points of the curves.
    pub points: usize,
    /// Sizes of libCacheSim's separate runs actually run.
    pub sample: usize,
    /// `--python`.
    pub python: Option<&'a Path>,
    /// `--format`.
    pub format: OutFormat,
}

/// One policy's single-size figures, side by side.
#[derive(Serialize)]
struct PolicyRow {
    policy: &'static str,
    libcachesim: String,
    pagepilot_mreq_per_s: f64,
    libcachesim_mreq_per_s: f64,
    /// pagepilot's throughput over libCacheSim's.
    ratio: f64,
    pagepilot_misses: u64,
    libcachesim_misses: u64,
    misses_equal: bool,
}

/// A whole curve against libCacheSim's separate runs.
#[derive(Serialize)]
struct CurveRow {
    policy: &'static str,
    points: usize,
    pagepilot_curve_s: f64,
    pagepilot_single_s: f64,
    curve_over_single: f64,
    /// libCacheSim's separate runs, extrapolated from `sampled` sizes.
    libcachesim_runs_s: f64,
    sampled: usize,
    /// libCacheSim's runs' time over pagepilot's curve.
    speedup: f64,
    /// Whether the curve's misses equal libCacheSim's at every sampled size.
    sampled_misses_equal: bool,
}

/// The comparison's findings.
#[derive(Serialize)]
struct Report {
    trace: String,
    references: u64,
    distinct_pages: usize,
    frames: usize,
    runs: usize,
    libcachesim_version: String,
    python: String,
    /// pagepilot's binary trace load alone (included in its runs' times).
    pagepilot_load_s: f64,
    policies: Vec<PolicyRow>,
    /// libCacheSim set to pagepilot's definitions, miss counts only.
    variants: Vec<PolicyRow>,
    curves: Vec<CurveRow>,
    /// pagepilot's single-size runs of the timed policies but OPT over one
    /// loaded trace (its load included): one after another on one core, and
    /// all at once, one thread each.
    cores: usize,
    one_core_mreq_per_s: f64,
    all_cores_mreq_per_s: f64,
    /// LRU, FIFO and OPT miss counts equal on both sides.
    exact_counts_equal: bool,
}

/// Runs the comparison.
pub fn run(s: Setting) -> BenchResult {
    let mut driver = Driver::find(s.python)?;
    let dir = Scratch::new().doing("making a scratch directory")?;
    let (ours, theirs) = (
        dir.0.join("trace.pptrace"),
        dir.0.join("trace.oracleGeneral"),
    );
    eprintln!(
        "writing the trace ({} references) as {} and {}...",
        s.trace.len(),
        ours.display(),
        theirs.display()
    );
    trace::save(s.trace, &ours, Format::Binary)?;
    trace::save(s.trace, &theirs, Format::OracleGeneral)?;
    let refs = s.trace.len() as f64;
    let frames = (s.trace.distinct() / 2).max(1);
    let timed_runs: Vec<Run> = PAIRS
        .iter()
        .map(|&(ours, cls, params)| lcs_run(ours, cls, params, frames))
        .collect::<Result<_, _>>()
        .map_err(|source| BenchError::Json {
            what: "libCacheSim parameters of a policy".into(),
            source,
        })?;

    let mut ours_t: Vec<Vec<Duration>> = vec![Vec::new(); PAIRS.len()];
    let mut theirs_t: Vec<Vec<f64>> = vec![Vec::new(); PAIRS.len()];
    let mut load_t = Vec::new();
    let mut curve_t: [Vec<Duration>; 2] = Default::default();
    let (mut one_core_t, mut all_cores_t) = (Vec::new(), Vec::new());
    let mut ours_misses = [0u64; PAIRS.len()];
    let mut theirs_misses = [0u64; PAIRS.len()];
    let mut curves = Vec::new();
    for round in 0..s.runs {
        eprintln!("round {}/{}...", round + 1, s.runs);
        let (t, _) = timed(|| load(&ours));
        load_t.push(t);
        for (k, &(name, _, _)) in PAIRS.iter().enumerate() {
            let (t, faults) = timed(|| single_run(&ours, name, frames));
            ours_t[k].push(t);
            ours_misses[k] = faults?;
        }
        for (k, stack) in [StackPolicy::Lru, StackPolicy::Opt].into_iter().enumerate() {
            let (t, curve) = timed(|| -> Result<_, trace::TraceError> {
                let t = load(&ours)?;
                Ok(stack.curve(&t.refs, t.distinct()))
            });
            curve_t[k].push(t);
            if round == 0 {
                curves.push(curve?);
            }
        }
        for (k, m) in driver.run(&theirs, &timed_runs)?.into_iter().enumerate() {
            if m.requests != s.trace.len() as u64 {
                return Err(BenchError::Measurement {
                    bench: "sim",
                    what: format!(
                        "libCacheSim read {} requests of {}",
                        m.requests,
                        s.trace.len()
                    ),
                });
            }
            theirs_t[k].push(m.seconds);
            theirs_misses[k] = m.misses;
        }
        // As `pagepilot sim` runs several policies: one load, then the runs
        // one after another, or at once on every core.
        let concurrent: Vec<&str> = PAIRS.iter().map(|p| p.0).filter(|&n| n != "opt").collect();
        let (t, _) = timed(|| -> Result<(), crate::BenchError> {
            let trace = load(&ours)?;
            for name in &concurrent {
                run_loaded(&trace, name, frames)?;
            }
            Ok(())
        });
        one_core_t.push(t);
        let (t, _) = timed(|| -> Result<(), trace::TraceError> {
            let trace = load(&ours)?;
            std::thread::scope(|scope| {
                for name in &concurrent {
                    let trace = &trace;
                    scope.spawn(move || run_loaded(trace, name, frames).is_ok());
                }
            });
            Ok(())
        });
        all_cores_t.push(t);
    }

    // libCacheSim's separate runs of LRU and Belady at a sample of sizes.
    eprintln!("libCacheSim's separate runs at {} sizes...", s.sample);
    let points = auto_frames(s.trace.distinct(), s.points);
    let sample: Vec<usize> = auto_frames(points.len(), s.sample)
        .into_iter()
        .map(|i| points[i - 1])
        .collect();
    let mut curve_rows = Vec::new();
    for (k, (name, cls)) in [("lru", "LRU"), ("opt", "Belady")].into_iter().enumerate() {
        let runs: Vec<Run> = sample
            .iter()
            .map(|&f| lcs_run(name, cls, "", f))
            .collect::<Result<_, _>>()
            .map_err(|source| BenchError::Json {
                what: "libCacheSim parameters of a policy".into(),
                source,
            })?;
        let measured = driver.run(&theirs, &runs)?;
        let equal = measured
            .iter()
            .zip(&sample)
            .all(|(m, &f)| m.misses == curves[k].faults(f));
        let sampled: f64 = measured.iter().map(|m| m.seconds).sum();
        let separate = sampled * points.len() as f64 / sample.len() as f64;
        let single = median_s(&ours_t[if k == 0 { 0 } else { PAIRS.len() - 1 }]);
        let curve = median_s(&curve_t[k]);
        curve_rows.push(CurveRow {
            policy: name,
            points: points.len(),
            pagepilot_curve_s: curve,
            pagepilot_single_s: single,
            curve_over_single: curve / single,
            libcachesim_runs_s: separate,
            sampled: sample.len(),
            speedup: separate / curve,
            sampled_misses_equal: equal,
        });
    }

    // libCacheSim set to pagepilot's definitions, counts only.
    let variant_runs: Vec<Run> = VARIANTS
        .iter()
        .map(|&(ours, cls, params)| lcs_run(ours, cls, params, frames))
        .collect::<Result<_, _>>()
        .map_err(|source| BenchError::Json {
            what: "libCacheSim parameters of a policy".into(),
            source,
        })?;
    let variant_counts = driver.run(&theirs, &variant_runs)?;

    let mut policies = Vec::new();
    for (k, &(name, cls, _)) in PAIRS.iter().enumerate() {
        let (ours_s, theirs_s) = (median_s(&ours_t[k]), median(theirs_t[k].clone()));
        policies.push(PolicyRow {
            policy: name,
            libcachesim: cls.to_string(),
            pagepilot_mreq_per_s: refs / ours_s / 1e6,
            libcachesim_mreq_per_s: refs / theirs_s / 1e6,
            ratio: theirs_s / ours_s,
            pagepilot_misses: ours_misses[k],
            libcachesim_misses: theirs_misses[k],
            misses_equal: ours_misses[k] == theirs_misses[k],
        });
    }
    let variants = VARIANTS
        .iter()
        .zip(&variant_counts)
        .map(|(&(name, cls, params), m)| {
            let k = PAIRS.iter().position(|p| p.0 == name).unwrap_or(0);
            PolicyRow {
                policy: name,
                libcachesim: format!("{cls} {params}"),
                pagepilot_mreq_per_s: f64::NAN,
                libcachesim_mreq_per_s: f64::NAN,
                ratio: f64::NAN,
                pagepilot_misses: ours_misses[k],
                libcachesim_misses: m.misses,
                misses_equal: ours_misses[k] == m.misses,
            }
        })
        .collect();
    let exact_counts_equal = policies
        .iter()
        .filter(|p| EXACT.contains(&p.policy))
        .all(|p| p.misses_equal)
        && curve_rows.iter().all(|c| c.sampled_misses_equal);
    let concurrent = (PAIRS.len() - 1) as f64 * refs / 1e6;
    let report = Report {
        trace: s.source,
        references: s.trace.len() as u64,
        distinct_pages: s.trace.distinct(),
        frames,
        runs: s.runs,
        libcachesim_version: driver.version.clone(),
        python: driver.python().display().to_string(),
        pagepilot_load_s: median_s(&load_t),
        policies,
        variants,
        curves: curve_rows,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        one_core_mreq_per_s: concurrent / median_s(&one_core_t),
        all_cores_mreq_per_s: concurrent / median_s(&all_cores_t),
        exact_counts_equal,
    };
    // NaN is not JSON: the variants' unmeasured rates print as null.
    let mut out = std::io::stdout().lock();
    emit(&mut out, s.format, &report, |out| print_table(&report, out))
        .doing("writing the report")?;
    Ok(())
}

fn print_table(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "trace: {} ({} references, {} pages); single-size runs at {} frames; medians of {} rounds",
        r.trace, r.references, r.distinct_pages, r.frames, r.runs
    )?;
    writeln!(
 out,
        "libCacheSim {} ({}), one object of size 1 per page; trace loading timed on both sides (pagepilot's load alone: {:.3}s)",
        r.libcachesim_version, r.python, r.pagepilot_load_s
    )?;
    writeln!(
        out,
        "  {:<7} {:<11} {:>10} {:>12} {:>7} {:>12} {:>12}  equal",
        "policy", "libCacheSim", "ours M/s", "theirs M/s", "ratio", "our misses", "their misses"
    )?;
    for p in &r.policies {
        writeln!(
            out,
            "  {:<7} {:<11} {:>10.1} {:>12.1} {:>6.2}x {:>12} {:>12}  {}",
            p.policy,
            p.libcachesim,
            p.pagepilot_mreq_per_s,
            p.libcachesim_mreq_per_s,
            p.ratio,
            p.pagepilot_misses,
            p.libcachesim_misses,
            if p.misses_equal { "yes" } else { "no" }
        )?;
    }
    writeln!(
        out,
        "libCacheSim set to pagepilot's definitions (docs/bench-sim.md), misses only:"
    )?;
    for p in &r.variants {
        writeln!(
            out,
            "  {:<7} {:<40} {:>12} {:>12}  {}",
            p.policy,
            p.libcachesim,
            p.pagepilot_misses,
            p.libcachesim_misses,
            if p.misses_equal { "yes" } else { "no" }
        )?;
    }
    writeln!(
        out,
        "whole curves against libCacheSim's separate runs (extrapolated from a sample of sizes):"
    )?;
    for c in &r.curves {
        writeln!(
 out,
            "  {:<4} {} points: curve {:.2}s = {:.2}x one single-size run ({:.2}s); libCacheSim's {} runs {:.1}s ({} sampled) = {:.1}x the curve; sampled misses equal: {}",
            c.policy,
            c.points,
            c.pagepilot_curve_s,
            c.curve_over_single,
            c.pagepilot_single_s,
            c.points,
            c.libcachesim_runs_s,
            c.sampled,
            c.speedup,
            c.sampled_misses_equal
        )?;
    }
    writeln!(
 out,
        "pagepilot, six policies but OPT: {:.1} M refs/s one after another, {:.1} M refs/s at once on {} cores",
        r.one_core_mreq_per_s, r.all_cores_mreq_per_s, r.cores
    )?;
    writeln!(
        out,
        "LRU, FIFO and OPT miss counts equal on both sides: {}",
        r.exact_counts_equal
    )?;
    Ok(())
}

/// libCacheSim's run of class `cls` at `size` objects with the keyword
/// arguments `params` (JSON), and a hash table sized to the cache: two
/// buckets per object at most (its default, 2^24 buckets, costs 128 MiB of
/// zeroed memory per cache and ran 2-6x slower here on small caches).
fn lcs_run(ours: &str, cls: &str, params: &str, size: usize) -> Result<Run, serde_json::Error> {
    let mut params: serde_json::Map<String, serde_json::Value> = if params.is_empty() {
        serde_json::Map::new()
    } else {
        serde_json::from_str(params)?
    };
    let hashpower = (usize::BITS - size.max(1).leading_zeros() + 1).clamp(12, 24);
    params.insert("hashpower".into(), hashpower.into());
    Ok(Run {
        name: ours.to_string(),
        policy: cls.to_string(),
        size,
        params,
    })
}

fn load(path: &Path) -> Result<Trace, trace::TraceError> {
    trace::load(path)
}

/// Loads the trace, builds the policy and simulates: pagepilot's whole run.
fn single_run(path: &Path, name: &str, frames: usize) -> Result<u64, crate::BenchError> {
    run_loaded(&load(path)?, name, frames)
}

/// Builds the policy and simulates a trace already loaded.
fn run_loaded(trace: &Trace, name: &str, frames: usize) -> Result<u64, crate::BenchError> {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    let policy = registry::build(name, &setup)?;
    Ok(simulate(trace, policy, frames).faults)
}

/// A scratch directory for the two trace files, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        let dir =
            std::env::temp_dir().join(format!("pagepilot-bench-against-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
