//! `pagepilot sim`: policies over memory sizes on one trace, or several
//! traces multiprogrammed under one global policy, or (`--global --pool`)
//! each with its own policy and frames from one frame pool.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use pagepilot_sim::param_sweep::{self, ParamSweep, ParamSweepError};
use pagepilot_sim::report::{self, Format, Row};
use pagepilot_sim::sweep::{self, Parallelism, Plan};
use pagepilot_sim::{global, Trace};
use thiserror::Error;

use super::sim_pool::{self, PoolArgs, PoolArgsError};
use super::trace::LoadArgs;
use super::{sim_plot, CmdResult};

/// Arguments of `pagepilot sim`.
#[derive(clap::Args)]
pub struct Args {
    /// The trace; with `--global`, one trace per process.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Policies: comma-separated registry specs, e.g. `lru,fifo,seq:L=50,M=20`
    /// [default: lru,fifo,clock,opt; with --global: lru,fifo,clock; with
    /// --sweep: none]. With --pool: each process's own policy (or policy
    /// program), one per trace or one for all [default: clock].
    #[arg(long, short, visible_alias = "policies")]
    policy: Vec<String>,
    /// Sweep a policy's parameters over a grid, one run per point and size:
    /// `POLICY:PARAM=VALUES,...`, values as integers `8`, inclusive ranges
    /// `2..64`, stepped ranges `2..64:4`, geometric ranges `2..64*2`, or
    /// lists of those (`L=2..8,16,32,M=20,50`); several parameters form a
    /// grid. Runs beside the `--policy` policies.
    #[arg(long, value_name = "SPEC")]
    sweep: Option<String>,
    /// Memory sizes in frames, comma-separated, or `auto` (about 20 sizes
    /// spread evenly up to the footprint; 5 with --sweep).
    #[arg(long, short, default_value = "auto")]
    frames: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: FormatArg,
    /// Also plot fault rate against memory size (with --sweep: against the
    /// swept parameter, one curve per size) to this PNG or SVG file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// How to read the traces.
    #[command(flatten)]
    load: LoadArgs,
    /// Multiprogrammed: run the traces as processes round-robin under one
    /// global policy.
    #[arg(long)]
    global: bool,
    /// With `--global`: references a process runs per turn.
    #[arg(long, default_value_t = 1_000_000, value_name = "REFS")]
    quantum: u64,
    /// With `--global`: reference times a missing fault blocks its process.
    #[arg(long, default_value_t = 400_000, value_name = "REFS")]
    service: u64,
    /// The frame pool (`--pool` and its settings).
    #[command(flatten)]
    pool: PoolArgs,
}

/// `--format` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Table,
    Json,
    Csv,
}

