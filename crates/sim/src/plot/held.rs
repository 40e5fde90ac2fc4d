//! Frames held over time, one step line per process beside the pool's
//! size: how a pooled run's frame manager shared its pool
//! ([`crate::pooled`]). Drawn as a [`Timeline`].

use std::path::Path;

use super::{timelines, PlotError, TimeSeries, Timeline};
use crate::pooled::PooledRun;

/// Writes the frames each process of `run` held against time (reference
/// times), with the pool's size as a line of its own, to `out` (`.png` or
/// `.svg`).
pub fn frames_held(run: &PooledRun, title: &str, out: &Path) -> Result<(), PlotError> {
    if run.samples.is_empty() || run.processes.is_empty() {
        return Err(PlotError::Empty {
            path: out.into(),
            what: "no samples of the frames held".into(),
        });
    }
    let t_max = run.samples.last().map_or(1, |s| s.time).max(1) as f64;
    let pool = run.pool_frames as f64;
    let mut series: Vec<TimeSeries> = run
        .processes
        .iter()
        .enumerate()
        .map(|(p, process)| TimeSeries {
            label: format!("{} ({})", process.name, process.policy),
            points: steps(run, p),
        })
        .collect();
    series.push(TimeSeries {
        label: format!("pool ({} frames)", run.pool_frames),
        points: vec![(0.0, pool), (t_max, pool)],
    });
    let chart = Timeline {
        title: title.into(),
        x_desc: "time (references)".into(),
        y_desc: "frames held".into(),
        series,
    };
    timelines(&[chart], "", out)
}

/// Process `p`'s frames held as a step line: each sample's value holds
/// until the next.
fn steps(run: &PooledRun, p: usize) -> Vec<(f64, f64)> {
    let mut steps: Vec<(f64, f64)> = Vec::with_capacity(run.samples.len() * 2);
    for s in &run.samples {
        let held = s.held.get(p).copied().unwrap_or(0) as f64;
        if let Some(&(_, before)) = steps.last() {
            steps.push((s.time as f64, before));
        }
        steps.push((s.time as f64, held));
    }
    steps
}
