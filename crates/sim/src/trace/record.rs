//! Recording a page trace of a real program under `valgrind --tool=lackey`.
//!
//! Lackey's log goes to a pipe whose other end this process parses while
//! the program runs, so the raw lackey text (many gigabytes for a few
//! seconds of execution) is never stored: only the page trace is written.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use super::binary::{BinaryWriter, Written};
use super::lackey::{self, ParseInto};
use super::text::TextWriter;
use super::{Collapse, Format, LoadOptions, TraceError, TraceSink};

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Page size, instruction fetches and repeat collapsing, as for reading
    /// lackey output (`format` is ignored).
    pub lackey: LoadOptions,
    /// Output format: [`Format::Binary`] or [`Format::Text`].
    pub format: Format,
    /// The Valgrind executable.
    pub valgrind: PathBuf,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            lackey: LoadOptions::default(),
            format: Format::Binary,
            valgrind: "valgrind".into(),
        }
    }
}

/// A finished recording.
#[derive(Debug)]
pub struct Recorded {
    /// What went into the trace.
    pub written: Written,
    /// How the program (and so Valgrind) exited.
    pub status: ExitStatus,
}

/// Why recording failed. The partial output file is removed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Options no recorder can honour.
    #[error(transparent)]
    Options(TraceError),
    /// No command was given.
    #[error("no command to record (usage: pagepilot trace record -o OUT -- CMD ARGS...)")]
    NoCommand,
    /// Valgrind could not be started.
    #[error("cannot run {} (is valgrind installed?)", valgrind.display())]
    Spawn {
        /// The executable tried.
        valgrind: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The pipe to Valgrind could not be set up or read.
    #[error("pipe from valgrind: {0}")]
    Pipe(std::io::Error),
    /// The output could not be written.
    #[error("{}", path.display())]
    Output {
        /// The output file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Lackey's output was not understood (the program was stopped).
    #[error("lackey output: {0}")]
    Lackey(TraceError),
    /// The program made no memory references (it probably never started).
    #[error("no references were recorded; valgrind exited with {status}")]
    Empty {
        /// Valgrind's exit status.
        status: ExitStatus,
    },
}

/// Runs `command` under lackey and writes its page trace to `out`
/// (zstd-compressed if `out` ends in `.zst`).
pub fn record(
    command: &[OsString],
    out: &Path,
    options: &RecordOptions,
) -> Result<Recorded, RecordError> {
    options.lackey.check().map_err(RecordError::Options)?;
    if command.is_empty() {
        return Err(RecordError::NoCommand);
    }
    if !options.format.writable() {
        return Err(RecordError::Options(TraceError::Unwritable {
            format: options.format,
        }));
    }
    let result = record_to(command, out, options);
    if result.is_err() {
        let _ = std::fs::remove_file(out);
        let _ = std::fs::remove_file(partial_path(out));
    }
    result
}

fn partial_path(out: &Path) -> PathBuf {
    let mut p = out.as_os_str().to_owned();
    p.push(".partial");
    p.into()
}

fn record_to(
    command: &[OsString],
    out: &Path,
    options: &RecordOptions,
) -> Result<Recorded, RecordError> {
    let output = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RecordError::Output {
            path: path.clone(),
            source,
        }
    };
    let zst = super::source::is_zst_name(out);
    let page_size = options.lackey.page_size;
    match (options.format, zst) {
        (Format::Text, false) => {
            let file = File::create(out).map_err(output(out))?;
            let w = TextWriter::new(BufWriter::with_capacity(1 << 20, file), Some(page_size))
                .map_err(output(out))?;
            let (w, recorded) = run(command, options, w, out)?;
            w.finish().map_err(output(out))?;
            Ok(recorded)
        }
        (Format::Text, true) => {
            let file = File::create(out).map_err(output(out))?;
            let enc = zstd::Encoder::new(BufWriter::new(file), 3).map_err(output(out))?;
            let w = TextWriter::new(enc, Some(page_size)).map_err(output(out))?;
            let (w, recorded) = run(command, options, w, out)?;
            let enc = w.finish().map_err(output(out))?;
            enc.finish()
                .and_then(|mut f| f.flush())
                .map_err(output(out))?;
            Ok(recorded)
        }
        (_, false) => {
            let file = File::create(out).map_err(output(out))?;
            let w = BinaryWriter::new(BufWriter::with_capacity(1 << 20, file), page_size)
                .map_err(output(out))?;
            let (w, mut recorded) = run(command, options, w, out)?;
            recorded.written = w.finish().map_err(output(out))?;
            Ok(recorded)
        }
        (_, true) => {
            // The binary writer completes its header by seeking back, which
            // a compressed stream cannot; compress once the trace is done.
            let partial = partial_path(out);
            let file = File::create(&partial).map_err(output(&partial))?;
            let w = BinaryWriter::new(BufWriter::with_capacity(1 << 20, file), page_size)
                .map_err(output(&partial))?;
            let (w, mut recorded) = run(command, options, w, out)?;
            recorded.written = w.finish().map_err(output(&partial))?;
            let trace = super::load(&partial).map_err(RecordError::Lackey)?;
            super::save(&trace, out, Format::Binary).map_err(|e| match e {
                TraceError::Io { path, source } => RecordError::Output { path, source },
                other => RecordError::Lackey(other),
            })?;
            std::fs::remove_file(&partial).map_err(output(&partial))?;
            Ok(recorded)
        }
    }
}

