//! `bench apps`'s report: per application its three rows, each with its runs and their
//! medians (over the runs that succeeded), the kernel's time over the row's, and a closing
//! line per application with kernel/defaults and kernel/best (`text` writes it for people).

use std::path::PathBuf;

use serde::Serialize;

use super::app::App;
use super::exec::End;
use super::runlog::Interposed;
use super::variant::Variant;
use crate::measure::{median, ratio};

/// One run of a row.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Wall time, seconds.
    pub wall_s: f64,
    /// How it ended.
    #[serde(flatten)]
    pub end: End,
    /// Bytes read from the disk (`ru_inblock * 512` of the reaped child).
    pub bytes_read: u64,
    /// Major faults (`ru_majflt`).
    pub major_faults: u64,
    /// The cgroup's peak charge, bytes.
    pub peak_bytes: u64,
    /// The interposer's counts (pagepilot rows; `None`: no region logged).
    pub interposed: Option<Interposed>,
    /// Whether it printed what the application's first kernel run printed.
    pub output_matches: bool,
}

impl Run {
    /// Whether it exited with success (only such runs enter the medians).
    pub fn ok(&self) -> bool {
        self.end == End::Exited { code: 0 }
    }
}

/// Medians over a row's successful runs, each field on its own.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Medians {
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Bytes read from the disk.
    pub bytes_read: u64,
    /// Major faults.
    pub major_faults: u64,
    /// The cgroup's peak, bytes.
    pub peak_bytes: u64,
    /// The interposer's page-ins (pages read), when it logged regions.
    pub pages_read: Option<u64>,
    /// The interposer's faults, when it logged regions.
    pub faults: Option<u64>,
}

/// One row of an application.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Which.
    pub variant: Variant,
    /// The policy (`-` for the kernel).
    pub policy: String,
    /// The budget as given (`auto` for the defaults).
    pub budget: String,
    /// Every run, in order.
    pub runs: Vec<Run>,
    /// Medians over the successful runs (`None`: none succeeded).
    pub median: Option<Medians>,
    /// The kernel's median time over this row's.
    pub kernel_over_row: Option<f64>,
}

impl Row {
    /// A row with no run yet.
    pub fn new(variant: Variant, policy: &str, budget: String) -> Row {
        Row {
            variant,
            policy: policy.into(),
            budget,
            runs: Vec::new(),
            median: None,
            kernel_over_row: None,
        }
    }

    /// Computes the medians of the runs so far.
    pub fn settle(&mut self) {
        let ok: Vec<&Run> = self.runs.iter().filter(|r| r.ok()).collect();
        if ok.is_empty() {
            self.median = None;
            return;
        }
        let m = |f: fn(&Run) -> u64| median(ok.iter().map(|r| f(r)).collect());
        let logged: Vec<Interposed> = ok.iter().filter_map(|r| r.interposed).collect();
        let mi = |f: fn(&Interposed) -> u64| {
            (!logged.is_empty()).then(|| median(logged.iter().map(f).collect()))
        };
        self.median = Some(Medians {
            wall_s: median(ok.iter().map(|r| r.wall_s).collect()),
            bytes_read: m(|r| r.bytes_read),
            major_faults: m(|r| r.major_faults),
            peak_bytes: m(|r| r.peak_bytes),
            pages_read: mi(|i| i.pages_read),
            faults: mi(|i| i.faults),
        });
    }

    /// What went wrong in its runs, if anything: failures by kind, differing output.
    pub fn note(&self) -> String {
        let count = |f: &dyn Fn(&Run) -> bool| self.runs.iter().filter(|r| f(r)).count();
        let mut notes = Vec::new();
        for (what, n) in [
            ("oom-killed", count(&|r| r.end == End::OomKilled)),
            ("timed out", count(&|r| r.end == End::TimedOut)),
            (
                "failed",
                count(&|r| matches!(r.end, End::Exited { code } if code != 0)),
            ),
            ("killed", count(&|r| matches!(r.end, End::Signaled { .. }))),
            ("OUTPUT DIFFERS", count(&|r| r.ok() && !r.output_matches)),
        ] {
            if n > 0 {
                notes.push(format!("{what} {n}/{}", self.runs.len()));
            }
        }
        notes.join(", ")
    }
}

