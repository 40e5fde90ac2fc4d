//! `bench scan`'s report: per case the medians of every side and their ratios (JSON keeps
//! every run), and the table.

use std::io::{self, Write};

use serde::Serialize;

use super::cases::{Case, ScanRun, Side};
use crate::live;
use crate::measure::{median, ratio};
use pagepilot_pager::sys::PAGE;

/// Every run of one side of a case.
#[derive(Serialize)]
pub struct SideRuns {
    /// Who ran.
    pub side: Side,
    /// Pages touched per second (median run; `None`: no run measured).
    pub pages_per_s: Option<f64>,
    /// The median run timed out: `pages_per_s` is an upper bound.
    pub pages_per_s_at_most: bool,
    /// Pages read from the disk per page touched (median of the runs that finished; pagepilot:
    /// its region's reads from the device, the others: the process's `read_bytes`).
    pub disk_pages_per_touched: Option<f64>,
    /// CPUs kept busy by the process during the median run (its CPU time, every thread,
    /// over its wall time): what a side's threads cost beside its speed (pagepilot's
    /// handlers polling between faults count here).
    pub cpus_busy: Option<f64>,
    /// Runs killed by the cgroup's OOM killer (kernel sides; not measured).
    pub oom_kills: u32,
    /// Runs killed at the time limit (kernel sides; counted at the limit).
    pub timeouts: u32,
    /// Every measured run, in round order.
    pub runs: Vec<ScanRun>,
}

impl SideRuns {
    /// No run yet.
    pub fn new(side: Side) -> SideRuns {
        SideRuns {
            side,
            pages_per_s: None,
            pages_per_s_at_most: false,
            disk_pages_per_touched: None,
            cpus_busy: None,
            oom_kills: 0,
            timeouts: 0,
            runs: Vec::new(),
        }
    }

    /// Takes the medians over the runs, for `touched` pages per run. A run that timed out
    /// counts with the time limit as its time (every finished run took less).
    pub fn summarise(&mut self, touched: u64) {
        let mut by_time: Vec<&ScanRun> = self.runs.iter().collect();
        by_time.sort_by_key(|r| r.measured.elapsed_ns);
        let Some(mid) = by_time.get(by_time.len() / 2) else {
            return;
        };
        self.pages_per_s =
            Some(ratio(touched as f64, mid.measured.elapsed_ns as f64 / 1e9).unwrap_or(0.0));
        self.pages_per_s_at_most = mid.timed_out;
        self.cpus_busy = (!mid.timed_out)
            .then(|| {
                ratio(
                    mid.measured.cpu_us as f64 * 1e3,
                    mid.measured.elapsed_ns as f64,
                )
            })
            .flatten();
        self.timeouts = self.runs.iter().filter(|r| r.timed_out).count() as u32;
        let finished: Vec<u64> = self
            .runs
            .iter()
            .filter(|r| !r.timed_out)
            .map(|r| r.pager_disk_bytes.unwrap_or(r.measured.bytes_read))
            .collect();
        if !finished.is_empty() {
            let read = median(finished) as f64 / PAGE as f64;
            self.disk_pages_per_touched = Some(ratio(read, touched as f64).unwrap_or(0.0));
        }
    }
}

/// One case: its sides side by side.
#[derive(Serialize)]
pub struct ScanPoint {
    /// The case.
    #[serde(flatten)]
    pub case: Case,
    /// Pages touched per run (all threads).
    pub pages_touched: u64,
    /// The side pagepilot is compared with.
    pub baseline: Side,
    /// The side shown for reference, if any.
    pub reference: Option<Side>,
    /// The baseline's median run timed out: its rate is an upper bound, the ratios over it
    /// lower bounds.
    pub baseline_at_most: bool,
    /// The same for the reference.
    pub reference_at_most: bool,
    /// pagepilot with its defaults, pages per second (median).
    pub defaults_pages_per_s: Option<f64>,
    /// pagepilot tuned, pages per second (median).
    pub tuned_pages_per_s: Option<f64>,
    /// The baseline, pages per second (median).
    pub baseline_pages_per_s: Option<f64>,
    /// The reference, pages per second (median).
    pub reference_pages_per_s: Option<f64>,
    /// Defaults / baseline throughput.
    pub defaults_vs_baseline: Option<f64>,
    /// Tuned / baseline throughput.
    pub tuned_vs_baseline: Option<f64>,
    /// Defaults / tuned throughput.
    pub defaults_vs_tuned: Option<f64>,
    /// Defaults / reference throughput.
    pub defaults_vs_reference: Option<f64>,
    /// The tuned row's options.
    pub tuning: live::Tuning,
    /// Every side with every run.
    pub sides: Vec<SideRuns>,
}

