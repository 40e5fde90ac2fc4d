//! `pagepilot bench join`: the nested-loops join of HiPEC section 5.3, live.
//!
//! An outer table of 64-byte tuples in a file is scanned `Loop` times (once per tuple of the
//! pinned 4 KB inner table) under a budget of M pages, by pagepilot with each policy and by
//! the kernel's `mmap` in a memory cgroup of the same size. The paper's analytic fault counts,
//! with O and M in pages: LRU `PF_l = O * Loop`, MRU `PF_m = O + (O - M) * (Loop - 1)`.
//! pagepilot's live "lru" is CLOCK (second chance), which on a cyclic scan also faults on
//! every page of every loop.

use crate::error::IoContext;
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::datafile::DataFile;
use super::measure::{
    check_range, median_of, ratio, FileBenchArgs, Measured, OutOfRange, PairedSpeedup,
};
use super::window::{mru_window_faults, Window};
use super::workload::Workload;
use super::{cjoin, kernel, live};
use crate::emit::emit;
use crate::BenchResult;
use pagepilot_pager::sys::PAGE;

const MB: usize = 1 << 20;

/// Arguments of `pagepilot bench join`.
#[derive(clap::Args)]
pub struct Args {
    /// Outer table sizes in MB: a list (`20,40,60`) or a range in steps of 10 (`20..60`).
    #[arg(long, default_value = "20,40,60")]
    outer_mb: String,
    /// Frame budget in MB (pagepilot's budget and the kernel's cgroup limit).
    #[arg(long, default_value_t = 40)]
    budget_mb: usize,
    /// Policies, `kernel` for the Linux kernel's own paging.
    #[arg(long, default_value = "lru,mru,seq,kernel", value_delimiter = ',')]
    policies: Vec<String>,
    /// Scans of the outer table (one per inner tuple: 64 in the paper).
    #[arg(long = "loops", default_value_t = 64)]
    loops: usize,
    /// pagepilot's read-ahead window in pages for every policy (1: demand paging). Default:
    /// per policy, as docs/pager.md advises: MRU/SEQ (O-M)/212 pages with one window ahead,
    /// so the windows' frames keep page-ins within 1% of PF_m; LRU/CLOCK/FIFO 128, 4 ahead.
    #[arg(long)]
    readahead: Option<usize>,
    /// Override: pagepilot's asynchronous read-ahead on (true) or off (false) for every policy.
    #[arg(long)]
    async_readahead: Option<bool>,
    /// pagepilot's prefetched windows in flight with asynchronous read-ahead.
    #[arg(long)]
    readahead_depth: Option<usize>,
    /// Override: pagepilot's faults served in the faulting thread (true) or by a handler
    /// thread (false) for every policy.
    #[arg(long)]
    faulting_thread: Option<bool>,
    /// Extra rows: every pagepilot policy again with each of these read-ahead windows, as
    /// `KxD` (k pages, D windows kept ahead; `x0` reads synchronously), e.g. `24x1,64x1,128x1`.
    /// Under MRU each costs (D + 1) * k page-ins per pass: the frontier between page-ins
    /// and speed, measured side by side with the kernel.
    #[arg(long, value_delimiter = ',')]
    windows: Vec<Window>,
    /// The C program of the "defaults (C API)" rows (`crates/bench/c/join.c`; `none`: no such
    /// rows). Default: `pp-join-c` beside this executable, if built.
    #[arg(long)]
    c_program: Option<PathBuf>,
    #[command(flatten)]
    common: FileBenchArgs,
}

