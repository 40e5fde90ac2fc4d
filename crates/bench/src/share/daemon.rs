//! The daemon side of `pagepilot bench share`: the two joins as two
//! processes (this binary re-executed, [`crate::child`]), each mapping its
//! table as the in-process side does (its policy, half the frames as its
//! budget and `minFrame`, the defaults otherwise), joined through
//! `PAGEPILOT_DAEMON` to a daemon the round starts with the pool's frames,
//! partition burst and deadline. Both map, say `ready`, and start their
//! join when told, as the in-process side's two threads do; each reports
//! its run, its page-ins and fault events, and the messages its process
//! sent the daemon.

use crate::error::IoContext;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ChildStdin;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pagepilot_pager::{Backing, Client, Region, RegionOptions};
use serde::{Deserialize, Serialize};

use super::{window_frames, JoinRun, POLICIES};
use crate::child::{self, Options, Role, Running};
use crate::daemon::{DaemonConfig, RoundDaemon, DAEMON_ENV};
use crate::datafile::DataFile;
use crate::workload::{Plan, Workload};
use crate::BenchResult;

/// How long a child may take to map its table and join the daemon.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a join may run.
const RUN_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a child may take to exit after its report.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// RAPHA's fault unit in the daemon's configuration: no region here has a
/// fault limit, so it does not matter; the pool's default.
const FAULT_UNIT_US: u64 = 20;

/// What a join's process is told.
#[derive(Serialize, Deserialize)]
pub struct ChildJob {
    file: PathBuf,
    policy: String,
    /// Its region's budget (and `minFrame`), bytes.
    budget: u64,
    loops: usize,
}

/// One join of one round under the daemon.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct DaemonJoinRun {
    /// Its time, page-ins (the region's `missing_faults`), checksum and windows.
    #[serde(flatten)]
    pub run: JoinRun,
    /// Messages its process sent the daemon, all told (the hello aside).
    pub messages_sent: u64,
    /// Faults its region served (`fault_events`).
    pub fault_events: u64,
    /// Its region's budget at the end, frames.
    pub budget_frames: u64,
}

/// The daemon side failed.
#[derive(Debug, thiserror::Error)]
pub enum ShareDaemonError {
    /// A child could not be started or told to go.
    #[error("bench share, daemon side, join {join}")]
    Io {
        /// Which join.
        join: usize,
        /// Why.
        source: std::io::Error,
    },
    /// A child said nothing in time (it was killed).
    #[error("bench share, daemon side: no {what} within {waited:?}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// A child ended before its report.
    #[error("bench share, daemon side, join {join} ended before its report ({status})")]
    Ended {
        /// Which join.
        join: usize,
        /// Its exit status, if it was reaped.
        status: String,
    },
    /// A child's report was not understood.
    #[error("bench share, daemon side, join {join} printed no report")]
    Report {
        /// Which join.
        join: usize,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The join read wrong data.
    #[error("bench share, daemon side, join {join}: checksum {got} != {want}")]
    Checksum {
        /// Which join.
        join: usize,
        /// What it computed.
        got: u64,
        /// What it should have.
        want: u64,
    },
    /// The child's region did not join a daemon.
    /// The parent did not say `go` on stdin.
    #[error("bench share, daemon side: not told to go")]
    NotToldToGo,
    #[error("bench share, daemon side: the region did not join the daemon ({DAEMON_ENV} unset?)")]
    NotJoined,
}

/// The children of a round, killed and reaped when dropped (errors included).
#[derive(Default)]
struct Children(Vec<Running>);

/// A line a child printed, or its end (`None`).
type Line = (usize, Option<String>);

/// Both joins under a daemon of `budget` bytes; each join's run and the
/// pair's wall time (from the start signal to both reports).
pub fn round(
    files: &[DataFile; 2],
    budget: usize,
    loops: usize,
) -> Result<([DaemonJoinRun; 2], u64), crate::BenchError> {
    let mut daemon = RoundDaemon::start(&DaemonConfig::like_pool(budget as u64, FAULT_UNIT_US))?;
    let (tx, rx) = mpsc::channel::<Line>();
    let mut kids = Children::default();
    let mut stdins: Vec<ChildStdin> = Vec::new();
    for (k, (file, policy)) in files.iter().zip(POLICIES).enumerate() {
        let job = ChildJob {
            file: file.path().to_path_buf(),
            policy: policy.into(),
            budget: (budget / 2) as u64,
            loops,
        };
        let opts = Options {
            stdin: true,
            env: vec![(DAEMON_ENV, Some(daemon.socket().into()))],
        };
        let mut child = child::spawn("bench share join", &Role::ShareDaemon(job), opts)?;
        let out = child.take_stdout();
        stdins.extend(child.take_stdin());
        kids.0.push(child);
        let tx = tx.clone();
        std::thread::spawn(move || {
            if let Some(out) = out {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((k, Some(line))).is_err() {
                        return;
                    }
                }
            }
            let _ = tx.send((k, None));
        });
    }
    drop(tx);
    let mut ready = [false; 2];
    let deadline = Instant::now() + READY_TIMEOUT;
    while ready.contains(&false) {
        let (k, line) = next_line(&rx, deadline, "`ready` from both joins")?;
        match line {
            Some(line) => ready[k] |= line == "ready",
            None => return Err(ended(&mut kids, k).into()),
        }
    }
    for (k, stdin) in stdins.iter_mut().enumerate() {
        stdin
            .write_all(b"go\n")
            .map_err(|source| ShareDaemonError::Io { join: k, source })?;
    }
    let t0 = Instant::now();
    drop(stdins);
    let mut reports: [Option<String>; 2] = [None, None];
    let deadline = t0 + RUN_TIMEOUT;
    while reports.iter().any(Option::is_none) {
        // A join's end after its report is no news; before, an error.
        match next_line(&rx, deadline, "report from both joins")? {
            (k, Some(line)) => reports[k] = Some(line),
            (k, None) if reports[k].is_none() => return Err(ended(&mut kids, k).into()),
            (_, None) => {}
        }
    }
    let wall = t0.elapsed().as_nanos() as u64;
    for (k, c) in kids.0.iter_mut().enumerate() {
        let status = wait_bounded(c, EXIT_TIMEOUT)?;
        if !status.success() {
            return Err(ShareDaemonError::Ended {
                join: k,
                status: status.to_string(),
            }
            .into());
        }
    }
    daemon.check_running()?;
    daemon.stop()?;
    let mut runs = [DaemonJoinRun::default(); 2];
    for (k, (report, file)) in reports.iter().zip(files).enumerate() {
        let r: DaemonJoinRun = serde_json::from_str(report.as_deref().unwrap_or_default())
            .map_err(|source| ShareDaemonError::Report { join: k, source })?;
        let want = Plan::new(Workload::Join { loops }, file.len()).expected();
        if r.run.checksum != want {
            return Err(ShareDaemonError::Checksum {
                join: k,
                got: r.run.checksum,
                want,
            }
            .into());
        }
        runs[k] = r;
    }
    Ok((runs, wall))
}

