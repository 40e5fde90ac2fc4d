//! Space-time graphs (the SEQ paper's Figures 5-8): time across, page up.
//!
//! Points are binned into a grid of cells, one cell per pixel or so, and a
//! cell is drawn darker the more points fell in it: a trace of hundreds of
//! millions of references costs a fixed-size grid, not a point each.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{compact, render, DrawResult, Figure, Format, PlotError, FAMILY};

/// Pages renumbered densely in address order: the lowest virtual page a
/// trace uses is 0, the next used one 1, and so on; the holes of a sparse
/// address space are left out, as the SEQ paper's graphs do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageAxis {
    rank: Vec<u32>,
}

impl PageAxis {
    /// The axis of `pages` (a trace's `pages`: virtual page number by slot).
    pub fn new(pages: &[u64]) -> Self {
        let mut order: Vec<u32> = (0..pages.len() as u32).collect();
        order.sort_unstable_by_key(|&s| pages[s as usize]);
        let mut rank = vec![0; pages.len()];
        for (r, &s) in order.iter().enumerate() {
            rank[s as usize] = r as u32;
        }
        PageAxis { rank }
    }

    /// The dense page number of `slot`.
    pub fn rank(&self, slot: u32) -> u32 {
        self.rank[slot as usize]
    }

    /// Number of pages on the axis.
    pub fn len(&self) -> u32 {
        self.rank.len() as u32
    }

    /// Whether the axis has no pages.
    pub fn is_empty(&self) -> bool {
        self.rank.is_empty()
    }
}

/// The extent of a space-time graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Times run from 0 to `duration` (exclusive): usually the trace length.
    pub duration: u64,
    /// Pages run from 0 to `pages` (exclusive): usually [`PageAxis::len`].
    pub pages: u32,
}

/// Points of a space-time graph counted in a grid of cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceTimeGrid {
    columns: usize,
    rows: usize,
    extent: Extent,
    counts: Vec<u32>,
    outside: u64,
}

impl SpaceTimeGrid {
    /// A grid of at most `columns` x `rows` cells over `extent`; fewer when
    /// the extent has fewer time steps or pages than that.
    pub fn new(columns: usize, rows: usize, extent: Extent) -> Self {
        let columns = columns.clamp(1, extent.duration.max(1) as usize);
        let rows = rows.clamp(1, extent.pages.max(1) as usize);
        SpaceTimeGrid {
            columns,
            rows,
            extent,
            counts: vec![0; columns * rows],
            outside: 0,
        }
    }

    /// Number of columns (time bins).
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Number of rows (page bins); row 0 holds the lowest pages.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The extent covered.
    pub fn extent(&self) -> Extent {
        self.extent
    }

    /// The column holding `time`, if inside the extent.
    pub fn column_of(&self, time: u64) -> Option<usize> {
        (time < self.extent.duration)
            .then(|| (time as u128 * self.columns as u128 / self.extent.duration as u128) as usize)
    }

    /// The row holding `page`, if inside the extent.
    pub fn row_of(&self, page: u32) -> Option<usize> {
        (page < self.extent.pages)
            .then(|| (page as u64 * self.rows as u64 / self.extent.pages as u64) as usize)
    }

    /// Counts one point; points outside the extent are counted apart.
    pub fn add(&mut self, time: u64, page: u32) {
        match (self.column_of(time), self.row_of(page)) {
            (Some(c), Some(r)) => {
                let cell = &mut self.counts[r * self.columns + c];
                *cell = cell.saturating_add(1);
            }
            _ => self.outside += 1,
        }
    }

    /// Points counted in cell (`column`, `row`); 0 outside the grid.
    pub fn count(&self, column: usize, row: usize) -> u32 {
        if column < self.columns && row < self.rows {
            self.counts[row * self.columns + column]
        } else {
            0
        }
    }

    /// Points counted inside the extent.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    /// Points that fell outside the extent.
    pub fn outside(&self) -> u64 {
        self.outside
    }

