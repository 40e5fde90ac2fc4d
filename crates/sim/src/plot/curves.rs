//! Curves against memory size: fault rate (Figures 1-2) and mean inter-fault
//! time (Figures 3-4) of the SEQ paper, one line per policy.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{compact, render, DrawResult, Figure, PlotError, COLOURS, FAMILY};
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
    let drawable = |p: &Panel| p.series.iter().any(|s| !finite(s).is_empty());
    if panels.is_empty() || !panels.iter().any(drawable) {
        return Err(PlotError::Empty {
            path: out.into(),
            what: "no series has a finite point".into(),
        });
    }
    render(
        &Curves {
            panels,
            metric,
            title,
            x_desc,
        },
        out,
    )
}

const PANEL: (u32, u32) = (720, 500);
const PER_ROW: usize = 3;
const TITLE_HEIGHT: u32 = 40;

struct Curves<'a> {
    panels: &'a [Panel],
    metric: Metric,
    title: &'a str,
    x_desc: &'a str,
}

fn finite(s: &Series) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter(|(_, v)| v.is_finite())
        .map(|&(f, v)| (f as f64, v))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

impl Figure for Curves<'_> {
    fn size(&self) -> (u32, u32) {
        let n = self.panels.len().max(1);
        let cols = n.min(PER_ROW) as u32;
        let rows = n.div_ceil(PER_ROW) as u32;
        let title = if self.title.is_empty() {
            0
        } else {
            TITLE_HEIGHT
        };
        (PANEL.0 * cols, PANEL.1 * rows + title)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let area = if self.title.is_empty() {
            area.clone()
        } else {
            area.titled(self.title, (FAMILY, 24))
                .map_err(|e| e.to_string())?
        };
        let n = self.panels.len();
        let cells = area.split_evenly((n.div_ceil(PER_ROW), n.min(PER_ROW)));
        for (panel, cell) in self.panels.iter().zip(cells.iter()) {
            draw_panel(panel, self.metric, self.x_desc, cell)?;
        }
        Ok(())
    }
}

fn draw_panel<DB: DrawingBackend>(
    panel: &Panel,
    metric: Metric,
    x_desc: &str,
    area: &DrawingArea<DB, Shift>,
) -> DrawResult {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let curves: Vec<Vec<(f64, f64)>> = panel.series.iter().map(finite).collect();
    let all = || curves.iter().flatten();
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(1.0) * 1.03;
    let y_max = all().map(|p| p.1).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(metric.axis_label())
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .x_label_formatter(&|v| compact(*v))
        .y_label_formatter(&|v| compact(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    for (i, (series, pts)) in panel.series.iter().zip(&curves).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(e)?
            .label(series.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)
}
