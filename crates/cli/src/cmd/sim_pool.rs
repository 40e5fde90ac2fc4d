//! `pagepilot sim --global --pool FRAMES`: the traces as processes, each
//! with its own policy and its own frames drawn from one frame pool
//! (HiPEC's global frame manager), optionally under RAPHA's fault limits
//! ([`pagepilot_sim::pooled`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use pagepilot_sim::global::Schedule;
use pagepilot_sim::pooled::{self, PoolConfig, PooledRun, ProcessSpec, RateConfig};
use pagepilot_sim::{plot, Trace};
use thiserror::Error;

/// The frame-pool flags of `pagepilot sim --global`. Lists take one value
/// per trace, or one value for every trace.
#[derive(clap::Args, Debug, Default)]
pub struct PoolArgs {
    /// With `--global`: each process gets its own policy (`--policy`, one per
    /// trace or one for all; default clock) and draws its frames from one
    /// frame pool of FRAMES frames (HiPEC's global frame manager: minFrame,
    /// Request/Release, partition_burst, FAFR and forced reclamation).
    #[arg(long, value_name = "FRAMES", requires = "global")]
    pub pool: Option<usize>,
    /// With `--pool`: each process's minFrame, frames guaranteed to it
    /// equal shares of the pool].
    #[arg(long, value_name = "N,...", value_delimiter = ',', requires = "pool")]
    pub min_frames: Vec<usize>,
    /// With `--pool`: partition_burst, frames held above the minimums beyond
    /// which the excess is reclaimed, first allocated first half
    /// the pool].
    #[arg(long, value_name = "FRAMES", requires = "pool")]
    pub partition_burst: Option<usize>,
    /// With `--pool`: reference times a process has to give frames back
    /// (its policy's ReclaimFrame) before they are taken by force
    /// ten fault service times, as live 10 ms is to a fault's ~100 us].
    #[arg(long, value_name = "REFS", requires = "pool")]
    pub reclaim_deadline: Option<u64>,
    /// With `--pool`: frames of each process held by read-ahead windows,
    /// outside its policy's resident set 0].
    #[arg(long, value_name = "N,...", value_delimiter = ',', requires = "pool")]
    pub readahead_frames: Vec<usize>,
    /// With `--pool`: RAPHA, missing faults each process may take per
    /// `--fault-period`; faults beyond wait for the next period.
    #[arg(long, value_name = "N,...", value_delimiter = ',', requires = "pool")]
    pub fault_limit: Vec<u64>,
    /// With `--fault-limit`: the processes' fault period, reference times.
    #[arg(long, value_name = "REFS", requires = "pool")]
    pub fault_period: Option<u64>,
    /// With `--fault-limit`: the system's fault period the
    /// processes' period].
    #[arg(long, value_name = "REFS", requires = "fault_period")]
    pub system_period: Option<u64>,
    /// With `--fault-limit`: processor time of one fault, reference times
    /// (RAPHA's fault_unit; the system limit is (1 - reserves) / unit *
    /// system period, Eq. 4).
    #[arg(long, value_name = "REFS", default_value_t = 1)]
    pub fault_unit: u64,
    /// With `--fault-limit`: each process's processor reserve, percent;
    /// refused when the reserves and the limits' fault handling exceed the
    /// processor (RAPHA Eq. 2) 0].
    #[arg(
        long,
        value_name = "PCT,...",
        value_delimiter = ',',
        requires = "fault_limit"
    )]
    pub reserve: Vec<f64>,
    /// With `--pool`: reference times between samples of the frames held
    /// about 200 samples over the run].
    #[arg(long, value_name = "REFS", requires = "pool")]
    pub sample_every: Option<u64>,
}

