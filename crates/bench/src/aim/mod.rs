//! `pagepilot bench aim`: HiPEC's Figure 5 (section 5.2), the AIM Suite III
//! analogue. Simulated users ([`worker`], processes of their own) run jobs
//! drawn from a mix of compute, file and memory work for a fixed time;
//! throughput is jobs per minute over all of them, as users are added.
//! Each (mix, users) point runs in two configurations, alternately in the
//! same rounds: `plain`, no pagepilot anywhere, and `pagepilot`, a daemon
//! running with one process holding a region under it, paged by a policy
//! program ([`pilot`]). The workers never use pagepilot: the question is
//! whether its presence costs non-specific applications throughput (the
//! paper: it does not).

mod pilot;
pub mod report;
mod worker;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use pilot::Job as PilotJob;
pub use worker::Job as WorkerJob;

use self::pilot::Pilot;
use self::report::{Report, Round, Row, Side};
use self::worker::WorkerRun;
use crate::child::{self, Options, Role};
use crate::daemon::DAEMON_ENV;
use crate::datafile::{self, DataFile};
use crate::emit::emit;
use crate::error::IoContext;
use crate::measure::{check_range, Format};
use crate::{BenchError, BenchResult};

const MB: usize = 1 << 20;
/// The specific application's file and budget: it faults all the time.
const PILOT_FILE_MB: usize = 8;
const PILOT_BUDGET_MB: usize = 2;
/// Time a worker may take beyond its `--seconds` (start, its last job, exit).
const WORKER_SLACK: Duration = Duration::from_secs(60);