impl ScanPoint {
    /// Builds the point from its sides' runs (summarised here).
    pub fn new(
        case: Case,
        pages_touched: u64,
        tuning: live::Tuning,
        mut sides: Vec<SideRuns>,
    ) -> ScanPoint {
        for s in &mut sides {
            s.summarise(pages_touched);
        }
        let of = |side| sides.iter().find(|s| s.side == side);
        let rate = |side| of(side).and_then(|s| s.pages_per_s);
        let at_most = |side: Option<Side>| side.and_then(of).is_some_and(|s| s.pages_per_s_at_most);
        let div = |a: Option<f64>, b: Option<f64>| Some(ratio(a?, b?).unwrap_or(0.0));
        let (d, t) = (rate(Side::Defaults), rate(Side::Tuned));
        let b = rate(case.baseline());
        let r = case.reference().and_then(rate);
        ScanPoint {
            case,
            pages_touched,
            baseline: case.baseline(),
            reference: case.reference(),
            baseline_at_most: at_most(Some(case.baseline())),
            reference_at_most: at_most(case.reference()),
            defaults_pages_per_s: d,
            tuned_pages_per_s: t,
            baseline_pages_per_s: b,
            reference_pages_per_s: r,
            defaults_vs_baseline: div(d, b),
            tuned_vs_baseline: div(t, b),
            defaults_vs_tuned: div(d, t),
            defaults_vs_reference: div(d, r),
            tuning,
            sides,
        }
    }

    fn disk(&self, side: Side) -> Option<f64> {
        self.sides
            .iter()
            .find(|s| s.side == side)
            .and_then(|s| s.disk_pages_per_touched)
    }

    fn cpus_busy(&self, side: Side) -> Option<f64> {
        self.sides
            .iter()
            .find(|s| s.side == side)
            .and_then(|s| s.cpus_busy)
    }
}

/// The whole report.
#[derive(Serialize)]
pub struct ScanReport {
    /// Always "scan".
    pub bench: &'static str,
    /// File size in MB.
    pub file_mb: usize,
    /// pagepilot's policy.
    pub policy: String,
    /// Runs per side and case.
    pub runs: usize,
    /// Share of touched pages also written.
    pub write_fraction: f64,
    /// Longest a kernel child may run, seconds.
    pub kernel_timeout_s: u64,
    /// The read-ahead of the file's block device (`read_ahead_kb`), which sizes the kernel's
    /// read-around on faults.
    pub read_ahead_kb: Option<u64>,
    /// Cases in the order they ran.
    pub points: Vec<ScanPoint>,
    /// Wall time of the whole benchmark, seconds (file creation included).
    pub wall_s: f64,
    /// Why the kernel's sides did not run (this user cannot run the baseline).
    pub kernel_skipped: Option<String>,
}

/// `x` with `digits` decimals after `mark` (a bound: `<`, `>`, or nothing), or `-`.
fn num(x: Option<f64>, digits: usize, mark: &str) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{mark}{v:.digits$}"))
}