/// Counts what passes into a sink, for writers that count nothing.
struct Counting<S> {
    inner: S,
    written: Written,
    seen: std::collections::HashSet<u64, super::hash::VpnHash>,
}

impl<S: TraceSink> TraceSink for Counting<S> {
    fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        self.written.references += 1;
        self.written.writes += u64::from(write);
        if self.seen.insert(vpn) {
            self.written.pages += 1;
        }
        self.inner.reference(vpn, write)
    }
}

/// Spawns Valgrind on `command` with its log on a pipe and feeds the parsed
/// references to `sink` until Valgrind closes the pipe.
fn run<S: TraceSink>(
    command: &[OsString],
    options: &RecordOptions,
    sink: S,
    out: &Path,
) -> Result<(S, Recorded), RecordError> {
    let (reader, writer) = std::io::pipe().map_err(RecordError::Pipe)?;
    let fd = writer.as_raw_fd();
    inherit(fd).map_err(RecordError::Pipe)?;
    let mut child = Command::new(&options.valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg(format!("--log-fd={fd}"))
        .arg("--")
        .args(command)
        .stdin(Stdio::inherit())
        .spawn()
        .map_err(|source| RecordError::Spawn {
            valgrind: options.valgrind.clone(),
            source,
        })?;
    // Only Valgrind may hold the write end, or the pipe never reports EOF.
    drop(writer);

    let counting = Counting {
        inner: sink,
        written: Written {
            references: 0,
            pages: 0,
            writes: 0,
        },
        seen: Default::default(),
    };
    let mut collapse = Collapse::new(counting, options.lackey.collapse_repeats);
    let input = BufReader::with_capacity(super::source::BUFFER, reader);
    let parsed = lackey::parse_into(
        input,
        Path::new("<valgrind lackey log>"),
        &options.lackey,
        &mut collapse,
    );
    if let Err(e) = parsed {
        let _ = child.kill();
        let _ = child.wait();
        return Err(match e {
            ParseInto::Trace(TraceError::Io { source, .. }) => RecordError::Pipe(source),
            ParseInto::Trace(t) => RecordError::Lackey(t),
            ParseInto::Sink(source) => RecordError::Output {
                path: out.into(),
                source,
            },
        });
    }
    let status = child.wait().map_err(RecordError::Pipe)?;
    let counting = collapse.finish().map_err(|source| RecordError::Output {
        path: out.into(),
        source,
    })?;
    if counting.written.references == 0 {
        return Err(RecordError::Empty { status });
    }
    Ok((
        counting.inner,
        Recorded {
            written: counting.written,
            status,
        },
    ))
}

/// Lets child processes inherit `fd` (pipes are created close-on-exec).
fn inherit(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl(F_SETFD) on a descriptor this function's caller owns;
    // it only changes that descriptor's flags.
    let r = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    if r == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