/// Errors in `pagepilot sim`'s arguments.
#[derive(Debug, Error)]
pub enum SimError {
    /// A `--frames` item is not a positive number.
    #[error("--frames: `{0}` is not a positive number of frames (or `auto`)")]
    BadFrames(String),
    /// A policy list item is empty or a parameter has no policy.
    #[error("--policy: `{0}` is not a policy spec")]
    BadPolicy(String),
    /// Several traces without `--global`.
    #[error("{0} traces given: simulate one trace at a time, or several with --global")]
    SeveralTraces(usize),
    /// A `--sweep` spec was not accepted.
    #[error("--sweep")]
    Sweep(#[from] ParamSweepError),
}

/// Runs `pagepilot sim`.
pub fn run(args: Args) -> CmdResult {
    if let Some(frames) = args.pool.pool {
        return run_pooled(&args, frames);
    }
    let grid = match &args.sweep {
        Some(text) => {
            let grid = ParamSweep::parse(text).map_err(SimError::Sweep)?;
            let points = grid.points().map_err(SimError::Sweep)?;
            Some((grid, points))
        }
        None => None,
    };
    let mut specs = match (args.policy.is_empty(), args.global, &grid) {
        (false, _, _) => policy_specs(&args.policy)?,
        (true, _, Some(_)) => Vec::new(),
        // OPT has no fixed future in a multiprogrammed run.
        (true, true, None) => strings(&["lru", "fifo", "clock"]),
        (true, false, None) => strings(&["lru", "fifo", "clock", "opt"]),
    };
    if let Some((_, points)) = &grid {
        specs.extend(points.iter().map(|p| p.spec.clone()));
    }
    if !args.global && args.traces.len() > 1 {
        return Err(SimError::SeveralTraces(args.traces.len()).into());
    }
    let traces = args
        .traces
        .iter()
        .map(|p| args.load.load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let footprint = traces.iter().map(Trace::distinct).sum();
    let auto_points = if grid.is_some() { 5 } else { 20 };
    let frames = parse_frames(&args.frames, footprint, auto_points)?;
    let bar = progress(&Plan::of(&specs, &frames, Parallelism::AllCores));
    let tick = |n| bar.inc(n);
    let mut rows = if args.global {
        let names: Vec<String> = args
            .traces
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let schedule = global::Schedule {
            quantum: args.quantum,
            service: args.service,
        };
        global::sweep(&traces, &names, &specs, &frames, schedule, &tick)?
    } else {
        sweep::sweep(&traces[0], &specs, &frames, Parallelism::AllCores, &tick)?
    };
    bar.finish_and_clear();
    if let Some((_, points)) = &grid {
        param_sweep::label_rows(points, &mut rows);
    }
    let format = match args.format {
        FormatArg::Table => Format::Table,
        FormatArg::Json => Format::Json,
        FormatArg::Csv => Format::Csv,
    };
    let mut out = std::io::stdout().lock();
    match report::write(&rows, format, &mut out).and_then(|()| out.flush()) {
        // A reader that stopped early (`| head`) is not a failure of the run.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    // Incidents go to stderr too, so a table or CSV reader sees them.
    for row in rows.iter().filter(|r| !r.incidents.is_empty()) {
        for incident in &row.incidents {
            eprintln!("{} at {} frames: {incident}", row.policy, row.frames);
        }
    }
    if let Some(path) = &args.plot {
        let names: Vec<String> = args
            .traces
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let title = if args.global {
            format!("global: {}", names.join(" + "))
        } else {
            names.join(" ")
        };
        match &grid {
            Some((grid, points)) => {
                let axis = &grid.main_axis().name;
                let title = format!("{title}: {}", args.sweep.as_deref().unwrap_or_default());
                sim_plot::parameter_curves(&whole_runs(&rows), points, axis, &title, path)?
            }
            None => sim_plot::fault_rate_curves(&whole_runs(&rows), &title, path)?,
        }
    }
    Ok(())
}

/// `--global --pool`: each trace a process with its own policy, its frames
/// drawn from the pool.
fn run_pooled(args: &Args, frames: usize) -> CmdResult {
    if args.sweep.is_some() {
        return Err(PoolArgsError::NotWithPool("--sweep").into());
    }
    if !args.frames.trim().eq_ignore_ascii_case("auto") {
        return Err(PoolArgsError::NotWithPool("--frames").into());
    }
    let json = match args.format {
        FormatArg::Csv => return Err(PoolArgsError::NoCsv.into()),
        FormatArg::Json => true,
        FormatArg::Table => false,
    };
    let specs = policy_specs(&args.policy)?;
    let traces = args
        .traces
        .iter()
        .map(|p| args.load.load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let schedule = global::Schedule {
        quantum: args.quantum,
        service: args.service,
    };
    let output = sim_pool::Output {
        json,
        plot: args.plot.as_deref(),
    };
    sim_pool::run(
        &args.pool,
        frames,
        &traces,
        &args.traces,
        &specs,
        schedule,
        output,
    )
}

/// The rows of whole runs (not single processes of a global run).
fn whole_runs(rows: &[Row]) -> Vec<Row> {
    rows.iter()
        .filter(|r| !matches!(r.process.as_deref(), Some(p) if p != "all"))
        .cloned()
        .collect()
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Splits `--policy` values into specs: commas separate policies, except that
/// a `key=value` item continues the previous policy's parameters.
fn policy_specs(values: &[String]) -> Result<Vec<String>, SimError> {
    let mut specs: Vec<String> = Vec::new();
    for value in values {
        let mut open = false;
        for item in value.split(',').map(str::trim) {
            if item.contains('=') && !item.contains(':') {
                match specs.last_mut() {
                    Some(last) if open => {
                        last.push(',');
                        last.push_str(item);
                    }
                    _ => return Err(SimError::BadPolicy(item.to_string())),
                }
            } else if item.is_empty() {
                return Err(SimError::BadPolicy(value.clone()));
            } else {
                open = item.contains(':');
                specs.push(item.to_string());
            }
        }
    }
    Ok(specs)
}

/// Parses `--frames`: `auto` (`auto_points` sizes) or a comma-separated
/// list of positive sizes.
fn parse_frames(text: &str, footprint: usize, auto_points: usize) -> Result<Vec<usize>, SimError> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(sweep::auto_frames(footprint, auto_points));
    }
    text.split(',')
        .map(|item| match item.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(SimError::BadFrames(item.trim().to_string())),
        })
        .collect()
}

/// A progress bar on stderr, under a line saying how the runs are spread
/// over the cores, when stderr is a terminal; hidden otherwise (a pipe's
/// reader gets the report alone).
fn progress(plan: &Plan) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    eprintln!("{plan}");
    let bar = ProgressBar::new(plan.runs as u64);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}") {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_policy_list_keeps_parameters_with_their_policy() {
        let specs = policy_specs(&strings(&["lru,seq:L=50,M=20,fifo", "opt"])).unwrap();
        assert_eq!(specs, strings(&["lru", "seq:L=50,M=20", "fifo", "opt"]));
        assert!(policy_specs(&strings(&["L=5,lru"])).is_err());
        assert!(policy_specs(&strings(&["lru,L=5"])).is_err());
        assert!(policy_specs(&strings(&["lru,,fifo"])).is_err());
    }

    #[test]
    fn test_frames_are_positive_numbers_or_auto() {
        assert_eq!(parse_frames("64, 128", 10, 20).unwrap(), vec![64, 128]);
        assert_eq!(parse_frames("auto", 40, 20).unwrap().len(), 20);
        assert_eq!(parse_frames("auto", 40, 5).unwrap().len(), 5);
        let err = parse_frames("64,0", 10, 20).unwrap_err().to_string();
        assert!(err.contains("`0`"), "{err}");
        assert!(parse_frames("64,x", 10, 20).is_err());
    }
}
