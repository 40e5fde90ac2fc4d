//! Charts of lines side by side under one title: what the curves against
//! memory size and the timelines draw alike.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{compact, render, DrawResult, Figure, PlotError, COLOURS, FAMILY};

const TITLE_HEIGHT: u32 = 40;

/// One chart: labelled lines of `(x, y)` points.
pub(super) struct Chart<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// Each line's legend text and its points ([`points`]).
    pub lines: Vec<(&'a str, Vec<(f64, f64)>)>,
    /// Whether each point gets a marker (sampled curves) or not (time).
    pub markers: bool,
}

/// Charts, `per_row` to a row, each `panel` pixels, under `title` (none if
/// empty). Lines in the same position get the same colour in every chart.
pub(super) struct Charts<'a> {
    pub title: &'a str,
    pub charts: Vec<Chart<'a>>,
    pub per_row: usize,
    pub panel: (u32, u32),
}

/// The finite points of a line, in x order.
pub(super) fn points(pts: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = pts
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// Writes `charts` to `out` (`.png` or `.svg`), refusing charts with no
/// point to draw.
pub(super) fn write(charts: &Charts, out: &std::path::Path) -> Result<(), PlotError> {
    let drawable = |c: &Chart| c.lines.iter().any(|(_, pts)| !pts.is_empty());
    if !charts.charts.iter().any(drawable) {
        return Err(PlotError::Empty {
            path: out.into(),
            what: "no series has a finite point".into(),
        });
    }
    render(charts, out)
}

impl Figure for Charts<'_> {
    fn size(&self) -> (u32, u32) {
        let n = self.charts.len().max(1);
        let cols = n.min(self.per_row) as u32;
        let rows = n.div_ceil(self.per_row) as u32;
        let title = if self.title.is_empty() {
            0
        } else {
            TITLE_HEIGHT
        };
        (self.panel.0 * cols, self.panel.1 * rows + title)
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let area = if self.title.is_empty() {
            area.clone()
        } else {
            area.titled(self.title, (FAMILY, 24))
                .map_err(|e| e.to_string())?
        };
        let n = self.charts.len();
        let cells = area.split_evenly((n.div_ceil(self.per_row), n.min(self.per_row)));
        for (chart, cell) in self.charts.iter().zip(cells.iter()) {
            draw_chart(chart, cell)?;
        }
        Ok(())
    }
}

fn draw_chart<DB: DrawingBackend>(c: &Chart, area: &DrawingArea<DB, Shift>) -> DrawResult {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let all = || c.lines.iter().flat_map(|(_, pts)| pts);
    let x_min = all().map(|p| p.0).fold(0.0, f64::min);
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(x_min + 1e-3) * 1.03;
    let y_max = all().map(|p| p.1).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(c.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(c.x_desc)
        .y_desc(c.y_desc)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .x_label_formatter(&|v| compact(*v))
        .y_label_formatter(&|v| compact(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(e)?;
    for (i, (label, pts)) in c.lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(e)?
            .label(*label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3))
            });
        if c.markers {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(e)?;
        }
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
