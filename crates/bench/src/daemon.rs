//! A pagepilot daemon for one round of a benchmark: this binary re-executed
//! as `pagepilot daemon --foreground`, on a socket in a directory of its
//! own, with a configuration written for the round. The children the round
//! starts join it through `PAGEPILOT_DAEMON` ([`RoundDaemon::socket`]).
//! The daemon is stopped (SIGTERM, then SIGKILL) when the guard is dropped,
//! on every path, errors included, and gets SIGTERM if the bench dies
//! without dropping it (`PR_SET_PDEATHSIG`); every wait is bounded.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pagepilot_pager::sys::PAGE;
pub use pagepilot_pager::DAEMON_ENV;

/// How long the daemon may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long it may take to exit after SIGTERM (it tells its clients and
/// finishes write-backs under way) before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Log lines quoted in an error.
const LOG_TAIL: usize = 12;

/// The daemon's `[machine]` settings (docs/daemon.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DaemonConfig {
    /// Frames it hands out.
    pub budget_frames: u64,
    /// HiPEC's `partition_burst`: frames held above the minimums before
    /// the excess is asked back.
    pub partition_burst_frames: u64,
    /// Time a holder has to give frames back before they are forced, ms.
    pub deadline_ms: u64,
    /// RAPHA's `fault_unit`, us.
    pub fault_unit_us: u64,
    /// RAPHA's system fault period, ms.
    pub fault_period_ms: u64,
}

impl DaemonConfig {
    /// What a `pagepilot_pager::Pool::new(budget_bytes)` does in a process:
    /// the budget in whole frames, the partition burst half of it, 10 ms to
    /// give frames back; RAPHA's system period 100 ms and a fault unit of
    /// `fault_unit_us`.
    pub fn like_pool(budget_bytes: u64, fault_unit_us: u64) -> DaemonConfig {
        let frames = budget_bytes / PAGE as u64;
        DaemonConfig {
            budget_frames: frames,
            partition_burst_frames: frames / 2,
            deadline_ms: 10,
            fault_unit_us,
            fault_period_ms: 100,
        }
    }

    /// The configuration file. The round's processes are all the bench's
    /// user, who owns the machine: its quotas are the whole budget and
    /// processor (the daemon's defaults would keep half for other users).
    pub fn toml(&self) -> String {
        format!(
            "# written by pagepilot bench for one round\n[machine]\nbudget_frames = {}\n\
             partition_burst_frames = {}\ndeadline_ms = {}\nfault_unit_us = {}\n\
             fault_period_ms = {}\n\n[default]\nframes = {}\nfault_rate = {}\n\
             cpu_reserve_ppm = 1000000\nconnections = 1024\ndescriptors = 65536\n",
            self.budget_frames,
            self.partition_burst_frames,
            self.deadline_ms,
            self.fault_unit_us,
            self.fault_period_ms,
            self.budget_frames,
            1u64 << 32,
        )
    }
}

/// The round's daemon could not be run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Its directory, configuration or log could not be made.
    #[error("the benchmark's daemon: {what} {path}")]
    Setup {
        /// What was being made.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// It could not be started.
    #[error("starting the benchmark's daemon: {0}")]
    Spawn(io::Error),
    /// It exited before it listened, or while the round ran.
    #[error("the benchmark's daemon exited ({status}); its log ends:\n{log}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The last lines of its log.
        log: String,
    },
    /// It did not listen in time.
    #[error(
        "the benchmark's daemon did not listen at {socket} within {waited:?}; its log ends:\n{log}"
    )]
    NotListening {
        /// Its socket.
        socket: PathBuf,
        /// How long it was given.
        waited: Duration,
        /// The last lines of its log.
        log: String,
    },
    /// It did not exit on SIGTERM in time (it was killed).
    #[error("the benchmark's daemon did not stop within {0:?} of SIGTERM and was killed")]
    StopTimeout(Duration),
}

/// A daemon running for one round; stopped and its directory removed when
/// dropped.
pub struct RoundDaemon {
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
    log: PathBuf,
}

/// Rounds' directories of this process, numbered.
static NEXT: AtomicU32 = AtomicU32::new(0);

