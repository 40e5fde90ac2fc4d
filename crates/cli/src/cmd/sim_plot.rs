//! `pagepilot sim --plot`: fault rate against memory size, one curve per
//! policy, drawn by [`pagepilot_sim::plot::fault_rate_curves`]; with
//! `--sweep`, fault rate against the swept parameter, one curve per memory
//! size, drawn by [`pagepilot_sim::plot::parameter_curves`].

use std::path::Path;

use pagepilot_sim::param_sweep::Point;
use pagepilot_sim::plot::{self, Series};
use pagepilot_sim::report::Row;

/// Plots the fault-rate curves of `rows` (whole runs; one curve per policy,
/// in order of first appearance) to `path`, PNG or SVG by its extension.
/// Like the paper's figures, first-touch faults are left out.
pub fn fault_rate_curves(rows: &[Row], title: &str, path: &Path) -> Result<(), plot::PlotError> {
    let mut series: Vec<Series> = Vec::new();
    for row in rows {
        let at = match series.iter().position(|s| s.label == row.policy) {
            Some(i) => i,
            None => {
                series.push(Series {
                    label: row.policy.clone(),
                    points: Vec::new(),
                });
                series.len() - 1
            }
        };
        series[at].points.push((row.frames as u64, warm_rate(row)));
    }
    plot::fault_rate_curves(&series, title, path)
}

/// Faults per million references, first touches left out.
fn warm_rate(row: &Row) -> f64 {
    let warm = row.faults.saturating_sub(row.cold_faults) as f64;
    warm * 1e6 / row.references.max(1) as f64
}

/// Plots the fault rate of a parameter sweep's rows against the parameter
/// `axis`: one curve per memory size and per value of the other swept
/// parameters; a policy outside the sweep (`--policy lru`) is a flat line
/// at each size, across the parameter's range.
pub fn parameter_curves(
    rows: &[Row],
    points: &[Point],
    axis: &str,
    title: &str,
    path: &Path,
) -> Result<(), plot::PlotError> {
    let value_of = |row: &Row| row.params.iter().find(|(k, _)| k == axis).map(|p| p.1);
    let xs: Vec<u64> = points
        .iter()
        .filter_map(|p| p.values.iter().find(|(k, _)| k == axis).map(|v| v.1))
        .collect();
    let (lo, hi) = (
        xs.iter().copied().min().unwrap_or(0),
        xs.iter().copied().max().unwrap_or(0),
    );
    let mut series: Vec<Series> = Vec::new();
    for row in rows {
        let others: Vec<String> = row
            .params
            .iter()
            .filter(|(k, _)| k != axis)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let label = match value_of(row) {
            Some(_) if others.is_empty() => format!("{} frames", row.frames),
            Some(_) => format!("{} frames, {}", row.frames, others.join(",")),
            None => format!("{} at {} frames", row.policy, row.frames),
        };
        let at = match series.iter().position(|s| s.label == label) {
            Some(i) => i,
            None => {
                series.push(Series {
                    label,
                    points: Vec::new(),
                });
                series.len() - 1
            }
        };
        let rate = warm_rate(row);
        match value_of(row) {
            Some(x) => series[at].points.push((x, rate)),
            None => series[at].points.extend([(lo, rate), (hi, rate)]),
        }
    }
    plot::parameter_curves(&series, axis, title, path)
}
