//! From the children's reports to RAPHA's Figure 11 table: deadline misses
//! and delay of the decoder's periods, the launcher's completion and fault
//! rate, medians over the rounds.

use serde::Serialize;

use super::job::{Frame, LauncherOut};
use super::round::ConfigRun;
use crate::measure::median;

/// The decoder's deadlines over some of its periods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Deadlines {
    /// Periods released in the interval.
    pub frames: u64,
    /// Of them, finished after their deadline.
    pub misses: u64,
    /// misses / frames, %.
    pub miss_pct: f64,
    /// Mean lateness of the missed frames, ms (RAPHA's average delay).
    pub avg_delay_ms: f64,
    /// Mean lateness over all frames (on time counts 0), ms.
    pub mean_lateness_ms: f64,
    /// Mean time a frame spent reading its chunks (its faults), ms.
    pub read_ms: f64,
}

/// The deadlines of the frames released in `[from, to)` (deadline: release
/// plus `period_ns`).
pub fn deadlines(frames: &[Frame], from: u64, to: u64, period_ns: u64) -> Deadlines {
    let late: Vec<u64> = frames
        .iter()
        .filter(|f| f.release_ns >= from && f.release_ns < to)
        .map(|f| f.finish_ns.saturating_sub(f.release_ns + period_ns))
        .collect();
    let read: u64 = frames
        .iter()
        .filter(|f| f.release_ns >= from && f.release_ns < to)
        .map(|f| f.read_ns)
        .sum();
    let frames = late.len() as u64;
    let missed: Vec<u64> = late.iter().copied().filter(|&l| l > 0).collect();
    let misses = missed.len() as u64;
    let ms = |ns: u64, n: u64| {
        if n == 0 {
            0.0
        } else {
            ns as f64 / n as f64 / 1e6
        }
    };
    Deadlines {
        frames,
        misses,
        miss_pct: if frames == 0 {
            0.0
        } else {
            misses as f64 * 100.0 / frames as f64
        },
        avg_delay_ms: ms(missed.iter().sum(), misses),
        mean_lateness_ms: ms(late.iter().sum(), frames),
        read_ms: ms(read, frames),
    }
}

/// One sample interval of the launcher.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Its end, seconds since the launcher started.
    pub t_s: f64,
    /// Faults in the interval.
    pub faults: u64,
    /// Pages resident at its end.
    pub resident_pages: u64,
}

/// The launcher's samples in one configuration (Figures 8-10).
#[derive(Clone, Debug, Serialize)]
pub struct LauncherTimeline {
    /// `kernel`, `pagepilot` or `rapha`.
    pub config: &'static str,
    /// Its sample intervals, in order.
    pub points: Vec<Point>,
}

/// The launcher's faults in each sample interval.
pub fn fault_rate(l: &LauncherOut) -> Vec<Point> {
    l.samples
        .windows(2)
        .map(|w| Point {
            t_s: w[1].at_ns.saturating_sub(l.start_ns) as f64 / 1e9,
            faults: w[1].faults.saturating_sub(w[0].faults),
            resident_pages: w[1].resident_pages,
        })
        .collect()
}

/// One configuration over all rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `kernel`, `pagepilot` or `rapha`.
    pub config: &'static str,
    /// The decoder while the launcher ran (Figure 11), field-wise medians.
    pub with_launcher: Deadlines,
    /// The decoder alone, before the launch, medians.
    pub alone: Deadlines,
    /// The launcher's time from its start to its last page, ms, median.
    pub launcher_ms: f64,
    /// Its faults (fault events, or the kernel's major faults), median.
    pub launcher_faults: u64,
    /// Of its faults, how many its limit postponed, median.
    pub launcher_postponed: u64,
    /// Most faults in one sample interval, over all rounds.
    pub launcher_max_faults_per_sample: u64,
    /// Its fault limit, if any: faults per period (ms).
    pub launcher_fault_limit: Option<(u64, u64)>,
    /// What the limit allows in one sample interval: the limit times the
    /// periods a sample can overlap (`ceil(sample / period) + 1`).
    pub launcher_sample_bound: Option<u64>,
    /// The decoder's faults in its whole run, median.
    pub decoder_faults: u64,
    /// Each round's deadlines with the launcher, in order.
    pub rounds: Vec<Deadlines>,
}

/// Field-wise medians.
fn median_deadlines(ds: &[Deadlines]) -> Deadlines {
    Deadlines {
        frames: median(ds.iter().map(|d| d.frames).collect()),
        misses: median(ds.iter().map(|d| d.misses).collect()),
        miss_pct: median(ds.iter().map(|d| d.miss_pct).collect()),
        avg_delay_ms: median(ds.iter().map(|d| d.avg_delay_ms).collect()),
        mean_lateness_ms: median(ds.iter().map(|d| d.mean_lateness_ms).collect()),
        read_ms: median(ds.iter().map(|d| d.read_ms).collect()),
    }
}

/// The row of one configuration's runs (one per round).
pub fn row(
    runs: &[ConfigRun],
    period_ns: u64,
    limit: Option<(u64, u64)>,
    sample_ms: u64,
) -> Option<Row> {
    let first = runs.first()?;
    let with: Vec<Deadlines> = runs
        .iter()
        .map(|r| deadlines(&r.decoder.frames, r.launch_ns, r.launcher.end_ns, period_ns))
        .collect();
    let alone: Vec<Deadlines> = runs
        .iter()
        .map(|r| deadlines(&r.decoder.frames, 0, r.launch_ns, period_ns))
        .collect();
    let launcher_ms = runs
        .iter()
        .map(|r| r.launcher.end_ns.saturating_sub(r.launcher.start_ns) as f64 / 1e6)
        .collect();
    Some(Row {
        config: first.config.name(),
        with_launcher: median_deadlines(&with),
        alone: median_deadlines(&alone),
        launcher_ms: median(launcher_ms),
        launcher_faults: median(runs.iter().map(|r| r.launcher.faults).collect()),
        launcher_postponed: median(runs.iter().map(|r| r.launcher.postponed).collect()),
        launcher_max_faults_per_sample: runs
            .iter()
            .flat_map(|r| fault_rate(&r.launcher))
            .map(|p| p.faults)
            .max()
            .unwrap_or(0),
        launcher_fault_limit: limit,
        launcher_sample_bound: limit.map(|(n, p)| n * (sample_ms.div_ceil(p.max(1)) + 1)),
        decoder_faults: median(runs.iter().map(|r| r.decoder.faults).collect()),
        rounds: with,
    })
}

/// `a / b`, `None` when `b` is 0.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn test_a_frame_finished_after_its_period_is_a_miss_late_by_the_difference() {
        let f = |release: u64, finish: u64| Frame {
            release_ns: release * MS,
            finish_ns: finish * MS,
            read_ns: MS,
        };
        // Period 10 ms: on time, 4 ms late, exactly at the deadline, 8 ms late.
        let frames = [f(0, 6), f(10, 24), f(20, 30), f(30, 48), f(40, 45)];
        let d = deadlines(&frames, 0, 40 * MS, 10 * MS);
        assert_eq!((d.frames, d.misses), (4, 2));
        assert_eq!(d.miss_pct, 50.0);
        assert_eq!(d.avg_delay_ms, 6.0);
        assert_eq!(d.mean_lateness_ms, 3.0);
        assert_eq!(d.read_ms, 1.0);
        assert_eq!(
            deadlines(&frames, 50 * MS, 60 * MS, 10 * MS),
            Deadlines::default()
        );
    }
}
