//! The one way a benchmark runs a child of its own binary: the parent
//! describes the child's work as a [`Role`], [`spawn`] re-executes the
//! running binary as `pagepilot bench internal-child <role as JSON>`, and
//! [`Running::finish`] waits for it (at most a time limit) and parses the
//! last line it printed, which the child side writes with [`report`].
//!
//! Children exist where a measurement must not share the parent's process:
//! the kernel's side inside a memory cgroup of the budget, a side whose fork
//! handler is process-wide, a fresh process per size, processes joined to a
//! daemon.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::BenchResult;

/// The running binary, even when a rebuild has replaced (unlinked) its file meanwhile.
const EXE: &str = "/proc/self/exe";

/// The hidden bench subcommand that runs a child's [`Role`].
pub const SUBCOMMAND: &str = "internal-child";

/// What a child of the bench is to do, and with what: one variant per kind of child.
#[derive(Serialize, Deserialize)]
#[serde(tag = "role", content = "job", rename_all = "kebab-case")]
pub enum Role {
    /// A workload over the kernel's mapping of a file in a memory cgroup (`bench join|scan`).
    Kernel(crate::kernel::ChildJob),
    /// One side's forks (`bench fork`).
    Fork(crate::fork::Job),
    /// One variant of the forked fill (`bench parallel-fill`).
    ParallelFill(crate::parallel_fill::Job),
    /// One size of one row (`bench scale`).
    Scale(crate::scale::Job),
    /// Both joins over the kernel's mappings in one cgroup (`bench share`).
    ShareKernel(crate::share::ChildJob),
    /// One join joined to a daemon (`bench share`).
    ShareDaemon(crate::share::DaemonJob),
    /// The decoder or the launcher (`bench rapha`).
    Rapha(crate::rapha::Job),
    /// A simulated user (`bench aim`).
    AimWorker(crate::aim::WorkerJob),
    /// The region beside them under a daemon (`bench aim`).
    AimPilot(crate::aim::PilotJob),
}

impl Role {
    /// Runs the role in this process: the child's side.
    pub fn run(self) -> BenchResult {
        match self {
            Role::Kernel(job) => Ok(crate::kernel::child_main(job)?),
            Role::Fork(job) => crate::fork::child_main(job),
            Role::ParallelFill(job) => crate::parallel_fill::child_main(job),
            Role::Scale(job) => Ok(crate::scale::child_main(job)?),
            Role::ShareKernel(job) => crate::share::child_main(job),
            Role::ShareDaemon(job) => crate::share::daemon_child_main(job),
            Role::Rapha(job) => crate::rapha::child_main(job),
            Role::AimWorker(job) => crate::aim::worker_main(job),
            Role::AimPilot(job) => crate::aim::pilot_main(job),
        }
    }
}

/// Arguments of the hidden `pagepilot bench internal-child`.
#[derive(clap::Args)]
pub struct Args {
    /// The [`Role`], as JSON.
    job: String,
}

/// Runs the child side of `pagepilot bench internal-child`.
pub fn main(args: Args) -> BenchResult {
    let role: Role = serde_json::from_str(&args.job).map_err(|source| ChildError::Job {
        role: "child",
        source,
    })?;
    role.run()
}

