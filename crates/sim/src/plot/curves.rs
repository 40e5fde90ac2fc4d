//! Curves against memory size: fault rate (Figures 1-2) and mean inter-fault
//! time (Figures 3-4) of the SEQ paper, one line per policy.

use std::path::Path;

use super::lines::{self, Chart, Charts};
use super::PlotError;
use crate::Counters;

/// One curve: a policy's values at several memory sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text, usually the policy name.
    pub label: String,
    /// `(frames, value)` points; drawn in frame order. Non-finite values
    /// (an inter-fault time with no faults) are left out.
    pub points: Vec<(u64, f64)>,
}

impl Series {
    /// A series of `metric` over `(frames, counters)` results.
    pub fn from_counters<'a>(
        label: impl Into<String>,
        metric: Metric,
        results: impl IntoIterator<Item = (u64, &'a Counters)>,
    ) -> Series {
        let points = results
            .into_iter()
            .filter_map(|(frames, c)| metric.value(c).map(|v| (frames, v)))
            .collect();
        Series {
            label: label.into(),
            points,
        }
    }
}

/// One chart of several curves, for [`curve_panels`].
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The chart's caption (for example the workload name).
    pub title: String,
    /// Its curves.
    pub series: Vec<Series>,
}

/// What a curve shows. First-touch (cold) faults are left out, as the SEQ
/// paper does: they are zero fills, not disk reads, and the same under every
/// policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Faults per million references.
    FaultRate,
    /// References per fault.
    InterFault,
}

impl Metric {
    /// The metric of one run; `None` for an inter-fault time without faults
    /// or a run without references.
    pub fn value(self, c: &Counters) -> Option<f64> {
        let faults = c.faults.saturating_sub(c.cold_faults) as f64;
        let refs = c.references as f64;
        match self {
            _ if c.references == 0 => None,
            Metric::FaultRate => Some(faults * 1e6 / refs),
            Metric::InterFault if faults == 0.0 => None,
            Metric::InterFault => Some(refs / faults),
        }
    }

    /// The y-axis description.
    pub fn axis_label(self) -> &'static str {
        match self {
            Metric::FaultRate => "faults per million references (cold excluded)",
            Metric::InterFault => "mean references between faults",
        }
    }
}

/// Writes fault rate (faults per million references) against memory size
/// (frames), one curve per series, to `out` (`.png` or `.svg`).
pub fn fault_rate_curves(series: &[Series], title: &str, out: &Path) -> Result<(), PlotError> {
    one_panel(series, title, Metric::FaultRate, out)
}

/// Writes mean inter-fault time (references between faults) against memory
/// size (frames), one curve per series, to `out` (`.png` or `.svg`).
pub fn interfault_curves(series: &[Series], title: &str, out: &Path) -> Result<(), PlotError> {
    one_panel(series, title, Metric::InterFault, out)
}

/// Writes fault rate (faults per million references, cold excluded) against
/// a policy parameter (`param`, for example SEQ's `L`), one curve per series
/// (usually one per memory size), to `out` (`.png` or `.svg`). The points'
/// first coordinate is the parameter's value.
pub fn parameter_curves(
    series: &[Series],
    param: &str,
    title: &str,
    out: &Path,
) -> Result<(), PlotError> {
    let panel = Panel {
        title: title.into(),
        series: series.to_vec(),
    };
    let x_desc = format!("parameter {param}");
    draw_curves(
        std::slice::from_ref(&panel),
        Metric::FaultRate,
        "",
        &x_desc,
        out,
    )
}

fn one_panel(series: &[Series], title: &str, metric: Metric, out: &Path) -> Result<(), PlotError> {
    let panel = Panel {
        title: title.into(),
        series: series.to_vec(),
    };
    curve_panels(std::slice::from_ref(&panel), metric, "", out)
}

/// Writes several charts of `metric` side by side (three per row) under an
/// overall `title` (none if empty), to `out` (`.png` or `.svg`). Series in
/// the same position get the same colour in every panel.
pub fn curve_panels(
    panels: &[Panel],
    metric: Metric,
    title: &str,
    out: &Path,
) -> Result<(), PlotError> {
    draw_curves(panels, metric, title, "memory size (frames)", out)
}

fn draw_curves(
    panels: &[Panel],
    metric: Metric,
    title: &str,
    x_desc: &str,
    out: &Path,
) -> Result<(), PlotError> {
    let charts = panels
        .iter()
        .map(|p| Chart {
            title: &p.title,
            x_desc,
            y_desc: metric.axis_label(),
            lines: p
                .series
                .iter()
                .map(|s| (s.label.as_str(), finite(s)))
                .collect(),
            markers: true,
        })
        .collect();
    let charts = Charts {
        title,
        charts,
        per_row: 3,
        panel: (720, 500),
    };
    lines::write(&charts, out)
}

fn finite(s: &Series) -> Vec<(f64, f64)> {
    lines::points(s.points.iter().map(|&(f, v)| (f as f64, v)))
}
