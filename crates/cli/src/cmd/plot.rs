//! `pagepilot plot ...`: space-time graphs and fault-rate curves of a trace.

use std::path::{Path, PathBuf};

use pagepilot_policy::registry::{self, RegistryError, Setup};
use pagepilot_sim::plot::{self, Extent, Metric, PageAxis, Series};
use pagepilot_sim::{Access, Counters, Machine, Trace};
use thiserror::Error;

use super::demo::say;
use super::CmdResult;

/// Subcommands of `pagepilot plot`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Space-time graph of a trace: its references, or the faults or the
    /// replacement victims under a policy (the SEQ paper's Figures 5-8).
    Spacetime(SpacetimeArgs),
    /// Fault rate (or mean inter-fault time) against memory size for several
    /// policies (the SEQ paper's Figures 1-4).
    Curves(CurvesArgs),
}

/// What a space-time graph shows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// Every reference of the trace.
    References,
    /// The missing faults under the policy.
    Faults,
    /// The pages the policy chose to evict.
    Victims,
}

/// Arguments of `pagepilot plot spacetime`.
#[derive(clap::Args)]
pub struct SpacetimeArgs {
    /// The trace file.
    trace: PathBuf,
    /// How to read the trace.
    #[command(flatten)]
    load: super::trace::LoadArgs,
    /// What to plot.
    #[arg(long, value_enum, default_value_t = What::References)]
    what: What,
    /// The policy, for faults and victims.
    #[arg(long, default_value = "seq")]
    policy: String,
    /// Memory size in frames, for faults and victims.
    #[arg(long, required_if_eq_any([("what", "faults"), ("what", "victims")]))]
    frames: Option<usize>,
    /// Plot first-touch faults too (left out by default, as in the paper).
    #[arg(long)]
    cold: bool,
    /// Title (default: the trace name and what is plotted).
    #[arg(long)]
    title: Option<String>,
    /// Output file, `.png` or `.svg`.
    #[arg(short, long)]
    output: PathBuf,
}

/// The metric of `pagepilot plot curves`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricArg {
    /// Faults per million references.
    FaultRate,
    /// Mean references between faults.
    InterFault,
}

/// Arguments of `pagepilot plot curves`.
#[derive(clap::Args)]
pub struct CurvesArgs {
    /// The trace file.
    trace: PathBuf,
    /// How to read the trace.
    #[command(flatten)]
    load: super::trace::LoadArgs,
    /// Policies, comma-separated specs (`seq:L=50`).
    #[arg(long, default_value = "lru,seq,opt", value_delimiter = ',')]
    policy: Vec<String>,
    /// Memory sizes: `auto` (20 sizes evenly up to the footprint), `auto:N`,
    /// or a comma-separated list of frame counts.
    #[arg(long, default_value = "auto")]
    frames: String,
    /// What to plot.
    #[arg(long, value_enum, default_value_t = MetricArg::FaultRate)]
    metric: MetricArg,
    /// Title (default: the trace name).
    #[arg(long)]
    title: Option<String>,
    /// Output file, `.png` or `.svg`.
    #[arg(short, long)]
    output: PathBuf,
}

/// Most memory sizes one curve may have.
pub const MAX_POINTS: usize = 1000;

/// Bad arguments of `pagepilot plot`.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlotArgError {
    /// `--frames` was not `auto`, `auto:N` or a list of frame counts.
    #[error("--frames `{given}`: {why}")]
    BadFrames {
        /// The value given.
        given: String,
        /// What was wrong.
        why: String,
    },
    /// No policy was named.
    #[error("--policy: name at least one policy")]
    NoPolicy,
}

/// Runs `pagepilot plot ...`.
pub fn run(command: Command) -> CmdResult {
    match command {
        Command::Spacetime(a) => spacetime(a),
        Command::Curves(a) => curves(a),
    }
}

fn trace_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

