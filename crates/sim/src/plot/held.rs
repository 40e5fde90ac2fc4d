//! Frames held over time, one step line per process: how a pooled run's
//! frame manager shared its pool ([`crate::pooled`]).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{compact, render, DrawResult, Figure, PlotError, COLOURS, FAMILY};
use crate::pooled::PooledRun;

const SIZE: (u32, u32) = (960, 540);

struct Held<'a> {
    run: &'a PooledRun,
    title: &'a str,
}

/// Writes the frames each process of `run` held against time (reference
/// times), with the pool's size as a dashed line, to `out` (`.png` or
/// `.svg`).
pub fn frames_held(run: &PooledRun, title: &str, out: &Path) -> Result<(), PlotError> {
    if run.samples.is_empty() || run.processes.is_empty() {
        return Err(PlotError::Empty {
            path: out.into(),
            what: "no samples of the frames held".into(),
        });
    }
    render(&Held { run, title }, out)
}

impl Figure for Held<'_> {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let run = self.run;
        let t_max = run.samples.last().map_or(1, |s| s.time).max(1) as f64;
        let y_max = run.pool_frames.max(1) as f64 * 1.08;
        let mut chart = ChartBuilder::on(area)
            .caption(self.title, (FAMILY, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..t_max * 1.02, 0.0..y_max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time (references)")
            .y_desc("frames held")
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 15))
            .x_label_formatter(&|v| compact(*v))
            .y_label_formatter(&|v| compact(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(e)?;
        let pool = run.pool_frames as f64;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, pool), (t_max, pool)],
                6,
                4,
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(e)?
            .label(format!("pool ({} frames)", run.pool_frames))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], BLACK.mix(0.5)));
        for (p, process) in run.processes.iter().enumerate() {
            let colour = COLOURS[p % COLOURS.len()];
            let mut steps = Vec::with_capacity(run.samples.len() * 2);
            for (i, s) in run.samples.iter().enumerate() {
                let held = s.held.get(p).copied().unwrap_or(0) as f64;
                if i > 0 {
                    steps.push((
                        s.time as f64,
                        steps.last().map_or(held, |l: &(f64, f64)| l.1),
                    ));
                }
                steps.push((s.time as f64, held));
            }
            chart
                .draw_series(LineSeries::new(steps, colour.stroke_width(2)))
                .map_err(e)?
                .label(format!("{} ({})", process.name, process.policy))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3))
                });
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
}
