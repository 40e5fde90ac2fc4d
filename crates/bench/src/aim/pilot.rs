//! The specific application of `pagepilot bench aim`'s `pagepilot`
//! configuration: a process of its own holding a region under the round's
//! daemon (joined through `PAGEPILOT_DAEMON`), paged by a policy program
//! (policies/fifo2.hp) under a budget smaller than its file, scanning the
//! file over and over until told to stop, beside the workers.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use pagepilot_pager::{Backing, Client, Region, RegionOptions};
use serde::{Deserialize, Serialize};

use super::AimError;
use crate::child::{self, Options, Role, Running};
use crate::daemon::{DaemonConfig, RoundDaemon, DAEMON_ENV};
use crate::error::IoContext;
use crate::BenchResult;

/// The program the region runs (written beside the data file for the child).
pub const FIFO2: &str = include_str!("../../../../policies/fifo2.hp");
/// How long the pilot may take to map its region and join the daemon.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long it may take to report once told to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The pilot pages this many pages, then pauses: a paced application, so
/// that what the workers may lose is pagepilot's presence (its daemon, a
/// region's faults served beside them), not a second busy processor's
/// worth of scanning on a small machine.
const BATCH_PAGES: usize = 16;
/// The pause after each batch.
const PAUSE: Duration = Duration::from_millis(2);
/// RAPHA's fault unit in the daemon's configuration: no fault limit here.
const FAULT_UNIT_US: u64 = 20;

/// What the pilot is told.
#[derive(Clone, Serialize, Deserialize)]
pub struct Job {
    /// The file it pages.
    pub file: PathBuf,
    /// The policy program's file.
    pub program: PathBuf,
    /// Its region's budget, bytes.
    pub budget: u64,
}

/// What the pilot did.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct PilotRun {
    /// Whole scans of its file.
    pub scans: u64,
    /// Its region's page-ins (`missing_faults`).
    pub faults: u64,
    /// Messages its process sent the daemon.
    pub messages_sent: u64,
}

/// A running pilot and its daemon, stopped (and reaped) when dropped.
pub struct Pilot {
    child: Running,
    lines: mpsc::Receiver<String>,
    daemon: RoundDaemon,
}

impl Pilot {
    /// Starts a daemon of `budget` bytes and the pilot under it; returns
    /// once the pilot's region is mapped and paging.
    pub fn start(job: Job) -> Result<Pilot, crate::BenchError> {
        let daemon = RoundDaemon::start(&DaemonConfig::like_pool(job.budget, FAULT_UNIT_US))?;
        let opts = Options {
            stdin: true,
            env: vec![(DAEMON_ENV, Some(daemon.socket().into()))],
        };
        let mut child = child::spawn("bench aim pilot", &Role::AimPilot(job), opts)?;
        let out = child.take_stdout();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.into_iter().flat_map(|o| BufReader::new(o).lines()) {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let pilot = Pilot {
            child,
            lines,
            daemon,
        };
        match pilot.lines.recv_timeout(READY_TIMEOUT) {
            Ok(line) if line == "ready" => Ok(pilot),
            _ => Err(AimError::Pilot("did not say `ready`").into()),
        }
    }

    /// Tells the pilot to stop, checks it and its daemon ended well, and
    /// returns what it did.
    pub fn stop(mut self) -> Result<PilotRun, crate::BenchError> {
        // Its end of input is its stop.
        drop(self.child.take_stdin());
        let line = self
            .lines
            .recv_timeout(STOP_TIMEOUT)
            .map_err(|_| AimError::Pilot("printed no report"))?;
        let run: PilotRun =
            serde_json::from_str(&line).map_err(|source| crate::BenchError::Json {
                what: "bench aim pilot's report".into(),
                source,
            })?;
        match self.child.wait(Some(STOP_TIMEOUT)) {
            Ok(Some(status)) if status.success() => {}
            _ => return Err(AimError::Pilot("did not exit cleanly").into()),
        }
        self.daemon.check_running()?;
        self.daemon.stop()?;
        Ok(run)
    }
}

/// The pilot's side: maps its region (joining the daemon), says `ready`,
/// scans (paced) until its stdin ends, and prints its [`PilotRun`].
pub fn child_main(job: Job) -> BenchResult {
    let backing = Backing::File {
        path: job.file.clone(),
        writable: false,
    };
    let spec = job.program.to_string_lossy();
    let region = Region::map(RegionOptions::new(backing, job.budget as usize, &spec))?;
    let client = Client::current()?.ok_or(AimError::Pilot("its region joined no daemon"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        // Any line, or the end of input, stops the scans.
        let _ = std::io::stdin().read_line(&mut String::new());
        flag.store(true, Ordering::Relaxed);
    });
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready")
            .and_then(|()| out.flush())
            .doing("telling the parent the pilot is ready")?;
    }
    let mut scans = 0u64;
    let mut sum = 0u64;
    'scan: while !stop.load(Ordering::Relaxed) {
        for page in (0..region.len()).step_by(pagepilot_pager::sys::PAGE) {
            if page % (BATCH_PAGES * pagepilot_pager::sys::PAGE) == 0 {
                if stop.load(Ordering::Relaxed) {
                    break 'scan;
                }
                std::thread::sleep(PAUSE);
            }
            // SAFETY: `page` is within the region, mapped read-only until
            // the unmap below.
            sum = sum.wrapping_add(u64::from(unsafe {
                region.as_ptr().add(page).read_volatile()
            }));
        }
        scans += 1;
    }
    std::hint::black_box(sum);
    let stats = region.stats();
    region.unmap()?;
    let run = PilotRun {
        scans,
        faults: stats.missing_faults,
        messages_sent: client.messages_sent(),
    };
    Ok(crate::child::report(&run)?)
}
