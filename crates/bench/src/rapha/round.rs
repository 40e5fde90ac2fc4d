//! One configuration of one round: the decoder starts alone, the launcher
//! is launched beside it after a while, and when the launcher is done the
//! decoder is stopped (once it has caught up with its releases). Both are
//! children of the bench: this binary re-executed ([`crate::child`]). Under
//! [`Config::RaphaDaemon`] the round starts a daemon first, both children
//! join it, and it is stopped after them (on errors too).

use crate::error::IoContext;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::job::{now_ns, Config, DecoderJob, DecoderOut, Job, LauncherJob, LauncherOut, Mapping};
use crate::cgroup::MemCgroup;
use crate::child::{self, ChildError, Options, Role, Running};
use crate::daemon::{DaemonConfig, RoundDaemon, DAEMON_ENV};

/// A child that failed.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// It could not be started or talked to.
    #[error("rapha {role}")]
    Io {
        /// `decoder` or `launcher`.
        role: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// It could not be started, failed (its stderr was passed through; killed by its
    /// cgroup's OOM killer?) or printed no report.
    #[error(transparent)]
    Child(#[from] ChildError),
    /// The decoder did not say it was ready.
    #[error("rapha decoder exited before it was ready")]
    NotReady,
    /// Setting up the kernel side failed.
    #[error(transparent)]
    Cgroup(#[from] crate::cgroup::CgroupError),
    /// The round's daemon failed.
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
}

/// The two tasks' setup for one configuration.
pub struct Setup {
    /// The decoder's job (its mapping is replaced per configuration).
    pub decoder: DecoderJob,
    /// The launcher's.
    pub launcher: LauncherJob,
    /// The launcher's fault limit per period, for [`Config::Rapha`].
    pub launcher_limit: (u64, u64),
    /// The decoder's processor reserve and its fault limit per period
    /// (ns), which its region declares under [`Config::RaphaDaemon`].
    pub decoder_reserve: (f64, (u64, u64)),
    /// RAPHA's `fault_unit`, us: the daemon's, for [`Config::RaphaDaemon`].
    pub fault_unit_us: u64,
    /// How long the decoder runs alone first.
    pub alone: Duration,
    /// Whether the kernel baseline can run here (root): caches are then dropped.
    pub root: bool,
}

/// What one configuration measured.
#[derive(Debug)]
pub struct ConfigRun {
    /// Which.
    pub config: Config,
    /// When the launcher was started, ns on the shared clock.
    pub launch_ns: u64,
    /// The decoder's report.
    pub decoder: DecoderOut,
    /// The launcher's.
    pub launcher: LauncherOut,
}

/// Runs `config` once.
pub fn run(config: Config, setup: &Setup) -> Result<ConfigRun, crate::BenchError> {
    crate::cold::make_cold(&[&setup.decoder.file, &setup.launcher.file], setup.root)
        .doing("dropping the cached pages of the data files")?;
    let mut decoder = setup.decoder.clone();
    let mut launcher = setup.launcher.clone();
    // The kernel's cgroups live until both children are gone.
    let mut cgroups = Vec::new();
    match config {
        Config::Kernel => {
            for (job_mapping, budget) in [
                (&mut decoder.mapping, decoder.budget),
                (&mut launcher.mapping, launcher.budget),
            ] {
                let cg = MemCgroup::create(budget as usize)?;
                *job_mapping = Mapping::Kernel {
                    cgroup: cg.dir().to_path_buf(),
                };
                cgroups.push(cg);
            }
        }
        Config::Pagepilot | Config::Rapha | Config::RaphaDaemon => {
            let limited = config != Config::Pagepilot;
            let (reserve, decoder_limit) = match config {
                // Declared to the daemon, which admits it (a reserve comes
                // with a fault limit); in process, the bench derived the
                // launcher's limit from it and the decoder declares nothing.
                Config::RaphaDaemon => (setup.decoder_reserve.0, Some(setup.decoder_reserve.1)),
                _ => (0.0, None),
            };
            decoder.mapping = Mapping::Pagepilot {
                limit: decoder_limit,
                handlers: 0,
                reserve,
            };
            // A handler per launcher thread: as many of its faults served
            // at once as the kernel serves (each in its faulting thread).
            launcher.mapping = Mapping::Pagepilot {
                limit: limited.then_some(setup.launcher_limit),
                handlers: launcher.threads,
                reserve: 0.0,
            };
        }
    }
    // Stopped when dropped, whatever happens below.
    let daemon = match config {
        Config::RaphaDaemon => {
            let both = decoder.budget + launcher.budget;
            let config = DaemonConfig::like_pool(both, setup.fault_unit_us);
            Some(RoundDaemon::start(&config)?)
        }
        _ => None,
    };
    let socket = daemon.as_ref().map(|d| d.socket().to_path_buf());
    let socket = socket.as_deref();
    let mut dec = spawn(Job::Decoder(decoder), true, "rapha decoder", socket)?;
    // On an error the decoder is killed and reaped as it is dropped (before its cgroup).
    let (launch_ns, launcher_out) = beside(&mut dec, &launcher, setup.alone, socket)?;
    drop(dec.take_stdin());
    let decoder_out: DecoderOut = finish(dec, "rapha decoder")?;
    drop(cgroups);
    if let Some(mut d) = daemon {
        // It must have served the whole round.
        d.check_running()?;
        d.stop()?;
    }
    Ok(ConfigRun {
        config,
        launch_ns,
        decoder: decoder_out,
        launcher: launcher_out,
    })
}

/// Waits for the decoder to be ready, lets it run alone, then runs the
/// launcher to its end.
fn beside(
    dec: &mut Running,
    launcher: &LauncherJob,
    alone: Duration,
    daemon: Option<&Path>,
) -> Result<(u64, LauncherOut), crate::BenchError> {
    let stdout = dec.stdout().ok_or(RoundError::NotReady)?;
    // One byte at a time: the rest of the stream is the decoder's report.
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while byte[0] != b'\n' {
        let n = stdout.read(&mut byte).map_err(|source| RoundError::Io {
            role: "decoder",
            source,
        })?;
        if n == 0 {
            return Err(RoundError::NotReady.into());
        }
        line.push(byte[0]);
    }
    if line != b"ready\n" {
        return Err(RoundError::NotReady.into());
    }
    std::thread::sleep(alone);
    let launch_ns = now_ns();
    let child = spawn(
        Job::Launcher(launcher.clone()),
        false,
        "rapha launcher",
        daemon,
    )?;
    Ok((launch_ns, finish(child, "rapha launcher")?))
}

/// Starts a child, joined to the daemon at `daemon` if given.
fn spawn(
    job: Job,
    stdin: bool,
    role: &'static str,
    daemon: Option<&Path>,
) -> Result<Running, ChildError> {
    let opts = Options {
        stdin,
        env: vec![(DAEMON_ENV, daemon.map(Into::into))],
    };
    child::spawn(role, &Role::Rapha(job), opts)
}

/// Waits for `child` and parses the last line it printed.
fn finish<T: DeserializeOwned>(child: Running, role: &'static str) -> Result<T, ChildError> {
    child.finish(None)?.reported(role)
}
