//! One run of a command in a fresh memory cgroup of the limit, from a cold page cache: the
//! child joins the cgroup between fork and exec (so the program, everything it starts and
//! the memory they charge are inside), and is reaped with `wait4`, whose `rusage` gives
//! the bytes read from the disk.
//!
//! Bytes read are `ru_inblock * 512` of the reaped child: the kernel counts a process's
//! block reads over all its threads (the pager's handler threads included), and adds those
//! of every descendant it waited for (the `rg` processes of the shell), where
//! `/proc/PID/io` would have to be read before the reap and misses the descendants.

use std::ffi::{CStr, CString, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cgroup::{self, MemCgroup};
use crate::cold::make_cold;
use crate::error::IoContext;
use crate::BenchError;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "end", rename_all = "kebab-case")]
pub enum End {
    /// It exited with this code (0: success).
    Exited {
        /// The exit code.
        code: i32,
    },
    /// The cgroup's OOM killer killed it: the limit did not hold what the row needs.
    OomKilled,
    /// Another signal ended it.
    Signaled {
        /// The signal.
        signal: i32,
    },
    /// It ran past `--timeout-s` and was killed.
    TimedOut,
}

/// What one run measured.
pub struct Ran {
    /// From just before the fork to the reap.
    pub wall: Duration,
    /// How it ended.
    pub end: End,
    /// `ru_inblock * 512`: bytes read from the disk by it and its descendants.
    pub bytes_read: u64,
    /// `ru_majflt`: its major faults (the kernel's page-ins of mappings).
    pub major_faults: u64,
    /// The cgroup's peak charge.
    pub peak_bytes: u64,
    /// Its standard output.
    pub stdout: String,
    /// The end of its standard error.
    pub stderr_tail: String,
}

/// Runs `argv` with `env` added, in a new memory cgroup of `limit` bytes, after a sync and
/// a drop of the whole page cache (and of `cold`'s pages); kills it after `timeout`.
pub fn run(
    argv: &[OsString],
    env: &[(String, String)],
    limit: u64,
    cold: &[&Path],
    timeout: Duration,
) -> Result<Ran, BenchError> {
    let cg = MemCgroup::create(limit as usize)?;
    let procs = cg.dir().join("cgroup.procs");
    let procs_c = CString::new(procs.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        .on("naming", &procs)?;
    make_cold(cold, true).doing("dropping the page cache")?;
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the hook runs in the child between fork and exec and only calls open, write
    // and close (async-signal-safe) on a path allocated before the fork.
    unsafe {
        command.pre_exec(move || join(&procs_c));
    }
    let start = Instant::now();
    let mut child = command.spawn().on("starting", &argv[0])?;
    let pid = child.id() as libc::pid_t;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reaped = reap(pid);
        let _ = tx.send((reaped, Instant::now()));
    });
    let (reaped, ended, timed_out) = match rx.recv_timeout(timeout) {
        Ok((r, at)) => (r, at, false),
        Err(_) => {
            kill_all(&procs);
            let (r, at) = rx
                .recv()
                .map_err(|_| io::Error::other("the reaper thread vanished"))
                .doing("waiting for a run")?;
            (r, at, true)
        }
    };
    let (status, usage) = reaped.doing("waiting for a run")?;
    let text = |h: std::thread::JoinHandle<Vec<u8>>| h.join().unwrap_or_default();
    let (stdout, stderr) = (text(stdout), text(stderr));
    let end = if timed_out {
        End::TimedOut
    } else if libc::WIFEXITED(status) {
        End::Exited {
            code: libc::WEXITSTATUS(status),
        }
    } else if libc::WTERMSIG(status) == libc::SIGKILL && oom_kills(cg.dir()) > 0 {
        End::OomKilled
    } else {
        End::Signaled {
            signal: libc::WTERMSIG(status),
        }
    };
    Ok(Ran {
        wall: ended.duration_since(start),
        end,
        bytes_read: (usage.ru_inblock as u64) * 512,
        major_faults: usage.ru_majflt as u64,
        peak_bytes: cgroup::max_usage(cg.dir())?,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr_tail: super::data::tail(&stderr),
    })
}

/// The child's side: joins the cgroup whose `cgroup.procs` is `procs` (`0` is the writer).
fn join(procs: &CStr) -> io::Result<()> {
    // SAFETY: procs is NUL-terminated; open, write and close are async-signal-safe, and the
    // descriptor is closed on every path.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != 1 {
            return Err(err);
        }
    }
    Ok(())
}

/// Waits for the child `pid` and returns its status and resource usage.
fn reap(pid: libc::pid_t) -> io::Result<(i32, libc::rusage)> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data; zeroed is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is this process's child, reaped only here; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads a pipe to its end on a thread of its own (a full pipe must never block the child).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Kills every process in the cgroup (the run and whatever it started), by their ids.
fn kill_all(procs: &Path) {
    for _ in 0..50 {
        let text = std::fs::read_to_string(procs).unwrap_or_default();
        let pids: Vec<libc::pid_t> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            // SAFETY: kill has no memory effects; the pids are this run's processes.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The cgroup's OOM kills so far (`oom_kill` of `memory.oom_control`).
fn oom_kills(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("memory.oom_control"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}