/// Failure of the join benchmark's arguments.
#[derive(Debug, thiserror::Error)]
pub enum JoinArgError {
    /// `--outer-mb` is not a list or range of positive sizes.
    #[error("--outer-mb {0:?}: expected sizes in MB like 20,40,60 or 20..60")]
    OuterSizes(String),
    /// A size or count is zero or too large.
    #[error(transparent)]
    OutOfRange(#[from] OutOfRange),
    /// Unknown entry in `--policies` is reported by the pager; empty list here.
    #[error("--policies is empty")]
    NoPolicies,
}

/// Parameters of one join comparison.
pub struct JoinSetup {
    /// Outer table sizes in MB.
    pub outer_mb: Vec<usize>,
    /// Budget in MB.
    pub budget_mb: usize,
    /// Policies (`kernel` for the kernel).
    pub policies: Vec<String>,
    /// Outer scans.
    pub loops: usize,
    /// Runs (median).
    pub runs: usize,
    /// Directory of the table file.
    pub dir: PathBuf,
    /// pagepilot's read-ahead override (`None`: chosen per policy).
    pub readahead: Option<usize>,
    /// Asynchronous read-ahead override.
    pub async_readahead: Option<bool>,
    /// Prefetched windows in flight.
    pub readahead_depth: Option<usize>,
    /// Faulting-thread override.
    pub faulting_thread: Option<bool>,
    /// Extra rows: each pagepilot policy again with each of these windows.
    pub windows: Vec<Window>,
    /// The C program of the "defaults (C API)" rows (`None`: no such rows).
    pub c_program: Option<PathBuf>,
}

/// One policy at one size.
#[derive(Serialize)]
pub struct PolicyResult {
    /// Policy name, or `kernel`.
    pub policy: String,
    /// The row's name: the policy, followed by its window for `--windows` rows (`mru 64x1`).
    pub label: String,
    /// The window this row read with (tuned pagepilot rows).
    pub window: Option<Window>,
    /// Whether the row ran through the public API with no option but the policy: the
    /// pager's defaults, what a user gets.
    pub defaults: bool,
    /// Median elapsed time in ms.
    pub elapsed_ms: f64,
    /// Median page-ins (pagepilot missing faults; kernel major faults).
    pub faults: u64,
    /// Median minor faults.
    pub minor_faults: u64,
    /// Median bytes read from the device.
    pub bytes_read: u64,
    /// pagepilot rows: bytes read from the device beyond the page-ins (the
    /// program's own text and libraries read again when the memory left
    /// beside the frames is too small to keep them).
    pub read_beyond_page_ins: Option<u64>,
    /// The paper's analytic faults for this policy (LRU and MRU only).
    pub analytic_faults: Option<u64>,
    /// Measured faults / analytic faults.
    pub faults_vs_analytic: Option<f64>,
    /// MRU's page-ins with its windows' frames taken out of its resident set (docs/pager.md):
    /// O + (O - M + (depth + 1) * k) * (Loop - 1).
    pub window_formula_faults: Option<u64>,
    /// Kernel time / this policy's time (above 1: faster than the kernel), of the medians.
    pub speedup_vs_kernel: Option<f64>,
    /// Kernel time / this policy's time within each round (the rows of a round run back to
    /// back, so the machine's drift between rounds cancels out).
    pub speedup_per_round: Option<PairedSpeedup>,
    /// Whether the row ran through the C API, from `crates/bench/c/join.c` (with defaults).
    pub c_api: bool,
    /// pagepilot's options for this policy (none for the kernel).
    pub tuning: Option<live::Tuning>,
    /// Every run.
    pub runs: Vec<Measured>,
}

/// All policies at one outer size.
#[derive(Serialize)]
pub struct SizeResult {
    /// Outer table size in MB.
    pub outer_mb: usize,
    /// O: outer table pages.
    pub outer_pages: u64,
    /// M: budget pages.
    pub budget_pages: u64,
    /// PF_l = O * Loop.
    pub pf_lru: u64,
    /// PF_m = O + (O - M) * (Loop - 1).
    pub pf_mru: u64,
    /// Per policy.
    pub policies: Vec<PolicyResult>,
}

/// The whole report.
#[derive(Serialize)]
pub struct JoinReport {
    /// Always "join".
    pub bench: &'static str,
    /// Budget in MB.
    pub budget_mb: usize,
    /// Outer scans.
    pub loops: usize,
    /// Runs per point.
    pub runs: usize,
    /// Per outer size.
    pub sizes: Vec<SizeResult>,
    /// Why the kernel rows were asked for but not run (this user cannot run the baseline).
    pub kernel_skipped: Option<String>,
}

/// The paper's analytic faults (O, M in pages): LRU and MRU.
pub fn analytic_faults(o: u64, m: u64, loops: u64) -> (u64, u64) {
    if o <= m {
        return (o, o);
    }
    (o * loops, o + (o - m) * (loops.saturating_sub(1)))
}

/// One row of the comparison: a policy and the read-ahead window it reads with (`None`: the
/// kernel).
struct Row {
    label: String,
    policy: String,
    kind: RowKind,
}

/// How a row runs the join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowKind {
    /// The kernel's own paging in a memory cgroup.
    Kernel,
    /// pagepilot, tuned: reading with this window, faults in the faulting thread.
    Tuned(Window),
    /// pagepilot through the public API with no option but the policy: what a user gets.
    Defaults,
    /// The same through the C API, from the C program (`cjoin.rs`).
    CApi,
}