fn spacetime(a: SpacetimeArgs) -> CmdResult {
    // Refuse a bad output name before simulating.
    plot::Format::of(&a.output)?;
    let trace = a.load.load(&a.trace)?;
    let view = match a.what {
        What::References => View::References,
        // clap requires --frames for these; 0 is refused by `write_spacetime`.
        What::Faults => View::Faults {
            policy: &a.policy,
            frames: a.frames.unwrap_or(0),
            cold: a.cold,
        },
        What::Victims => View::Victims {
            policy: &a.policy,
            frames: a.frames.unwrap_or(0),
        },
    };
    let title = a
        .title
        .unwrap_or_else(|| format!("{}: {}", trace_name(&a.trace), view.describe()));
    let plotted = write_spacetime(&trace, &view, &title, &a.output)?;
    say(&format!(
        "wrote {} ({title}: {plotted} points, {} references, {} pages)\n",
        a.output.display(),
        trace.len(),
        trace.distinct()
    ))
}

/// What a space-time graph shows, with the run that produces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View<'a> {
    /// Every reference of the trace.
    References,
    /// Missing faults under `policy` with `frames` frames; first-touch
    /// faults only if `cold`.
    Faults {
        /// Policy spec.
        policy: &'a str,
        /// Memory size.
        frames: usize,
        /// Include first-touch faults.
        cold: bool,
    },
    /// Pages evicted by `policy` with `frames` frames.
    Victims {
        /// Policy spec.
        policy: &'a str,
        /// Memory size.
        frames: usize,
    },
}

impl View<'_> {
    /// A short description for titles: `faults under seq, 500 frames`.
    pub fn describe(&self) -> String {
        match self {
            View::References => "references".into(),
            View::Faults { policy, frames, .. } => {
                format!("faults under {policy}, {frames} frames")
            }
            View::Victims { policy, frames } => {
                format!("replacement victims under {policy}, {frames} frames")
            }
        }
    }
}

/// Writes the space-time graph of `view` over `trace` to `out`, pages
/// numbered densely in address order; returns the number of points plotted.
pub fn write_spacetime(
    trace: &Trace,
    view: &View,
    title: &str,
    out: &Path,
) -> Result<u64, RunError> {
    let axis = PageAxis::new(&trace.pages);
    let extent = Extent {
        duration: trace.len() as u64,
        pages: axis.len(),
    };
    let mut plotted = 0u64;
    let (policy, frames) = match *view {
        View::References => {
            let points = trace.refs.iter().enumerate().map(|(i, &s)| {
                plotted += 1;
                (i as u64, axis.rank(s))
            });
            plot::spacetime(points, extent, title, out)?;
            return Ok(plotted);
        }
        View::Faults { policy, frames, .. } | View::Victims { policy, frames } => (policy, frames),
    };
    if frames == 0 {
        return Err(PlotArgError::BadFrames {
            given: "0".into(),
            why: "faults and victims need --frames N with N >= 1".into(),
        }
        .into());
    }
    let mut machine = Machine::new(
        trace,
        registry::build(policy, &setup(trace, frames))?,
        frames,
        0,
    );
    let writes = trace.has_writes();
    let points = trace.refs.iter().enumerate().filter_map(|(i, &s)| {
        let access = machine.access(s, writes && trace.is_write(i), i as u64);
        let point = match (access, view) {
            (Access::Missing { cold: c, .. }, View::Faults { cold, .. }) if *cold || !c => Some(s),
            (
                Access::Missing {
                    victim: Some(v), ..
                },
                View::Victims { .. },
            ) => Some(v.slot),
            _ => None,
        };
        point.map(|slot| {
            plotted += 1;
            (i as u64, axis.rank(slot))
        })
    });
    plot::spacetime(points, extent, title, out)?;
    Ok(plotted)
}