/// One application's rows.
#[derive(Clone, Debug, Serialize)]
pub struct AppReport {
    /// The application.
    pub app: App,
    /// What one run does.
    pub what: String,
    /// Its data.
    pub data: PathBuf,
    /// The data's size, bytes.
    pub data_bytes: u64,
    /// Why the best row's policy (the table's reason, or that `--policy` chose it).
    pub best_why: String,
    /// What its first successful kernel run printed (every run must print the same).
    pub output: Option<String>,
    /// Kernel, defaults, best.
    pub rows: Vec<Row>,
    /// Kernel time over the defaults' (medians).
    pub kernel_over_defaults: Option<f64>,
    /// Kernel time over the best row's (medians).
    pub kernel_over_best: Option<f64>,
}

impl AppReport {
    /// Computes every row's medians and the ratios to the kernel's.
    pub fn settle(&mut self) {
        for row in &mut self.rows {
            row.settle();
        }
        let wall = |v: Variant| {
            self.rows
                .iter()
                .find(|r| r.variant == v)
                .and_then(|r| r.median.map(|m| m.wall_s))
        };
        let kernel = wall(Variant::Kernel);
        let over = |w: Option<f64>| kernel.zip(w).and_then(|(k, w)| ratio(k, w));
        let (defaults, best) = (over(wall(Variant::Defaults)), over(wall(Variant::Best)));
        for row in &mut self.rows {
            row.kernel_over_row = over(row.median.map(|m| m.wall_s));
        }
        self.kernel_over_defaults = defaults;
        self.kernel_over_best = best;
    }
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct AppsReport {
    /// `apps`.
    pub bench: &'static str,
    /// Every row's memory cgroup limit, bytes.
    pub memory_bytes: u64,
    /// Runs per row.
    pub runs: usize,
    /// The best rows' budget, bytes (unless an application's is given).
    pub best_budget_bytes: u64,
    /// The data's directory.
    pub dir: PathBuf,
    /// The applications.
    pub apps: Vec<AppReport>,
    /// Wall time of the whole bench, seconds.
    pub wall_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(wall_s: f64, end: End, pages_read: Option<u64>) -> Run {
        Run {
            wall_s,
            end,
            bytes_read: 4096,
            major_faults: 1,
            peak_bytes: 1 << 20,
            interposed: pages_read.map(|p| Interposed {
                regions: 1,
                pages_read: p,
                ..Interposed::default()
            }),
            output_matches: true,
        }
    }

    #[test]
    fn test_medians_skip_failed_runs_and_ratios_divide_the_kernels_time() {
        let ok = End::Exited { code: 0 };
        let mut kernel = Row::new(Variant::Kernel, "-", "-".into());
        kernel.runs = vec![run(4.0, ok, None), run(6.0, ok, None), run(5.0, ok, None)];
        let mut best = Row::new(Variant::Best, "mru", "48M".into());
        best.runs = vec![
            run(2.0, ok, Some(10)),
            run(1.0, End::OomKilled, None),
            run(2.5, ok, Some(30)),
        ];
        let mut defaults = Row::new(Variant::Defaults, "seq", "auto".into());
        defaults.runs = vec![run(1.0, End::TimedOut, None)];
        let mut a = AppReport {
            app: App::Numpy,
            what: String::new(),
            data: PathBuf::new(),
            data_bytes: 0,
            best_why: String::new(),
            output: None,
            rows: vec![kernel, defaults, best],
            kernel_over_defaults: None,
            kernel_over_best: None,
        };
        a.settle();
        assert_eq!(a.rows[0].median.unwrap().wall_s, 5.0);
        let best = &a.rows[2];
        assert_eq!(best.median.unwrap().wall_s, 2.5);
        assert_eq!(best.median.unwrap().pages_read, Some(30));
        assert_eq!(a.kernel_over_best, Some(2.0));
        assert_eq!(a.kernel_over_defaults, None);
        assert_eq!(best.note(), "oom-killed 1/3");
        assert_eq!(a.rows[1].note(), "timed out 1/1");
    }
}