impl RowKind {
    fn window(self) -> Option<Window> {
        match self {
            RowKind::Tuned(w) => Some(w),
            _ => None,
        }
    }

    /// pagepilot's options for this row: its window's, or the pager's defaults.
    fn tuning(self, s: &JoinSetup) -> live::Tuning {
        self.window()
            .map_or_else(live::Tuning::default, |w| tuning(w, s))
    }
}

/// The rows to measure, in order: each policy with its own tuning, then again with each of
/// `s.windows`, then with the pager's defaults (and through the C API); the kernel once.
fn rows(s: &JoinSetup, o: u64, m: u64) -> Vec<Row> {
    let mut rows = Vec::new();
    for policy in &s.policies {
        if policy == "kernel" {
            rows.push(Row {
                label: policy.clone(),
                policy: policy.clone(),
                kind: RowKind::Kernel,
            });
            continue;
        }
        rows.push(Row {
            label: policy.clone(),
            policy: policy.clone(),
            kind: RowKind::Tuned(join_window(policy, o, m, s)),
        });
        for &w in &s.windows {
            rows.push(Row {
                label: format!("{policy} {w}"),
                policy: policy.clone(),
                kind: RowKind::Tuned(w),
            });
        }
        rows.push(Row {
            label: format!("{policy} defaults"),
            policy: policy.clone(),
            kind: RowKind::Defaults,
        });
        if s.c_program.is_some() {
            rows.push(Row {
                label: format!("{policy} defaults (C API)"),
                policy: policy.clone(),
                kind: RowKind::CApi,
            });
        }
    }
    rows
}

