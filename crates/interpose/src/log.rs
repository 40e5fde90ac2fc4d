//! The log of what was taken over, what was left to the kernel and why,
//! and each region's counts at its end: one line per event, written with
//! one `write(2)` (lines from several processes interleave whole).

use std::fmt::Arguments;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// Where log lines go.
pub enum Log {
    /// Nowhere (no `--log`, no `-v`).
    Off,
    /// Standard error.
    Stderr,
    /// A file opened for appending.
    File(OwnedFd),
}

impl Log {
    /// The log `path` names (`-`: stderr); `None`: off. A file that cannot
    /// be opened is said once on stderr, and the log goes there.
    pub fn open(path: Option<&Path>) -> Log {
        let Some(path) = path else { return Log::Off };
        if path == Path::new("-") {
            return Log::Stderr;
        }
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => Log::File(f.into()),
            Err(e) => {
                eprintln!(
                    "pagepilot-run: cannot open the log {}: {e}; logging to stderr",
                    path.display()
                );
                Log::Stderr
            }
        }
    }

    /// Writes one line, `pagepilot-run[PID]: ...`.
    pub fn line(&self, args: Arguments<'_>) {
        let fd = match self {
            Log::Off => return,
            Log::Stderr => 2,
            Log::File(f) => f.as_raw_fd(),
        };
        let mut line = Vec::with_capacity(160);
        let _ = writeln!(line, "pagepilot-run[{}]: {args}", std::process::id());
        // SAFETY: `line` is a live buffer of `line.len()` bytes; `fd` is
        // stderr or the log's own descriptor.
        unsafe { crate::real::write(fd, line.as_ptr().cast(), line.len()) };
    }
}
