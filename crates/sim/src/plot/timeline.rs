//! Values over time, one line per series, several charts side by side: a
//! process's faults per interval and its resident set over time (RAPHA's
//! Figures 8-10).

use std::path::Path;

use super::lines::{self, Chart, Charts};
use super::PlotError;

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
    let charts = charts
        .iter()
        .map(|t| Chart {
            title: &t.title,
            x_desc: &t.x_desc,
            y_desc: &t.y_desc,
            lines: t
                .series
                .iter()
                .map(|s| (s.label.as_str(), lines::points(s.points.iter().copied())))
                .collect(),
            markers: false,
        })
        .collect();
    let charts = Charts {
        title,
        charts,
        per_row: 2,
        panel: (760, 480),
    };
    lines::write(&charts, out)
}