fn parse_sizes(text: &str) -> Result<Vec<usize>, JoinArgError> {
    let bad = || JoinArgError::OuterSizes(text.to_string());
    let sizes: Vec<usize> = if let Some((a, b)) = text.split_once("..") {
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a > b {
            return Err(bad());
        }
        let mut v: Vec<usize> = (a..=b).step_by(10).collect();
        if v.last() != Some(&b) {
            v.push(b);
        }
        v
    } else {
        text.split(',')
            .map(|s| s.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?
    };
    if sizes.is_empty() || sizes.iter().any(|&s| s == 0 || s > 4096) {
        return Err(bad());
    }
    Ok(sizes)
}

/// Runs `pagepilot bench join`.
pub fn run(args: Args) -> BenchResult {
    let format = args.common.format;
    let setup = setup_of(args)?;
    let report = measure(&setup, &mut |_| {})?;
    let mut out = std::io::stdout().lock();
    emit(&mut out, format, &report, |out| print_text(&report, out)).doing("writing the report")?;
    Ok(())
}

/// The comparison `args` ask for, checked.
pub(crate) fn setup_of(args: Args) -> Result<JoinSetup, crate::BenchError> {
    check_range("--budget-mb", args.budget_mb, 1 << 16)?;
    check_range("--loops", args.loops, 1 << 12)?;
    check_range("--runs", args.common.runs, 100)?;
    if args.policies.is_empty() {
        return Err(JoinArgError::NoPolicies.into());
    }
    Ok(JoinSetup {
        outer_mb: parse_sizes(&args.outer_mb)?,
        budget_mb: args.budget_mb,
        policies: args.policies,
        loops: args.loops,
        runs: args.common.runs,
        dir: super::datafile::default_dir(args.common.dir),
        readahead: args.readahead,
        async_readahead: args.async_readahead,
        readahead_depth: args.readahead_depth,
        faulting_thread: args.faulting_thread,
        windows: args.windows,
        c_program: cjoin::find_program(args.c_program.as_deref())?,
    })
}

/// Measures every policy at every size; runs interleave the policies so that the machine's
/// drift hits them alike. `progress` hears each finished point.
pub fn measure(
    s: &JoinSetup,
    progress: &mut dyn FnMut(&str),
) -> Result<JoinReport, crate::BenchError> {
    let budget = s.budget_mb * MB;
    let workload = Workload::Join { loops: s.loops };
    for policy in s.policies.iter().filter(|p| *p != "kernel") {
        live::check_policy(policy)?;
    }
    let kernel_skipped = s
        .policies
        .iter()
        .any(|p| p == "kernel")
        .then(kernel::baseline_available)
        .and_then(Result::err)
        .map(|e| pagepilot_policy::chain(&e).to_string());
    let mut sizes = Vec::new();
    for &outer_mb in &s.outer_mb {
        let file = DataFile::create(&s.dir, &format!("join-{outer_mb}mb"), outer_mb * MB)?;
        let o = file.pages() as u64;
        let m = (budget / PAGE) as u64;
        let mut rows = rows(s, o, m);
        rows.retain(|r| kernel_skipped.is_none() || r.kind != RowKind::Kernel);
        let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); rows.len()];
        for _ in 0..s.runs {
            for (row, runs) in rows.iter().zip(runs.iter_mut()) {
                let measured = match row.kind {
                    RowKind::Kernel => {
                        kernel::run(&file, budget, workload, kernel::Advice::Normal)?
                    }
                    RowKind::CApi => {
                        let program = s.c_program.as_deref().ok_or_else(|| {
                            crate::BenchError::Measurement {
                                bench: "join",
                                what: "no C program".into(),
                            }
                        })?;
                        cjoin::run(program, &file, budget, &row.policy, s.loops)?
                    }
                    k => live::run(&file, budget, &row.policy, k.tuning(s), workload)?,
                };
                progress(&format!(
                    "{outer_mb} MB {}: {} ms",
                    row.label,
                    measured.elapsed_ns / 1_000_000
                ));
                runs.push(measured);
            }
        }
        let (pf_lru, pf_mru) = analytic_faults(o, m, s.loops as u64);
        let kernel_row = rows.iter().position(|r| r.kind == RowKind::Kernel);
        let kernel_ns = kernel_row.map(|k| median_of(&runs[k]).elapsed_ns as f64);
        let kernel_runs = kernel_row.map(|k| runs[k].clone());
        let policies = rows
            .into_iter()
            .zip(runs)
            .map(|(row, runs)| {
                let med = median_of(&runs);
                let mru = matches!(row.policy.as_str(), "mru" | "mru-live");
                let analytic = match row.policy.as_str() {
                    "lru" | "clock" => Some(pf_lru),
                    _ if mru => Some(pf_mru),
                    _ => None,
                };
                let window = row.kind.window();
                let pagepilot = row.kind != RowKind::Kernel;
                PolicyResult {
                    policy: row.policy,
                    label: row.label,
                    window,
                    defaults: matches!(row.kind, RowKind::Defaults | RowKind::CApi),
                    elapsed_ms: med.elapsed_ns as f64 / 1e6,
                    faults: med.faults,
                    minor_faults: med.minor_faults,
                    bytes_read: med.bytes_read,
                    read_beyond_page_ins: pagepilot
                        .then(|| med.bytes_read.saturating_sub(med.faults * PAGE as u64)),
                    analytic_faults: analytic,
                    faults_vs_analytic: analytic
                        .map(|a| ratio(med.faults as f64, a as f64).unwrap_or(0.0)),
                    window_formula_faults: window
                        .filter(|_| mru)
                        .map(|w| mru_window_faults(o, m, s.loops as u64, w)),
                    speedup_vs_kernel: kernel_ns
                        .filter(|_| pagepilot)
                        .map(|k| ratio(k, med.elapsed_ns as f64).unwrap_or(0.0)),
                    speedup_per_round: kernel_runs
                        .as_deref()
                        .filter(|_| pagepilot)
                        .and_then(|k| PairedSpeedup::of(k, &runs)),
                    c_api: row.kind == RowKind::CApi,
                    tuning: pagepilot.then(|| row.kind.tuning(s)),
                    runs,
                }
            })
            .collect();
        sizes.push(SizeResult {
            outer_mb,
            outer_pages: o,
            budget_pages: m,
            pf_lru,
            pf_mru,
            policies,
        });
    }
    Ok(JoinReport {
        bench: "join",
        budget_mb: s.budget_mb,
        loops: s.loops,
        runs: s.runs,
        sizes,
        kernel_skipped,
    })
}