fn curves(a: CurvesArgs) -> CmdResult {
    plot::Format::of(&a.output)?;
    let trace = a.load.load(&a.trace)?;
    let frames = parse_frames(&a.frames, trace.distinct())?;
    let policies: Vec<&str> = a.policy.iter().map(String::as_str).collect();
    let results = sweep(&trace, &policies, &frames)?;
    let metric = match a.metric {
        MetricArg::FaultRate => Metric::FaultRate,
        MetricArg::InterFault => Metric::InterFault,
    };
    let series = series(&results, metric);
    let title = a.title.unwrap_or_else(|| trace_name(&a.trace));
    match metric {
        Metric::FaultRate => plot::fault_rate_curves(&series, &title, &a.output)?,
        Metric::InterFault => plot::interfault_curves(&series, &title, &a.output)?,
    }
    say(&format!(
        "wrote {} ({} policies x {} memory sizes)\n",
        a.output.display(),
        results.len(),
        frames.len()
    ))
}

/// One policy's runs at several memory sizes.
pub struct Curve {
    /// The policy spec as given.
    pub policy: String,
    /// `(frames, counters)` in the order of the sizes given.
    pub runs: Vec<(usize, Counters)>,
}

fn setup(trace: &Trace, frames: usize) -> Setup<'_> {
    Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    }
}

/// Simulates every policy at every memory size. Every spec is built once
/// before any simulation, so a bad name fails at once.
pub fn sweep(trace: &Trace, policies: &[&str], frames: &[usize]) -> Result<Vec<Curve>, RunError> {
    if policies.is_empty() {
        return Err(PlotArgError::NoPolicy.into());
    }
    for p in policies {
        registry::build(p, &setup(trace, 1))?;
    }
    policies
        .iter()
        .map(|&p| {
            let runs = frames
                .iter()
                .map(|&f| {
                    let built = registry::build(p, &setup(trace, f))?;
                    Ok((f, pagepilot_sim::simulate(trace, built, f)))
                })
                .collect::<Result<_, RegistryError>>()?;
            Ok(Curve {
                policy: p.to_string(),
                runs,
            })
        })
        .collect()
}