impl RoundDaemon {
    /// Starts `pagepilot daemon --foreground` with `config` and waits until
    /// its socket answers.
    pub fn start(config: &DaemonConfig) -> Result<RoundDaemon, DaemonError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // The CLI tests look for leftovers by this prefix.
        let dir =
            std::env::temp_dir().join(format!("pagepilot-bench-{}-daemon-{n}", std::process::id()));
        let setup = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| DaemonError::Setup { what, path, source }
        };
        std::fs::create_dir_all(&dir).map_err(setup("directory", &dir))?;
        let mut daemon = RoundDaemon {
            child: None,
            socket: dir.join("daemon.sock"),
            log: dir.join("daemon.log"),
            dir,
        };
        let conf = daemon.dir.join("daemon.toml");
        std::fs::write(&conf, config.toml()).map_err(setup("configuration", &conf))?;
        let log = std::fs::File::create(&daemon.log).map_err(setup("log", &daemon.log))?;
        let parent = std::process::id() as libc::pid_t;
        let mut command = Command::new("/proc/self/exe");
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only prctl, getppid and _exit, async-signal-safe, touching
        // no memory of the parent's.
        unsafe {
            command.pre_exec(move || {
                // Killed with the bench even when no destructor runs (the
                // bench killed by a signal), or if it is already gone.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0
                    || libc::getppid() != parent
                {
                    libc::_exit(1);
                }
                Ok(())
            })
        };
        let child = command
            .arg("daemon")
            .arg("--foreground")
            .arg("--socket")
            .arg(&daemon.socket)
            .arg("--config")
            .arg(&conf)
            .env_remove(DAEMON_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(DaemonError::Spawn)?;
        daemon.child = Some(child);
        daemon.wait_listening()?;
        Ok(daemon)
    }

    /// The socket its clients join (`PAGEPILOT_DAEMON`).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Fails if the daemon is no longer running.
    pub fn check_running(&mut self) -> Result<(), DaemonError> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        match child.try_wait().map_err(DaemonError::Spawn)? {
            Some(status) => {
                self.child = None;
                Err(DaemonError::Exited {
                    status,
                    log: self.log_tail(),
                })
            }
            None => Ok(()),
        }
    }

    /// Stops the daemon (SIGTERM) and checks that it exited cleanly.
    pub fn stop(mut self) -> Result<(), DaemonError> {
        self.check_running()?;
        match self.terminate() {
            Some(Ok(status)) if !status.success() => Err(DaemonError::Exited {
                status,
                log: self.log_tail(),
            }),
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    fn wait_listening(&mut self) -> Result<(), DaemonError> {
        let start = Instant::now();
        loop {
            self.check_running()?;
            if UnixStream::connect(&self.socket).is_ok() {
                return Ok(());
            }
            if start.elapsed() >= START_TIMEOUT {
                return Err(DaemonError::NotListening {
                    socket: self.socket.clone(),
                    waited: START_TIMEOUT,
                    log: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, a bounded wait, then SIGKILL; `None` when there was no
    /// daemon left to stop.
    fn terminate(&mut self) -> Option<Result<ExitStatus, DaemonError>> {
        let mut child = self.child.take()?;
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) takes no pointer; `pid` is our own child,
            // not yet reaped (so not a recycled pid).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
            match child.try_wait() {
                Ok(Some(status)) => return Some(Ok(status)),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Some(Err(DaemonError::Spawn(e))),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        Some(Err(DaemonError::StopTimeout(STOP_TIMEOUT)))
    }

    /// The last lines of its log.
    fn log_tail(&self) -> String {
        log_tail(
            &std::fs::read_to_string(&self.log).unwrap_or_default(),
            LOG_TAIL,
        )
    }
}

impl Drop for RoundDaemon {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.terminate() {
            let _ = writeln!(
                io::stderr(),
                "pagepilot bench: {}",
                pagepilot_policy::chain(&e)
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The last `n` lines of `text`.
fn log_tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_pools_defaults_are_written_as_the_daemons_machine() {
        let c = DaemonConfig::like_pool(32 << 20, 100);
        assert_eq!(c.budget_frames, 8192);
        assert_eq!(c.partition_burst_frames, 4096);
        assert_eq!(c.deadline_ms, 10);
        let t = c.toml();
        for line in [
            "[machine]",
            "budget_frames = 8192",
            "partition_burst_frames = 4096",
            "deadline_ms = 10",
            "fault_unit_us = 100",
            "fault_period_ms = 100",
        ] {
            assert!(t.lines().any(|l| l == line), "{line} missing from {t}");
        }
    }

    #[test]
    fn test_the_log_tail_keeps_the_last_lines() {
        assert_eq!(log_tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(log_tail("a\n", 5), "a");
        assert_eq!(log_tail("", 3), "");
    }
}