/// The read-ahead window of `policy` on the join (docs/pager.md, "Tuning for the benchmarks"),
/// with the command line's overrides applied.
///
/// Every policy reads ahead asynchronously on the io_uring, faults served in the faulting
/// thread (the join is one thread that never hands region memory to the kernel), so reads
/// are in flight while it computes and no thread hand-off is paid per window. MRU/SEQ keep
/// `depth + 1` windows of k pages outside their resident set, which costs (depth + 1) * k
/// page-ins per pass: one window ahead (depth 1) and k = (O - M)/212 keep that under 0.95%
/// of PF_m (k = 24 at the paper's 60 MB / 40 MB). LRU/CLOCK/FIFO page in O*Loop whatever
/// the window: 128 pages, 4 ahead.
fn join_window(policy: &str, o: u64, m: u64, s: &JoinSetup) -> Window {
    let mru_like = policy.starts_with("mru") || policy.starts_with("seq");
    let (k, depth) = if !mru_like {
        (128, 4)
    } else if o > m {
        (((o - m) / 212).max(1) as usize, 1)
    } else {
        (64, 1)
    };
    Window {
        pages: s.readahead.unwrap_or(k),
        // The pager keeps 1 to 16 windows ahead; asynchronous read-ahead off reads synchronously.
        depth: if s.async_readahead.unwrap_or(true) {
            s.readahead_depth.unwrap_or(depth).clamp(1, 16)
        } else {
            0
        },
    }
}

/// pagepilot's options for reading with window `w`: on the io_uring unless synchronous, faults
/// served in the faulting thread unless overridden.
fn tuning(w: Window, s: &JoinSetup) -> live::Tuning {
    live::Tuning {
        readahead: Some(w.pages),
        async_readahead: Some(w.depth > 0),
        readahead_depth: Some(w.depth.max(1)),
        faulting_thread: s.faulting_thread.unwrap_or(true),
        ..Default::default()
    }
}

/// Prints the report as a table.
pub fn print_text(r: &JoinReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "nested-loops join (HiPEC 5.3): budget {} MB, Loop = {}, median of {} run(s)",
        r.budget_mb, r.loops, r.runs
    )?;
    for s in &r.sizes {
        writeln!(
            out,
            "\nouter {} MB: O = {} pages, M = {} pages, PF_l = {}, PF_m = {}",
            s.outer_mb, s.outer_pages, s.budget_pages, s.pf_lru, s.pf_mru
        )?;
        let w = s
            .policies
            .iter()
            .map(|p| p.label.len())
            .fold(12, usize::max);
        writeln!(
            out,
            "  {:<w$} {:>6} {:>11} {:>10} {:>10} {:>12} {:>10} {:>10} {:>8} {:>18} {:>20}",
            "policy",
            "window",
            "elapsed ms",
            "faults",
            "analytic",
            "meas/analyt",
            "formula",
            "MB read",
            "beyond",
            "speedup vs kernel",
            "per round [range]"
        )?;
        for p in &s.policies {
            let opt = |v: Option<f64>, suffix: &str| {
                v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}{suffix}"))
            };
            let text = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
            writeln!(
                out,
                "  {:<w$} {:>6} {:>11.1} {:>10} {:>10} {:>12} {:>10} {:>10.1} {:>8} {:>18} {:>20}",
                p.label,
                text(p.window.map(|w| w.to_string())),
                p.elapsed_ms,
                p.faults,
                text(p.analytic_faults.map(|a| a.to_string())),
                opt(p.faults_vs_analytic, ""),
                text(p.window_formula_faults.map(|f| f.to_string())),
                p.bytes_read as f64 / MB as f64,
                text(
                    p.read_beyond_page_ins
                        .map(|b| format!("{:.1}", b as f64 / MB as f64))
                ),
                opt(p.speedup_vs_kernel, "x"),
                text(
                    p.speedup_per_round
                        .as_ref()
                        .map(|s| format!("{:.2}x [{:.2}-{:.2}]", s.median, s.min, s.max))
                ),
            )?;
        }
    }
    writeln!(
        out,
        "\nfaults: pagepilot page-ins; kernel: major faults (its read-ahead maps many pages \
         per fault).\nwindow: k pages x D windows ahead (D = 0: synchronous). formula: MRU's \
         page-ins with the windows' frames outside its resident set,\n\
         O + (O-M+(D+1)k)(Loop-1). beyond: MB read beyond the page-ins (the program's own \
         text read again).\nspeedup: kernel time / policy time, of the medians; \
         per round: its median over the rounds (each round runs every row back to back).\n\
         defaults: the region mapped through the public API with no option but the policy \
         (what a user gets), (C API): the same from a C program through pp_map_file; the \
         other rows are tuned."
    )?;
    if let Some(why) = &r.kernel_skipped {
        writeln!(out, "no kernel rows: {why}")?;
    }
    Ok(())
}