/// Arguments of `pagepilot bench aim`.
#[derive(clap::Args)]
pub struct Args {
    /// Numbers of concurrent users (worker processes), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,6,8")]
    pub users: Vec<usize>,
    /// Seconds each worker runs its jobs.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Mixes, comma-separated: standard (compute:file:memory 1:1:1), disk (1:3:1), memory (1:1:3).
    #[arg(long, value_delimiter = ',', default_value = "standard,disk,memory")]
    pub mixes: Vec<String>,
    /// Rounds; throughputs are medians.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the workers' job choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory of the file jobs' and the specific application's files
    /// (default: the benchmarks' data directory; not tmpfs).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `bench aim` failed in one of its processes.
#[derive(Debug, thiserror::Error)]
pub enum AimError {
    /// A file job read back other bytes than it wrote.
    #[error("bench aim worker: {path} read back differs from what was written", path = .0.display())]
    ReadBack(PathBuf),
    /// The specific application failed.
    #[error("bench aim: the pagepilot side's region process {0}")]
    Pilot(&'static str),
}

/// The mixes: name and weights of compute, file and memory jobs.
const MIXES: [(&str, [u32; 3]); 3] = [
    ("standard", [1, 1, 1]),
    ("disk", [1, 3, 1]),
    ("memory", [1, 1, 3]),
];

/// The mixes `names` asks for, in its order, each once.
fn mixes(names: &[String]) -> Result<Vec<(&'static str, [u32; 3])>, BenchError> {
    let mut chosen: Vec<(&'static str, [u32; 3])> = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let mix = MIXES
            .iter()
            .find(|(m, _)| *m == name)
            .ok_or_else(|| BenchError::BadArg {
                option: "--mixes",
                value: name.to_string(),
                why: "the mixes are standard, disk and memory".into(),
            })?;
        if !chosen.iter().any(|(m, _)| *m == mix.0) {
            chosen.push(*mix);
        }
    }
    if chosen.is_empty() {
        return Err(BenchError::EmptyList {
            option: "--mixes",
            why: "needs at least one of standard, disk, memory",
        });
    }
    Ok(chosen)
}

/// Checks the arguments; the mixes they name.
fn check(args: &Args) -> Result<Vec<(&'static str, [u32; 3])>, BenchError> {
    if args.users.is_empty() {
        return Err(BenchError::EmptyList {
            option: "--users",
            why: "needs at least one number of users",
        });
    }
    for &n in &args.users {
        check_range("--users", n, 256)?;
    }
    check_range("--runs", args.runs, 100)?;
    if !(args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(BenchError::BadArg {
            option: "--seconds",
            value: args.seconds.to_string(),
            why: "must be above 0 and at most 3600".into(),
        });
    }
    mixes(&args.mixes)
}

/// Runs `pagepilot bench aim`.
pub fn run(args: Args) -> BenchResult {
    let report = measure(&args)?;
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        report::print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

/// The program's file, removed when dropped.
struct ProgramFile(PathBuf);

impl Drop for ProgramFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Measures every point, both configurations, `--runs` rounds.
pub fn measure(args: &Args) -> Result<Report, BenchError> {
    let mixes = check(args)?;
    let dir = datafile::default_dir(args.dir.clone());
    let file = DataFile::create(&dir, "aim-pilot", PILOT_FILE_MB * MB)?;
    let program = ProgramFile(dir.join(format!("pagepilot-bench-{}-fifo2.hp", std::process::id())));
    std::fs::write(&program.0, pilot::FIFO2).on("writing", &program.0)?;
    let pilot_job = PilotJob {
        file: file.path().to_path_buf(),
        program: program.0.clone(),
        budget: (PILOT_BUDGET_MB * MB) as u64,
    };
    let mut users = args.users.clone();
    users.sort_unstable();
    users.dedup();
    let points: Vec<_> = mixes
        .iter()
        .flat_map(|m| users.iter().map(move |&n| (*m, n)))
        .collect();
    let mut sides: Vec<[Vec<Round>; 2]> = vec![Default::default(); points.len()];
    for round in 0..args.runs {
        eprintln!("round {}/{}...", round + 1, args.runs);
        for (p, &((_, weights), n)) in points.iter().enumerate() {
            // Which configuration goes first alternates, point by point and round by round.
            let first = (round + p) % 2;
            for side in [first, 1 - first] {
                let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(round as u64);
                let pilot = (side == 1).then(|| pilot_job.clone());
                let r = run_point(&dir, weights, n, args.seconds, seed, pilot)?;
                sides[p][side].push(r);
            }
        }
    }
    let rows = points
        .iter()
        .zip(sides)
        .map(|(&((mix, _), n), [plain, pp])| Row::new(mix, n, Side::of(plain), Side::of(pp)))
        .collect();
    Ok(Report {
        bench: "aim",
        seconds: args.seconds,
        runs: args.runs,
        mixes,
        pilot_file_mb: PILOT_FILE_MB,
        pilot_budget_mb: PILOT_BUDGET_MB,
        pilot_program: "fifo2.hp",
        rows,
    })
}

/// `users` workers at once, with the specific application beside them if
/// `pilot` is given; their round.
fn run_point(
    dir: &Path,
    weights: [u32; 3],
    users: usize,
    seconds: f64,
    seed: u64,
    pilot: Option<PilotJob>,
) -> Result<Round, BenchError> {
    let pilot = pilot.map(Pilot::start).transpose()?;
    let files: Vec<PathBuf> = (0..users)
        .map(|k| {
            dir.join(format!(
                "pagepilot-bench-{}-aim-w{k}.tmp",
                std::process::id()
            ))
        })
        .collect();
    let runs = run_workers(weights, seconds, seed, &files);
    for f in &files {
        // A worker killed before its cleanup leaves its file.
        let _ = std::fs::remove_file(f);
    }
    let runs = runs?;
    let pilot = pilot.map(Pilot::stop).transpose()?;
    let per_worker: Vec<u64> = runs.iter().map(|r| r.jobs).collect();
    let mut by_kind = [0u64; 3];
    for r in &runs {
        for (total, n) in by_kind.iter_mut().zip(r.by_kind) {
            *total += n;
        }
    }
    let jobs_per_minute = runs
        .iter()
        .map(|r| r.jobs as f64 * 60e9 / r.elapsed_ns.max(1) as f64)
        .sum();
    Ok(Round {
        jobs: per_worker.iter().sum(),
        per_worker,
        by_kind,
        jobs_per_minute,
        pilot,
    })
}

/// Starts one worker per file, tells them all to go, and collects their runs.
fn run_workers(
    weights: [u32; 3],
    seconds: f64,
    seed: u64,
    files: &[PathBuf],
) -> Result<Vec<WorkerRun>, BenchError> {
    let mut workers = Vec::new();
    let mut stdins = Vec::new();
    for (k, file) in files.iter().enumerate() {
        let job = WorkerJob {
            weights,
            seconds,
            seed: seed.wrapping_mul(31).wrapping_add(k as u64),
            file: file.clone(),
        };
        let opts = Options {
            stdin: true,
            // The workers are the non-specific applications: never pagepilot's.
            env: vec![(DAEMON_ENV, None)],
        };
        let mut w = child::spawn("bench aim worker", &Role::AimWorker(job), opts)?;
        stdins.extend(w.take_stdin());
        workers.push(w);
    }
    for stdin in &mut stdins {
        stdin.write_all(b"go\n").doing("telling a worker to go")?;
    }
    drop(stdins);
    let limit = Duration::from_secs_f64(seconds) + WORKER_SLACK;
    workers
        .into_iter()
        .map(|w| Ok(w.finish(Some(limit))?.reported("bench aim worker")?))
        .collect()
}

/// A worker's process ([`crate::child`]).
pub(crate) fn worker_main(job: WorkerJob) -> BenchResult {
    worker::child_main(job)
}

/// The specific application's process ([`crate::child`]).
pub(crate) fn pilot_main(job: PilotJob) -> BenchResult {
    pilot::child_main(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn test_mixes_are_named_known_and_not_empty() {
        let m = mixes(&strings(&["disk", "standard", "disk"])).unwrap();
        assert_eq!(m, [("disk", [1, 3, 1]), ("standard", [1, 1, 1])]);
        assert!(matches!(
            mixes(&strings(&["cpu"])),
            Err(BenchError::BadArg {
                option: "--mixes",
                ..
            })
        ));
        assert!(matches!(
            mixes(&strings(&[""])),
            Err(BenchError::EmptyList {
                option: "--mixes",
                ..
            })
        ));
    }
}