/// The child side's result: one JSON line on standard output, the line the parent parses.
pub fn report<T: Serialize>(value: &T) -> Result<(), ChildError> {
    let line = serde_json::to_string(value).map_err(|source| ChildError::Job {
        role: "child",
        source,
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|source| ChildError::Io {
            role: "child",
            source,
        })
}

/// A child that could not be run, or whose result could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// Starting it, or talking to it, failed.
    #[error("{role} child")]
    Io {
        /// What the child was for.
        role: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The job could not be written, or the report not read.
    #[error("{role} child: its job or report is not the JSON expected")]
    Job {
        /// What the child was for.
        role: &'static str,
        /// The parse error.
        source: serde_json::Error,
    },
    /// It ran past its time limit and was killed, where the caller counts that a failure.
    #[error("{role} child killed after {after:?} (its time limit)")]
    TimedOut {
        /// What the child was for.
        role: &'static str,
        /// Its limit.
        after: Duration,
    },
    /// It exited with a failure (its stderr was passed through); SIGKILL too where the
    /// caller counts that a failure.
    #[error("{role} child failed ({status})")]
    Failed {
        /// What the child was for.
        role: &'static str,
        /// Its exit status.
        status: ExitStatus,
    },
}

/// How a child is started beside its role.
#[derive(Default)]
pub struct Options {
    /// A pipe to its standard input (else `/dev/null`).
    pub stdin: bool,
    /// Environment variables set (`Some`) or removed (`None`).
    pub env: Vec<(&'static str, Option<OsString>)>,
}

/// How a child ended, when it did not fail otherwise.
pub enum Exit<T> {
    /// It exited with success and printed this as its last line.
    Reported(T),
    /// It was killed by SIGKILL: a memory cgroup's OOM killer, an outcome of what it
    /// measured rather than a failure of the benchmark.
    Killed(ExitStatus),
    /// It ran past its time limit and was killed.
    TimedOut(Duration),
}

/// A child started by [`spawn`].
pub struct Running {
    child: Child,
    role: &'static str,
}

/// Starts a child running `role`; `name` names it in errors.
pub fn spawn(name: &'static str, role: &Role, opts: Options) -> Result<Running, ChildError> {
    let job =
        serde_json::to_string(role).map_err(|source| ChildError::Job { role: name, source })?;
    let mut command = Command::new(EXE);
    command.args(["bench", SUBCOMMAND, &job]);
    for (key, value) in opts.env {
        match value {
            Some(v) => command.env(key, v),
            None => command.env_remove(key),
        };
    }
    let child = command
        .stdin(if opts.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| ChildError::Io { role: name, source })?;
    Ok(Running { child, role: name })
}

/// [`spawn`] with the default [`Options`], then [`Running::finish`].
pub fn run<T: DeserializeOwned>(
    name: &'static str,
    role: &Role,
    timeout: Option<Duration>,
) -> Result<Exit<T>, ChildError> {
    spawn(name, role, Options::default())?.finish(timeout)
}

impl Running {
    /// Its standard output, for a child that talks before its report.
    pub fn stdout(&mut self) -> Option<&mut ChildStdout> {
        self.child.stdout.as_mut()
    }

    /// Takes its standard input (with [`Options::stdin`]).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Takes its standard output, for a caller that reads it all itself.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Waits for it to exit, at most `timeout` (then kills and reaps it: `None`).
    pub fn wait(&mut self, timeout: Option<Duration>) -> std::io::Result<Option<ExitStatus>> {
        wait_for(&mut self.child, timeout)
    }

    /// Waits for it to exit, at most `timeout` (then kills and reaps it), and parses the last
    /// non-empty line it printed. Its output is read meanwhile, so it never blocks on a full
    /// pipe.
    pub fn finish<T: DeserializeOwned>(
        mut self,
        timeout: Option<Duration>,
    ) -> Result<Exit<T>, ChildError> {
        let role = self.role;
        let io = |source| ChildError::Io { role, source };
        let reader = self.child.stdout.take().map(|mut out| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                out.read_to_end(&mut text).map(|_| text)
            })
        });
        let status = match wait_for(&mut self.child, timeout).map_err(io)? {
            Some(status) => status,
            None => return Ok(Exit::TimedOut(timeout.unwrap_or_default())),
        };
        let text = match reader {
            Some(r) => r
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("reader panicked")))
                .map_err(io)?,
            None => Vec::new(),
        };
        if status.signal() == Some(libc::SIGKILL) {
            return Ok(Exit::Killed(status));
        }
        if !status.success() {
            return Err(ChildError::Failed { role, status });
        }
        let last = BufReader::new(&text[..])
            .lines()
            .map_while(Result::ok)
            .filter(|l| !l.trim().is_empty())
            .last()
            .unwrap_or_default();
        serde_json::from_str(&last)
            .map(Exit::Reported)
            .map_err(|source| ChildError::Job { role, source })
    }
}

impl Drop for Running {
    /// A child never outlives its handle: on an early return of its parent it is killed
    /// and reaped.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits for `child` to exit, at most `timeout` (then kills and reaps it: `None`).
fn wait_for(child: &mut Child, timeout: Option<Duration>) -> std::io::Result<Option<ExitStatus>> {
    let Some(timeout) = timeout else {
        return child.wait().map(Some);
    };
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl<T> Exit<T> {
    /// The report, with a killed or timed-out child as a failure of `role`.
    pub fn reported(self, role: &'static str) -> Result<T, ChildError> {
        match self {
            Exit::Reported(t) => Ok(t),
            Exit::Killed(status) => Err(ChildError::Failed { role, status }),
            Exit::TimedOut(after) => Err(ChildError::TimedOut { role, after }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_role_survives_the_command_line() {
        use crate::scale::{Backing, Order, Side};
        let job = crate::scale::Job {
            side: Side::Kernel,
            backing: Backing::Anon,
            order: Order::Random,
            size: 1 << 30,
            budget: 1 << 20,
            touches: 3,
            seed: 7,
            file: None,
            cgroup: Some("/sys/fs/cgroup/memory/x".into()),
            madvise_random: true,
        };
        let text = serde_json::to_string(&Role::Scale(job)).unwrap();
        assert!(text.contains("\"role\":\"scale\""), "{text}");
        let back: Role = serde_json::from_str(&text).unwrap();
        assert!(matches!(back, Role::Scale(j) if j.touches == 3 && j.madvise_random));
    }

    #[test]
    fn test_finish_parses_the_last_line_and_names_failures() {
        let sh = |script: &str| Running {
            child: Command::new("sh")
                .args(["-c", script])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
            role: "test",
        };
        let got: Exit<u32> = sh("echo ready; echo 7").finish(None).unwrap();
        assert!(matches!(got, Exit::Reported(7)));
        let failed = sh("exit 3").finish::<u32>(None);
        assert!(matches!(failed, Err(ChildError::Failed { .. })));
        let killed = sh("kill -9 $$").finish::<u32>(None).unwrap();
        assert!(matches!(killed, Exit::Killed(_)));
        let slow = sh("sleep 5").finish::<u32>(Some(Duration::from_millis(50)));
        assert!(matches!(slow, Ok(Exit::TimedOut(_))));
    }

    #[test]
    fn test_finish_reads_more_than_a_pipe_holds() {
        // 1 MiB before the report: a wait before reading would block the child forever.
        let child = Command::new("sh")
            .args(["-c", "head -c 1048576 /dev/zero | tr '\\0' x; echo; echo 5"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let running = Running {
            child,
            role: "test",
        };
        let got = running
            .finish::<u32>(Some(Duration::from_secs(30)))
            .unwrap();
        assert!(matches!(got, Exit::Reported(5)));
    }
}