/// Window of the demo's extra rows: at its size, 64 pages one ahead cost MRU 4% more page-ins
/// than PF_m but read in requests large enough for these disks (docs/pager.md, "Fifth round").
const DEMO_WINDOW: Window = Window {
    pages: 64,
    depth: 1,
};

/// The live join at a size that finishes in well under a minute (24 MB outer table, 16 MB
/// budget, 8 loops; smaller cgroup limits OOM-kill the kernel baseline's own process), each
/// policy with its own tuning and with [`DEMO_WINDOW`], printed as a table: what
/// `pagepilot demo` shows.
pub fn demo_join(out: &mut dyn Write) -> Result<(), crate::BenchError> {
    let setup = JoinSetup {
        outer_mb: vec![24],
        budget_mb: 16,
        policies: ["lru", "mru", "seq", "kernel"].map(String::from).to_vec(),
        loops: 8,
        runs: 1,
        dir: std::env::temp_dir(),
        readahead: None,
        async_readahead: None,
        readahead_depth: None,
        faulting_thread: None,
        windows: vec![DEMO_WINDOW],
        c_program: None,
    };
    let report = measure(&setup, &mut |_| {})?;
    print_text(&report, out).doing("writing the report")?;
    writeln!(
        out,
        "\nmru and seq read ahead in windows of (O-M)/212 pages by default, so that their \
         frames keep page-ins within 1% of PF_m;\nthe {DEMO_WINDOW} rows spend more frames \
         ahead (more page-ins for MRU, none for LRU) on fewer, larger reads."
    )
    .doing("writing the report")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_analytic_faults_follow_the_paper() {
        // 60 MB outer, 40 MB budget, 64 loops, 4 KB pages.
        let (l, m) = analytic_faults(15360, 10240, 64);
        assert_eq!(l, 15360 * 64);
        assert_eq!(m, 15360 + 5120 * 63);
        // Fits in memory: each page faults once.
        assert_eq!(analytic_faults(5120, 10240, 64), (5120, 5120));
    }

    #[test]
    fn test_rows_repeat_each_pagepilot_policy_per_window_and_with_defaults_and_the_kernel_once() {
        let setup = JoinSetup {
            outer_mb: vec![60],
            budget_mb: 40,
            policies: ["mru", "kernel", "lru"].map(String::from).to_vec(),
            loops: 64,
            runs: 1,
            dir: PathBuf::from("/tmp"),
            readahead: None,
            async_readahead: None,
            readahead_depth: None,
            faulting_thread: None,
            windows: vec!["64x1".parse().unwrap(), "52x0".parse().unwrap()],
            c_program: Some(PathBuf::from("/bin/true")),
        };
        let rows = rows(&setup, 15360, 10240);
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "mru",
                "mru 64x1",
                "mru 52x0",
                "mru defaults",
                "mru defaults (C API)",
                "kernel",
                "lru",
                "lru 64x1",
                "lru 52x0",
                "lru defaults",
                "lru defaults (C API)"
            ]
        );
        assert_eq!(rows[5].kind, RowKind::Kernel);
        assert_eq!(rows[3].kind, RowKind::Defaults);
        assert_eq!(rows[4].kind, RowKind::CApi);
        let sync = tuning(rows[2].kind.window().unwrap(), &setup);
        assert_eq!(
            (sync.readahead, sync.async_readahead),
            (Some(52), Some(false))
        );
        // The policy's own row keeps the 1% tuning: (O - M)/212 pages, one ahead.
        assert_eq!(
            tuning(rows[0].kind.window().unwrap(), &setup).readahead,
            Some(24)
        );
    }

    #[test]
    fn test_outer_sizes_parse_lists_and_ranges() {
        assert_eq!(parse_sizes("20,40,60").unwrap(), vec![20, 40, 60]);
        assert_eq!(parse_sizes("20..60").unwrap(), vec![20, 30, 40, 50, 60]);
        assert_eq!(parse_sizes("20..35").unwrap(), vec![20, 30, 35]);
        assert!(matches!(
            parse_sizes("60..20"),
            Err(JoinArgError::OuterSizes(_))
        ));
        assert!(matches!(parse_sizes("0"), Err(JoinArgError::OuterSizes(_))));
        assert!(matches!(parse_sizes("x"), Err(JoinArgError::OuterSizes(_))));
    }
}
