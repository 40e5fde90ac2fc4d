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
    /// `kernel`, `pagepilot`, `rapha` or `rapha+daemon`.
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
    /// `kernel`, `pagepilot`, `rapha` or `rapha+daemon`.
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
    /// Of them, how many a fault limit postponed (its own, declared under
    /// the daemon), median.
    pub decoder_postponed: u64,
    /// Messages the decoder's process sent the daemon (under one), median.
    pub decoder_messages: Option<u64>,
    /// The same per fault, median of the rounds'.
    pub decoder_messages_per_fault: Option<f64>,
    /// Messages the launcher's process sent the daemon, median.
    pub launcher_messages: Option<u64>,
    /// The same per fault, median of the rounds'.
    pub launcher_messages_per_fault: Option<f64>,
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
        decoder_postponed: median(runs.iter().map(|r| r.decoder.postponed).collect()),
        decoder_messages: messages(runs.iter().map(|r| (r.decoder.messages_sent, 0))),
        decoder_messages_per_fault: per_fault(
            runs.iter()
                .map(|r| (r.decoder.messages_sent, r.decoder.faults)),
        ),
        launcher_messages: messages(runs.iter().map(|r| (r.launcher.messages_sent, 0))),
        launcher_messages_per_fault: per_fault(
            runs.iter()
                .map(|r| (r.launcher.messages_sent, r.launcher.faults)),
        ),
        rounds: with,
    })
}

/// The median of the messages a child sent, `None` when no round had a daemon.
fn messages(runs: impl Iterator<Item = (Option<u64>, u64)>) -> Option<u64> {
    let m: Vec<u64> = runs.filter_map(|(m, _)| m).collect();
    (!m.is_empty()).then(|| median(m))
}

/// The median of messages per fault over the rounds with a daemon (a
/// round with no fault counts as one fault).
fn per_fault(runs: impl Iterator<Item = (Option<u64>, u64)>) -> Option<f64> {
    let m: Vec<f64> = runs
        .filter_map(|(m, faults)| Some(m? as f64 / faults.max(1) as f64))
        .collect();
    (!m.is_empty()).then(|| median(m))
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

    #[test]
    fn test_messages_per_fault_are_taken_over_the_rounds_with_a_daemon() {
        // Without a daemon: nothing to say.
        assert_eq!(messages([(None, 0), (None, 0)].into_iter()), None);
        assert_eq!(per_fault([(None, 10)].into_iter()), None);
        // 4/1000, 6/2000, 30/1000: the median 0.004.
        let runs = [(Some(4), 1000), (Some(6), 2000), (Some(30), 1000)];
        assert_eq!(messages(runs.into_iter()), Some(6));
        assert_eq!(per_fault(runs.into_iter()), Some(0.004));
        // No fault at all counts as one.
        assert_eq!(per_fault([(Some(2), 0)].into_iter()), Some(2.0));
    }
}
