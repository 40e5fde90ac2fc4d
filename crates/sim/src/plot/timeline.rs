//! Values over time, one line per series, several charts side by side: a
//! process's faults per interval and its resident set over time (RAPHA's
//! Figures 8-10).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{compact, render, DrawResult, Figure, PlotError, COLOURS, FAMILY};

/// One line over time.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeSeries {
    /// Legend text.
    pub label: String,
    /// `(time, value)` points, drawn in time order; non-finite ones left out.
    pub points: Vec<(f64, f64)>,
}

/// One chart of several lines over time, for [`timelines`].
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// The chart's caption.
    pub title: String,
    /// The x axis's description (for example `seconds since the launch`).
    pub x_desc: String,
    /// The y axis's description.
    pub y_desc: String,
    /// Its lines.
    pub series: Vec<TimeSeries>,
}

/// Writes `charts` side by side (two per row) under an overall `title`
/// (none if empty), to `out` (`.png` or `.svg`). Series in the same
/// position get the same colour in every chart.
pub fn timelines(charts: &[Timeline], title: &str, out: &Path) -> Result<(), PlotError> {
    let drawable = |c: &Timeline| c.series.iter().any(|s| !finite(s).is_empty());
    if !charts.iter().any(drawable) {
        return Err(PlotError::Empty {
            path: out.into(),
            what: "no series has a finite point".into(),
        });
    }
    render(&Charts { charts, title }, out)
}

const PANEL: (u32, u32) = (760, 480);
const PER_ROW: usize = 2;
const TITLE_HEIGHT: u32 = 40;
struct Charts<'a> {
    charts: &'a [Timeline],
    title: &'a str,
}

fn finite(s: &TimeSeries) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .copied()
        .filter(|(t, v)| t.is_finite() && v.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

impl Figure for Charts<'_> {
    fn size(&self) -> (u32, u32) {
        let n = self.charts.len().max(1);
        let title = if self.title.is_empty() {
            0
        } else {
            TITLE_HEIGHT
        };
        let cols = n.min(PER_ROW) as u32;
        (PANEL.0 * cols, PANEL.1 * n.div_ceil(PER_ROW) as u32 + title)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let area = if self.title.is_empty() {
            area.clone()
        } else {
            area.titled(self.title, (FAMILY, 22))
                .map_err(|e| e.to_string())?
        };
        let n = self.charts.len();
        let cells = area.split_evenly((n.div_ceil(PER_ROW), n.min(PER_ROW)));
        for (chart, cell) in self.charts.iter().zip(cells.iter()) {
            draw_chart(chart, cell)?;
        }
        Ok(())
    }
}

fn draw_chart<DB: DrawingBackend>(t: &Timeline, area: &DrawingArea<DB, Shift>) -> DrawResult {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let lines: Vec<Vec<(f64, f64)>> = t.series.iter().map(finite).collect();
    let all = || lines.iter().flatten();
    let x_min = all().map(|p| p.0).fold(0.0, f64::min);
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(x_min + 1e-3) * 1.02;
    let y_max = all().map(|p| p.1).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&t.title, (FAMILY, 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(t.x_desc.as_str())
        .y_desc(t.y_desc.as_str())
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .x_label_formatter(&|v| compact(*v))
        .y_label_formatter(&|v| compact(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    for (i, (series, pts)) in t.series.iter().zip(&lines).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(e)?
            .label(series.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)
}