/// Why a sweep or a plot could not be made.
#[derive(Debug, Error)]
pub enum RunError {
    /// A policy spec was refused.
    #[error(transparent)]
    Policy(#[from] RegistryError),
    /// The arguments were wrong.
    #[error(transparent)]
    Args(#[from] PlotArgError),
    /// The plot could not be written.
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
}

/// The plot series of `metric` for each curve.
pub fn series(curves: &[Curve], metric: Metric) -> Vec<Series> {
    curves
        .iter()
        .map(|c| {
            Series::from_counters(
                c.policy.clone(),
                metric,
                c.runs.iter().map(|(f, counters)| (*f as u64, counters)),
            )
        })
        .collect()
}

/// `points` memory sizes spread evenly up to `footprint` pages, the last one
/// the footprint itself.
pub fn auto_frames(footprint: usize, points: usize) -> Vec<usize> {
    let footprint = footprint.max(1);
    let mut sizes: Vec<usize> = (1..=points)
        .map(|k| (footprint * k).div_ceil(points).max(1))
        .collect();
    sizes.dedup();
    sizes
}

/// Parses `--frames`: `auto`, `auto:N` or a comma-separated list.
pub fn parse_frames(text: &str, footprint: usize) -> Result<Vec<usize>, PlotArgError> {
    let bad = |why: &str| PlotArgError::BadFrames {
        given: text.into(),
        why: why.into(),
    };
    let text_trim = text.trim();
    let sizes = if let Some(rest) = text_trim.strip_prefix("auto") {
        let points = match rest.strip_prefix(':') {
            None if rest.is_empty() => 20,
            Some(n) => n
                .trim()
                .parse::<usize>()
                .map_err(|_| bad("expected auto:N with N a positive integer"))?,
            None => return Err(bad("expected auto or auto:N")),
        };
        if points == 0 || points > MAX_POINTS {
            return Err(bad(&format!("auto:N needs 1 <= N <= {MAX_POINTS}")));
        }
        auto_frames(footprint, points)
    } else {
        let sizes = text_trim
            .split(',')
            .map(|s| s.trim().parse::<usize>().ok().filter(|&f| f > 0))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| bad("expected frame counts >= 1 separated by commas"))?;
        if sizes.len() > MAX_POINTS {
            return Err(bad(&format!("at most {MAX_POINTS} memory sizes")));
        }
        sizes
    };
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_auto_frames_spread_evenly_up_to_the_footprint() {
        assert_eq!(auto_frames(100, 4), vec![25, 50, 75, 100]);
        assert_eq!(auto_frames(3, 10), vec![1, 2, 3]);
        assert_eq!(parse_frames("auto", 2000).unwrap().len(), 20);
        assert_eq!(parse_frames("auto:5", 10).unwrap(), vec![2, 4, 6, 8, 10]);
    }

    #[test]
    fn test_bad_frames_are_refused_with_the_value() {
        for bad in ["", "0", "12,x", "auto:0", "auto:", "autox", "auto:100000"] {
            let err = parse_frames(bad, 100).unwrap_err();
            assert!(matches!(&err, PlotArgError::BadFrames { given, .. } if given == bad));
        }
        assert_eq!(parse_frames(" 8, 16 ", 100).unwrap(), vec![8, 16]);
    }

    #[test]
    fn test_sweep_gives_lru_its_known_faults_on_a_cyclic_scan() {
        // 10 pages swept 5 times with 5 frames: LRU faults on every
        // reference; with 10 frames every policy faults only on first touch.
        let trace = Trace::from_pages((0..5).flat_map(|_| 0..10u64));
        let curves = sweep(&trace, &["lru", "opt"], &[5, 10]).unwrap();
        let faults = |c: &Curve| c.runs.iter().map(|r| r.1.faults).collect::<Vec<_>>();
        assert_eq!(faults(&curves[0]), vec![50, 10]);
        let opt = faults(&curves[1]);
        assert!(opt[0] < 50 && opt[0] > 10 && opt[1] == 10, "{opt:?}");
        let direct = registry::build("opt", &setup(&trace, 5)).unwrap();
        assert_eq!(
            curves[1].runs[0].1,
            pagepilot_sim::simulate(&trace, direct, 5)
        );
        let s = series(&curves, Metric::FaultRate);
        assert_eq!(s[0].points[0], (5, 40.0 * 1e6 / 50.0));
    }

    #[test]
    fn test_sweep_refuses_an_unknown_policy_before_simulating() {
        let trace = Trace::from_pages(0..10u64);
        let err = sweep(&trace, &["lru", "nosuch"], &[4]).err().unwrap();
        assert!(matches!(
            err,
            RunError::Policy(RegistryError::Unknown { .. })
        ));
        assert!(matches!(
            sweep(&trace, &[], &[4]),
            Err(RunError::Args(PlotArgError::NoPolicy))
        ));
    }

    #[test]
    fn test_spacetime_plots_one_point_per_reference_fault_or_victim() {
        let dir = std::env::temp_dir().join(format!("pagepilot-st-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("st.svg");
        let trace = Trace::from_pages((0..5).flat_map(|_| 0..10u64));
        let count = |view: View| write_spacetime(&trace, &view, "t", &out).unwrap();
        assert_eq!(count(View::References), 50);
        let lru = |cold| View::Faults {
            policy: "lru",
            frames: 5,
            cold,
        };
        // LRU faults on all 50 references, 10 of them first touches.
        assert_eq!(count(lru(true)), 50);
        assert_eq!(count(lru(false)), 40);
        // Every fault after the first 5 evicts a page.
        let victims = View::Victims {
            policy: "lru",
            frames: 5,
        };
        assert_eq!(count(victims), 45);
        let zero = View::Victims {
            policy: "lru",
            frames: 0,
        };
        assert!(matches!(
            write_spacetime(&trace, &zero, "t", &out),
            Err(RunError::Args(PlotArgError::BadFrames { .. }))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