/// The next line a child printed before `deadline`, or its end (`None`).
fn next_line(
    rx: &mpsc::Receiver<Line>,
    deadline: Instant,
    what: &'static str,
) -> Result<Line, ShareDaemonError> {
    let waited = deadline.saturating_duration_since(Instant::now());
    rx.recv_timeout(waited)
        .map_err(|_| ShareDaemonError::Timeout { what, waited })
}

/// Join `k` ended too early: how it ended.
fn ended(kids: &mut Children, k: usize) -> ShareDaemonError {
    let status = kids
        .0
        .get_mut(k)
        .and_then(|c| wait_bounded(c, EXIT_TIMEOUT).ok())
        .map_or_else(|| "still running".into(), |s| s.to_string());
    ShareDaemonError::Ended { join: k, status }
}

/// Waits at most `limit` for `child` to exit (then kills it).
fn wait_bounded(
    child: &mut Running,
    limit: Duration,
) -> Result<std::process::ExitStatus, ShareDaemonError> {
    match child.wait(Some(limit)) {
        Ok(Some(status)) => Ok(status),
        _ => Err(ShareDaemonError::Timeout {
            what: "exit of a join",
            waited: limit,
        }),
    }
}

/// A join's process: maps its table (joining the daemon of
/// `PAGEPILOT_DAEMON`), says `ready`, runs the join when told, and prints
/// its run as JSON.
pub fn child_main(job: ChildJob) -> BenchResult {
    // Cold, as the other sides start.
    crate::cold::make_cold(&[&job.file], false).on("dropping the cached pages of", &job.file)?;
    let backing = Backing::File {
        path: job.file.clone(),
        writable: false,
    };
    let region = Region::map(RegionOptions::new(
        backing,
        job.budget as usize,
        &job.policy,
    ))?;
    let client = Client::current()?.ok_or(ShareDaemonError::NotJoined)?;
    let plan = Plan::new(Workload::Join { loops: job.loops }, region.len());
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready").doing("telling the parent the join is ready")?;
        out.flush().doing("telling the parent the join is ready")?;
    }
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .doing("waiting for the parent's go")?;
    if go.trim() != "go" {
        return Err(ShareDaemonError::NotToldToGo.into());
    }
    let t = Instant::now();
    // SAFETY: the region maps the whole table read-only and stays mapped
    // until after the join.
    let checksum = unsafe { plan.run(region.as_ptr()) };
    let elapsed_ns = t.elapsed().as_nanos() as u64;
    let stats = region.stats();
    region.unmap()?;
    // After the unmap: its unregistration counted too.
    let run = DaemonJoinRun {
        run: JoinRun {
            elapsed_ns,
            faults: stats.missing_faults,
            checksum,
            window_frames: window_frames(&stats),
        },
        messages_sent: client.messages_sent(),
        fault_events: stats.fault_events,
        budget_frames: stats.budget_frames,
    };
    Ok(crate::child::report(&run)?)
}