    /// Time range `[start, end)` of a column.
    fn time_span(&self, column: usize) -> (f64, f64) {
        let d = self.extent.duration.max(1) as f64;
        let n = self.columns as f64;
        (column as f64 * d / n, (column + 1) as f64 * d / n)
    }

    /// Page range `[low, high)` of a row.
    fn page_span(&self, row: usize) -> (f64, f64) {
        let p = self.extent.pages.max(1) as f64;
        let n = self.rows as f64;
        (row as f64 * p / n, (row + 1) as f64 * p / n)
    }
}

/// Grid resolution per format: about a cell per pixel of the PNG's plotting
/// area; coarser for SVG, where each cell is an element of the file.
fn resolution(format: Format) -> (usize, usize) {
    match format {
        Format::Png => (PLOT_AREA.0, PLOT_AREA.1),
        Format::Svg => (320, 200),
    }
}

const PLOT_AREA: (usize, usize) = (880, 520);
const MARGIN: u32 = 12;
const X_LABELS: u32 = 50;
const Y_LABELS: u32 = 80;
const CAPTION: u32 = 40;

/// Writes a space-time graph of `points` (`(time, dense page)`, see
/// [`PageAxis`]) over `extent` to `out` (`.png` or `.svg`), binning them
/// into a grid sized for the format.
pub fn spacetime(
    points: impl IntoIterator<Item = (u64, u32)>,
    extent: Extent,
    title: &str,
    out: &Path,
) -> Result<(), PlotError> {
    let (columns, rows) = resolution(Format::of(out)?);
    let mut grid = SpaceTimeGrid::new(columns, rows, extent);
    for (t, p) in points {
        grid.add(t, p);
    }
    spacetime_grid(&grid, title, out)
}

/// Writes a space-time graph of an already binned grid to `out`.
pub fn spacetime_grid(grid: &SpaceTimeGrid, title: &str, out: &Path) -> Result<(), PlotError> {
    if grid.extent.duration == 0 || grid.extent.pages == 0 {
        return Err(PlotError::Empty {
            path: out.into(),
            what: "the space-time extent has no time or no pages".into(),
        });
    }
    render(&SpaceTime { grid, title }, out)
}

struct SpaceTime<'a> {
    grid: &'a SpaceTimeGrid,
    title: &'a str,
}

impl Figure for SpaceTime<'_> {
    fn size(&self) -> (u32, u32) {
        (
            PLOT_AREA.0 as u32 + Y_LABELS + 2 * MARGIN,
            PLOT_AREA.1 as u32 + X_LABELS + CAPTION + 2 * MARGIN,
        )
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let grid = self.grid;
        let x_max = grid.extent.duration as f64;
        let y_max = grid.extent.pages as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(self.title, (FAMILY, 20))
            .margin(MARGIN)
            .x_label_area_size(X_LABELS)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("time (references)")
            .y_desc("page (dense, address order)")
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 15))
            .x_label_formatter(&|v| compact(*v))
            .y_label_formatter(&|v| compact(*v))
            .draw()
            .map_err(e)?;
        let max = grid.counts.iter().copied().max().unwrap_or(0);
        let scale = (1.0 + f64::from(max)).ln().max(f64::MIN_POSITIVE);
        let cells = (0..grid.rows).flat_map(|r| (0..grid.columns).map(move |c| (c, r)));
        let marks = cells.filter_map(|(c, r)| {
            let n = grid.count(c, r);
            (n > 0).then(|| {
                // Darker with more points, but a single point stays visible;
                // opaque, so cells that share an edge pixel do not darken it.
                let shade = 0.35 + 0.65 * (1.0 + f64::from(n)).ln() / scale;
                let grey = (255.0 * (1.0 - shade.min(1.0))) as u8;
                let (t0, t1) = grid.time_span(c);
                let (p0, p1) = grid.page_span(r);
                Rectangle::new([(t0, p0), (t1, p1)], RGBColor(grey, grey, grey).filled())
            })
        });
        chart.draw_series(marks).map_err(e)?;
        Ok(())
    }
}
