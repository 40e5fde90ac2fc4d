use std::path::PathBuf;

use super::*;
use crate::Counters;

/// A fresh scratch directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(test: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("pagepilot-plot-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn three_policies() -> Vec<Series> {
    let curve = |label: &str, k: f64| Series {
        label: label.into(),
        points: (1..=8).map(|i| (i * 100, k * 1e5 / i as f64)).collect(),
    };
    vec![curve("lru", 4.0), curve("seq", 2.0), curve("opt", 1.0)]
}

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.len() > 1000,
        "{} is {} bytes",
        path.display(),
        bytes.len()
    );
    assert_eq!(&bytes[..8], PNG_MAGIC, "{}", path.display());
}

fn svg_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.trim_start().starts_with("<svg"),
        "{}",
        &text[..80.min(text.len())]
    );
    assert!(text.trim_end().ends_with("</svg>"));
    text
}

#[test]
fn test_fault_rate_curves_write_png_and_svg_with_legend() {
    let dir = scratch("curves");
    let png = dir.join("rate.png");
    fault_rate_curves(&three_policies(), "sweep", &png).unwrap();
    assert_png(&png);
    let svg = dir.join("rate.SVG");
    fault_rate_curves(&three_policies(), "sweep", &svg).unwrap();
    let text = svg_text(&svg);
    for label in ["lru", "seq", "opt", "memory size (frames)", "sweep"] {
        assert!(text.contains(label), "SVG lacks {label}");
    }
}

#[test]
fn test_interfault_curves_skip_points_without_faults() {
    let dir = scratch("interfault");
    let done = Counters {
        references: 1000,
        faults: 10,
        cold_faults: 10,
        ..Counters::default()
    };
    let busy = Counters {
        references: 1000,
        faults: 60,
        cold_faults: 10,
        ..Counters::default()
    };
    let s = Series::from_counters("lru", Metric::InterFault, [(10, &busy), (20, &done)]);
    assert_eq!(s.points, vec![(10, 20.0)]);
    let out = dir.join("gap.svg");
    interfault_curves(&[s], "t", &out).unwrap();
    svg_text(&out);
    let only_infinite = Series::from_counters("opt", Metric::InterFault, [(20, &done)]);
    assert!(matches!(
        interfault_curves(&[only_infinite], "t", &out),
        Err(PlotError::Empty { .. })
    ));
}

#[test]
fn test_metrics_leave_cold_faults_out() {
    let c = Counters {
        references: 2_000_000,
        faults: 30,
        cold_faults: 10,
        ..Counters::default()
    };
    assert_eq!(Metric::FaultRate.value(&c), Some(10.0));
    assert_eq!(Metric::InterFault.value(&c), Some(100_000.0));
    assert_eq!(Metric::FaultRate.value(&Counters::default()), None);
}

#[test]
fn test_curve_panels_draw_several_charts_in_one_file() {
    let dir = scratch("panels");
    let panels: Vec<Panel> = ["sweep", "up-down", "scattered"]
        .iter()
        .map(|t| Panel {
            title: t.to_string(),
            series: three_policies(),
        })
        .collect();
    let out = dir.join("panels.svg");
    curve_panels(&panels, Metric::FaultRate, "demo", &out).unwrap();
    let text = svg_text(&out);
    assert!(text.contains("up-down") && text.contains("scattered") && text.contains("demo"));
    let png = dir.join("panels.png");
    curve_panels(&panels, Metric::FaultRate, "demo", &png).unwrap();
    assert_png(&png);
}

#[test]
fn test_unknown_extension_and_missing_directory_are_typed_errors() {
    let dir = scratch("errors");
    let err = fault_rate_curves(&three_policies(), "t", &dir.join("x.jpg")).unwrap_err();
    assert!(matches!(err, PlotError::UnknownFormat { .. }), "{err}");
    assert!(err.to_string().contains("x.jpg"));
    let err = fault_rate_curves(&three_policies(), "t", &dir.join("none")).unwrap_err();
    assert!(matches!(err, PlotError::UnknownFormat { .. }));
    let missing = dir.join("no-such-dir").join("x.png");
    let err = fault_rate_curves(&three_policies(), "t", &missing).unwrap_err();
    assert!(matches!(err, PlotError::Io { .. }), "{err}");
    let err = spacetime(
        [],
        Extent {
            duration: 10,
            pages: 5,
        },
        "t",
        &missing,
    )
    .unwrap_err();
    assert!(matches!(err, PlotError::Io { .. }), "{err}");
}

#[test]
fn test_page_axis_numbers_pages_densely_in_address_order() {
    // Slots in order of first reference; addresses sparse and unordered.
    let axis = PageAxis::new(&[0x9000, 0x10, 0x500, 0x11]);
    assert_eq!(axis.len(), 4);
    let ranks: Vec<u32> = (0..4).map(|s| axis.rank(s)).collect();
    assert_eq!(ranks, vec![3, 0, 2, 1]);
}

#[test]
fn test_spacetime_grid_bins_points_by_time_and_page() {
    let mut g = SpaceTimeGrid::new(
        4,
        2,
        Extent {
            duration: 8,
            pages: 10,
        },
    );
    assert_eq!((g.columns(), g.rows()), (4, 2));
    for (t, p) in [(0, 0), (1, 4), (1, 5), (7, 9), (6, 9), (8, 0), (0, 10)] {
        g.add(t, p);
    }
    assert_eq!(g.count(0, 0), 2); // times 0-1, pages 0-4
    assert_eq!(g.count(0, 1), 1); // page 5
    assert_eq!(g.count(3, 1), 2); // times 6-7, page 9
    assert_eq!(g.count(1, 0), 0);
    assert_eq!(g.total(), 5);
    assert_eq!(g.outside(), 2);
}

#[test]
fn test_spacetime_grid_never_has_more_cells_than_steps_or_pages() {
    let g = SpaceTimeGrid::new(
        1000,
        500,
        Extent {
            duration: 30,
            pages: 7,
        },
    );
    assert_eq!((g.columns(), g.rows()), (30, 7));
}

#[test]
fn test_spacetime_of_a_large_sweep_writes_bounded_files() {
    let dir = scratch("spacetime");
    let pages = 5000u32;
    let duration = 2_000_000u64;
    let points = (0..duration).map(|t| (t, (t % u64::from(pages)) as u32));
    let png = dir.join("sweep.png");
    spacetime(points.clone(), Extent { duration, pages }, "sweep", &png).unwrap();
    assert_png(&png);
    let svg = dir.join("sweep.svg");
    spacetime(points, Extent { duration, pages }, "sweep", &svg).unwrap();
    let text = svg_text(&svg);
    // Binned: at most one rectangle per cell of the SVG grid, whatever the
    // number of points.
    assert!(text.matches("<rect").count() <= 320 * 200 + 10);
    assert!(text.contains("time (references)"));
}
