//! `pagepilot sim --plot`: fault rate against memory size, one curve per
//! policy, drawn by [`pagepilot_sim::plot::fault_rate_curves`].

use std::path::Path;

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
        let warm = row.faults.saturating_sub(row.cold_faults) as f64;
        let rate = warm * 1e6 / row.references.max(1) as f64;
        series[at].points.push((row.frames as u64, rate));
    }
    plot::fault_rate_curves(&series, title, path)
}
