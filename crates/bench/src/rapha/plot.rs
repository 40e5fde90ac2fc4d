//! The launcher's faults per interval and resident set over time, one line
//! per configuration (RAPHA's Figures 8-10).

use std::path::Path;

use pagepilot_sim::plot::{timelines, PlotError, TimeSeries, Timeline};

/// Writes the two charts to `out` (`.png` or `.svg`).
pub fn write(
    lines: &[(&'static str, Vec<(f64, u64, u64)>)],
    sample_ms: u64,
    out: &Path,
) -> Result<(), PlotError> {
    let series = |value: fn(&(f64, u64, u64)) -> f64| -> Vec<TimeSeries> {
        lines
            .iter()
            .map(|(name, pts)| TimeSeries {
                label: name.to_string(),
                points: pts.iter().map(|p| (p.0, value(p))).collect(),
            })
            .collect()
    };
    let x_desc = "seconds since the launcher started".to_string();
    let charts = [
        Timeline {
            title: format!("launcher's faults per {sample_ms} ms (Figures 8-9)"),
            x_desc: x_desc.clone(),
            y_desc: "faults".into(),
            series: series(|p| p.1 as f64),
        },
        Timeline {
            title: "launcher's resident set (Figure 10)".into(),
            x_desc,
            y_desc: "resident MB".into(),
            series: series(|p| p.2 as f64 * 4096.0 / (1 << 20) as f64),
        },
    ];
    timelines(&charts, "", out)
}