/// The mark of a bound, if `bound`.
fn mark(bound: bool, m: &'static str) -> &'static str {
    if bound {
        m
    } else {
        ""
    }
}

/// Writes the table: one row per case.
pub fn write_text(out: &mut impl Write, r: &ScanReport) -> io::Result<()> {
    writeln!(
        out,
        "first touches of a {} MB file, pagepilot policy {}, write fraction {}, median of {} \
         ({:.0} s); device read_ahead_kb {}",
        r.file_mb,
        r.policy,
        r.write_fraction,
        r.runs,
        r.wall_s,
        r.read_ahead_kb
            .map_or_else(|| "?".into(), |k| k.to_string())
    )?;
    writeln!(
        out,
        "{:>6} {:<5} {:<10} {:>3} {:>7} {:<5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:<8} {:>9} \
         {:>7} {:>18} {:>14}",
        "budget",
        "cache",
        "pattern",
        "thr",
        "pages",
        "base",
        "def pg/s",
        "tun pg/s",
        "base pg/s",
        "def/base",
        "tun/base",
        "def/tun",
        "ref",
        "ref pg/s",
        "def/ref",
        "disk/touch d,t,b",
        "cpus d,t,b"
    )?;
    for p in &r.points {
        let disk = format!(
            "{},{},{}",
            num(p.disk(Side::Defaults), 2, ""),
            num(p.disk(Side::Tuned), 2, ""),
            num(p.disk(p.baseline), 2, "")
        );
        let cpus = format!(
            "{},{},{}",
            num(p.cpus_busy(Side::Defaults), 2, ""),
            num(p.cpus_busy(Side::Tuned), 2, ""),
            num(p.cpus_busy(p.baseline), 2, "")
        );
        let (b_max, b_min) = (mark(p.baseline_at_most, "<"), mark(p.baseline_at_most, ">"));
        let (r_max, r_min) = (
            mark(p.reference_at_most, "<"),
            mark(p.reference_at_most, ">"),
        );
        writeln!(
            out,
            "{:>6} {:<5} {:<10} {:>3} {:>7} {:<5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:<8} \
             {:>9} {:>7} {:>18} {:>14}",
            p.case.budget_mb,
            p.case.cache.name(),
            p.case.pattern.name(),
            p.case.threads,
            p.pages_touched,
            p.baseline.short(),
            num(p.defaults_pages_per_s, 0, ""),
            num(p.tuned_pages_per_s, 0, ""),
            num(p.baseline_pages_per_s, 0, b_max),
            num(p.defaults_vs_baseline, 3, b_min),
            num(p.tuned_vs_baseline, 3, b_min),
            num(p.defaults_vs_tuned, 3, ""),
            p.reference.map_or("-", Side::short),
            num(p.reference_pages_per_s, 0, r_max),
            num(p.defaults_vs_reference, 3, r_min),
            disk,
            cpus,
        )?;
    }
    let over_sides = |count: fn(&SideRuns) -> u32| -> u32 {
        r.points.iter().flat_map(|p| &p.sides).map(count).sum()
    };
    if let Some(why) = &r.kernel_skipped {
        writeln!(out, "no kernel sides: {why}")?;
    }
    let ooms = over_sides(|s| s.oom_kills);
    if ooms > 0 {
        writeln!(
            out,
            "{ooms} kernel run(s) killed by the cgroup's OOM killer (not measured)"
        )?;
    }
    let timeouts = over_sides(|s| s.timeouts);
    if timeouts > 0 {
        writeln!(
            out,
            "{timeouts} kernel run(s) killed after {} s (--kernel-timeout-s), counted at that \
             time: <rate is an upper bound, >ratio a lower one",
            r.kernel_timeout_s
        )?;
    }
    writeln!(
        out,
        "def: pagepilot with no option but the policy; tun: tuned (handler thread per \
         application thread, sequential 128-page windows 4 ahead, other orders one page per \
         fault); base: cold the kernel's mmap in a memory cgroup of the budget, warm buffered \
         pread (same pages, same order); ref: warm the kernel's mmap of the cached file, cold \
         uniform the kernel told MADV_RANDOM; disk/touch: pages read from the disk per page \
         touched."
    )?;
    if r.write_fraction > 0.0 {
        writeln!(
            out,
            "writes: times include writing the dirty pages back (pagepilot's unmap, the \
             kernel's msync + munmap, pread's fdatasync); every written page was read back."
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Measured;

    fn run(ms: u64, timed_out: bool, bytes_read: u64) -> ScanRun {
        ScanRun {
            measured: Measured {
                elapsed_ns: ms * 1_000_000,
                bytes_read,
                ..Default::default()
            },
            timed_out,
            pager_disk_bytes: None,
            fault_events: None,
            cached_pages_before: None,
            written_pages_checked: 0,
        }
    }

    #[test]
    fn test_a_timed_out_median_run_makes_the_rate_an_upper_bound() {
        let mut s = SideRuns::new(Side::KernelMmap);
        s.runs = vec![
            run(30_000, true, 0),
            run(500, false, 8 << 20),
            run(30_000, true, 0),
        ];
        s.summarise(1000);
        assert_eq!(s.pages_per_s, Some(1000.0 / 30.0));
        assert!(s.pages_per_s_at_most);
        assert_eq!(s.timeouts, 2);
        // Disk reads come from the run that finished: 2048 pages for 1000 touched.
        assert_eq!(s.disk_pages_per_touched, Some(2.048));
        // One timeout among three: the median run finished, the rate is exact.
        s.runs[2] = run(400, false, 0);
        s.summarise(1000);
        assert_eq!(
            (s.pages_per_s, s.pages_per_s_at_most),
            (Some(2000.0), false)
        );
    }

    #[test]
    fn test_point_ratios_compare_defaults_and_tuned_with_the_cases_baseline() {
        let case = Case {
            budget_mb: 16,
            cache: crate::workload::Cache::Warm,
            pattern: crate::workload::Pattern::Random,
            threads: 2,
        };
        let side = |side, ms| {
            let mut s = SideRuns::new(side);
            s.runs = vec![run(ms, false, 0)];
            s
        };
        let sides = vec![
            side(Side::Defaults, 400),
            side(Side::Tuned, 200),
            side(Side::Pread, 100),
            side(Side::KernelMmap, 800),
        ];
        let p = ScanPoint::new(case, 1000, live::Tuning::default(), sides);
        assert_eq!(p.baseline, Side::Pread);
        assert_eq!(p.reference, Some(Side::KernelMmap));
        assert_eq!(p.defaults_vs_baseline, Some(0.25));
        assert_eq!(p.tuned_vs_baseline, Some(0.5));
        assert_eq!(p.defaults_vs_tuned, Some(0.5));
        assert_eq!(p.defaults_vs_reference, Some(2.0));
        let mut text = Vec::new();
        let report = ScanReport {
            bench: "scan",
            file_mb: 8,
            policy: "lru".into(),
            runs: 1,
            write_fraction: 0.0,
            kernel_timeout_s: 30,
            read_ahead_kb: Some(128),
            points: vec![p],
            wall_s: 1.0,
            kernel_skipped: None,
        };
        write_text(&mut text, &report).unwrap();
        let text = String::from_utf8(text).unwrap();
        let row = text.lines().nth(2).unwrap();
        for cell in [
            "16", "warm", "random", "pread", "2500", "0.250", "0.500", "mmap", "2.000",
        ] {
            assert!(
                row.split_whitespace().any(|c| c == cell),
                "{cell} not in {row}"
            );
        }
    }
}