/// Errors in the frame-pool flags.
#[derive(Debug, Error)]
pub enum PoolArgsError {
    /// A list with neither one value nor one per trace.
    #[error("{flag}: {given} values for {traces} traces; give one per trace, or one for all")]
    PerTrace {
        /// The flag.
        flag: &'static str,
        /// Values given.
        given: usize,
        /// Traces given.
        traces: usize,
    },
    /// A flag that sizes a global policy's memory or sweeps it.
    #[error("{0} does not apply with --pool: each process draws its frames from the pool")]
    NotWithPool(&'static str),
    /// CSV has no room for the per-process history.
    #[error("--format csv is not available with --pool; use table or json")]
    NoCsv,
    /// A fault period without limits.
    #[error("--fault-period without --fault-limit: give each process a limit")]
    PeriodWithoutLimit,
    /// A reserve that is not a percentage.
    #[error("--reserve: {0} is not a percentage in 0..=100")]
    BadReserve(f64),
    /// The simulation refused its setup.
    #[error(transparent)]
    Pooled(#[from] pooled::PooledError),
}

/// How the caller wants the run.
pub struct Output<'a> {
    /// JSON (else a table).
    pub json: bool,
    /// A plot of the frames held over time.
    pub plot: Option<&'a Path>,
}

/// `values` as one per trace: empty gives `default`, one value repeats.
fn per_trace<T: Clone>(
    flag: &'static str,
    values: &[T],
    traces: usize,
    default: impl Fn() -> T,
) -> Result<Vec<T>, PoolArgsError> {
    match values.len() {
        0 => Ok(vec![default(); traces]),
        1 => Ok(vec![values[0].clone(); traces]),
        n if n == traces => Ok(values.to_vec()),
        given => Err(PoolArgsError::PerTrace {
            flag,
            given,
            traces,
        }),
    }
}

/// Runs the pooled simulation of `traces` (named by their paths) and
/// writes its report.
pub fn run(
    args: &PoolArgs,
    frames: usize,
    traces: &[Trace],
    paths: &[PathBuf],
    specs: &[String],
    schedule: Schedule,
    output: Output,
) -> Result<(), Box<dyn std::error::Error>> {
    let k = traces.len();
    let policies = per_trace("--policy", specs, k, || "clock".to_string())?;
    let mins = per_trace("--min-frames", &args.min_frames, k, || frames / k.max(1))?;
    let windows = per_trace("--readahead-frames", &args.readahead_frames, k, || 0)?;
    let limits = per_trace("--fault-limit", &args.fault_limit, k, || 0)?;
    let reserves = per_trace("--reserve", &args.reserve, k, || 0.0)?;
    if let Some(&bad) = reserves.iter().find(|r| !(0.0..=100.0).contains(*r)) {
        return Err(PoolArgsError::BadReserve(bad).into());
    }
    let rate = match (args.fault_limit.is_empty(), args.fault_period) {
        (true, Some(_)) => return Err(PoolArgsError::PeriodWithoutLimit.into()),
        (_, Some(period)) => Some(RateConfig {
            fault_period: period,
            system_period: args.system_period.unwrap_or(period),
            fault_unit: args.fault_unit,
        }),
        _ => None,
    };
    let processes: Vec<ProcessSpec> = (0..k)
        .map(|p| ProcessSpec {
            name: paths[p].display().to_string(),
            policy: policies[p].clone(),
            min_frames: mins[p],
            readahead_frames: windows[p],
            fault_limit: (!args.fault_limit.is_empty()).then_some(limits[p]),
            reserve: reserves[p] / 100.0,
        })
        .collect();
    let config = PoolConfig {
        frames,
        partition_burst: args.partition_burst,
        reclaim_deadline: args
            .reclaim_deadline
            .unwrap_or(schedule.service.saturating_mul(10)),
        schedule,
        rate,
        sample_every: args.sample_every,
    };
    let result = pooled::run(traces, &processes, &config).map_err(PoolArgsError::Pooled)?;
    write(&result, output.json)?;
    if let Some(path) = output.plot {
        let names: Vec<&str> = processes.iter().map(|p| p.policy.as_str()).collect();
        let title = format!("frames held, pool of {frames}: {}", names.join(" + "));
        plot::frames_held(&result, &title, path)?;
    }
    Ok(())
}

fn write(run: &PooledRun, json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let done = if json {
        serde_json::to_writer_pretty(&mut out, run)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        run.write_table(&mut out)
    };
    match done.and_then(|()| out.flush()) {
        // A reader that stopped early (`| head`) is not a failure of the run.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_per_trace_lists_take_one_value_per_trace_or_one_for_all() {
        assert_eq!(per_trace("--x", &[5], 3, || 0).unwrap(), vec![5, 5, 5]);
        assert_eq!(per_trace("--x", &[], 2, || 7).unwrap(), vec![7, 7]);
        assert_eq!(per_trace("--x", &[1, 2], 2, || 0).unwrap(), vec![1, 2]);
        let err = per_trace("--x", &[1, 2], 3, || 0).unwrap_err().to_string();
        assert!(
            err.contains("--x") && err.contains("2 values for 3 traces"),
            "{err}"
        );
    }
}
