//! The launcher's faults per interval and resident set over time, one line
//! per configuration (RAPHA's Figures 8-10).

use std::path::Path;

use pagepilot_sim::plot::{timelines, PlotError, TimeSeries, Timeline};

use super::summary::{LauncherTimeline, Point};

/// Writes the two charts to `out` (`.png` or `.svg`).
pub fn write(lines: &[LauncherTimeline], sample_ms: u64, out: &Path) -> Result<(), PlotError> {
    let series = |value: fn(&Point) -> f64| -> Vec<TimeSeries> {
        lines
            .iter()
            .map(|l| TimeSeries {
                label: l.config.to_string(),
                points: l.points.iter().map(|p| (p.t_s, value(p))).collect(),
            })
            .collect()
    };
    let x_desc = "seconds since the launcher started".to_string();
    let charts = [
        Timeline {
            title: format!("launcher's faults per {sample_ms} ms (Figures 8-9)"),
            x_desc: x_desc.clone(),
            y_desc: "faults".into(),
            series: series(|p| p.faults as f64),
        },
        Timeline {
            title: "launcher's resident set (Figure 10)".into(),
            x_desc,
            y_desc: "resident MB".into(),
            series: series(|p| p.resident_pages as f64 * 4096.0 / (1 << 20) as f64),
        },
    ];
    timelines(&charts, "", out)
}
