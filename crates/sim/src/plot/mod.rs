//! Plots of simulations and traces, as PNG or SVG (chosen by the file name's
//! extension), in the style of the SEQ paper's figures.
//!
//! - [`fault_rate_curves`]: fault rate (faults per million references) against
//!   memory size (frames), one curve per policy (the paper's Figures 1-2).
//! - [`interfault_curves`]: mean inter-fault time (references between faults)
//!   against memory size (Figures 3-4).
//! - [`parameter_curves`]: fault rate against a policy parameter, one curve
//!   per memory size (Figures 9-10's sensitivity, by parameter).
//! - [`curve_panels`]: several such charts side by side in one file.
//! - [`spacetime`]: a space-time graph, time (reference index) across, page
//!   (renumbered densely in address order, see [`PageAxis`]) up, binned into a
//!   grid of cells so that traces of millions of references stay small
//!   (Figures 5-8).
//! - [`frames_held`]: the frames each process of a pooled run held over
//!   time.
//! - [`timelines`]: values over time, one line per series, charts side by
//!   side (RAPHA's faults per interval and resident set over time).
//!
//! Text is drawn with DejaVu Sans, embedded in the binary: no system font is
//! looked up at run time.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use thiserror::Error;

mod curves;
mod held;
mod lines;
mod spacetime;
mod timeline;

pub use curves::{
    curve_panels, fault_rate_curves, interfault_curves, parameter_curves, Metric, Panel, Series,
};
pub use held::frames_held;
pub use spacetime::{spacetime, spacetime_grid, Extent, PageAxis, SpaceTimeGrid};
pub use timeline::{timelines, TimeSeries, Timeline};

/// DejaVu Sans (Bitstream Vera license, see `assets/DejaVuSans-LICENSE.txt`).
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// The font family every plot uses, registered from [`FONT`].
const FAMILY: &str = "sans-serif";

/// Line colours by series position, shared by every chart: OPT, LRU, SEQ
/// (and processes, and timelines) read well in this order.
const COLOURS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(0, 0, 0),
];

/// Errors writing a plot.
#[derive(Debug, Error)]
pub enum PlotError {
    /// The output name ends in neither `.png` nor `.svg`.
    #[error("{path}: unknown plot format; name the file .png or .svg", path = .path.display())]
    UnknownFormat {
        /// The output path given.
        path: PathBuf,
    },
    /// Creating or writing the output file failed.
    #[error("{path}: cannot write the plot", path = .path.display())]
    Io {
        /// The output path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Encoding the PNG failed.
    #[error("{path}: cannot encode the PNG", path = .path.display())]
    Encode {
        /// The output path.
        path: PathBuf,
        /// The underlying error.
        source: png::EncodingError,
    },
    /// The plotting library refused to draw.
    #[error("{path}: drawing failed: {message}", path = .path.display())]
    Draw {
        /// The output path.
        path: PathBuf,
        /// What the plotting library reported.
        message: String,
    },
    /// There was nothing to draw.
    #[error("{path}: nothing to plot: {what}", path = .path.display())]
    Empty {
        /// The output path.
        path: PathBuf,
        /// What was empty.
        what: String,
    },
    /// The embedded font could not be parsed.
    #[error("the embedded plot font could not be loaded")]
    Font,
}

/// An output format, chosen by the file name's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A PNG bitmap.
    Png,
    /// An SVG drawing.
    Svg,
}

impl Format {
    /// The format named by `path`'s extension (case-insensitive).
    pub fn of(path: &Path) -> Result<Format, PlotError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("png") => Ok(Format::Png),
            Some("svg") => Ok(Format::Svg),
            _ => Err(PlotError::UnknownFormat { path: path.into() }),
        }
    }
}

/// A drawing failure inside a figure, reported as [`PlotError::Draw`].
pub(crate) type DrawResult = Result<(), String>;

/// Something that draws itself on any plotters backend.
pub(crate) trait Figure {
    /// Size in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws on `area`, already filled white.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult;
}

fn register_font() -> Result<(), PlotError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    ok.then_some(()).ok_or(PlotError::Font)
}

/// Renders `figure` into `out`, PNG or SVG by its extension.
pub(crate) fn render(figure: &impl Figure, out: &Path) -> Result<(), PlotError> {
    let format = Format::of(out)?;
    register_font()?;
    let (w, h) = figure.size();
    let draw_err = |message: String| PlotError::Draw {
        path: out.into(),
        message,
    };
    let io_err = |source| PlotError::Io {
        path: out.into(),
        source,
    };
    match format {
        Format::Svg => {
            let mut text = String::new();
            {
                let area = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
                area.fill(&WHITE).map_err(|e| draw_err(e.to_string()))?;
                figure.draw(&area).map_err(draw_err)?;
                area.present().map_err(|e| draw_err(e.to_string()))?;
            }
            std::fs::write(out, text).map_err(io_err)
        }
        Format::Png => {
            let mut pixels = vec![0u8; w as usize * h as usize * 3];
            {
                let area = BitMapBackend::with_buffer(&mut pixels, (w, h)).into_drawing_area();
                area.fill(&WHITE).map_err(|e| draw_err(e.to_string()))?;
                figure.draw(&area).map_err(draw_err)?;
                area.present().map_err(|e| draw_err(e.to_string()))?;
            }
            let file = File::create(out).map_err(io_err)?;
            let mut writer = BufWriter::new(file);
            let mut encoder = png::Encoder::new(&mut writer, w, h);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let encode_err = |source| PlotError::Encode {
                path: out.into(),
                source,
            };
            encoder
                .write_header()
                .and_then(|mut w| w.write_image_data(&pixels))
                .map_err(encode_err)?;
            writer.flush().map_err(io_err)
        }
    }
}

/// Formats an axis value compactly: `950`, `12k`, `1.5M`.
pub(crate) fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        trim(format!("{:.1}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.2}"))
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests;
