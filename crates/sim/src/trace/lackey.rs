//! Raw `valgrind --tool=lackey --trace-mem=yes` output.
//!
//! Records: `I  addr,size` (instruction fetch), ` L addr,size` (load),
//! ` S addr,size` (store), ` M addr,size` (modify: load and store of the same
//! bytes, one write reference per page). Addresses are hex without `0x`,
//! sizes decimal. `==pid==` and `--pid--` lines are Valgrind's own messages
//! and are skipped. An access that spans a page boundary references every
//! page it touches, in address order.

use std::io::BufRead;
use std::path::Path;

use super::sink::Batched;

use super::lines::{for_each_line, parse_dec, parse_hex, show};
use super::{Collapse, LoadOptions, Trace, TraceError, TraceSink};

/// The most pages one access may touch: sizes come from untrusted input.
pub const MAX_PAGES_PER_ACCESS: u64 = 4096;

/// What one lackey line was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A Valgrind message or blank line.
    Skip,
    /// An instruction fetch.
    Instruction,
    /// A data load.
    Load,
    /// A data store.
    Store,
    /// A data load and store of the same bytes.
    Modify,
}

/// Turns lackey lines into page references.
#[derive(Clone, Debug)]
pub struct LackeyParser {
    shift: u32,
    instructions: bool,
}

impl LackeyParser {
    /// A parser with `options`' page size and instruction setting.
    pub fn new(options: &LoadOptions) -> Self {
        LackeyParser {
            shift: options.page_shift(),
            instructions: options.instructions,
        }
    }

    /// Parses one line (without its `\n`), calling `emit(vpn, write)` for
    /// each page it references; returns what kind of line it was, or what
    /// was wrong with it.
    #[inline]
    pub fn line(&self, line: &[u8], mut emit: impl FnMut(u64, bool)) -> Result<Record, String> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.starts_with(b"==") || line.starts_with(b"--") || line.trim_ascii().is_empty() {
            return Ok(Record::Skip);
        }
        let body = line.trim_ascii_start();
        let (record, write) = match body.first() {
            Some(b'I') => (Record::Instruction, false),
            Some(b'L') => (Record::Load, false),
            Some(b'S') => (Record::Store, true),
            Some(b'M') => (Record::Modify, true),
            _ => return Err(expected(line)),
        };
        let rest = &body[1..];
        if !rest.first().is_some_and(u8::is_ascii_whitespace) {
            return Err(expected(line));
        }
        let rest = rest.trim_ascii();
        let Some(comma) = rest.iter().position(|&b| b == b',') else {
            return Err(expected(line));
        };
        let Some(addr) = parse_hex(&rest[..comma]) else {
            return Err(format!("bad address in `{}`", show(line)));
        };
        let Some(size) = parse_dec(&rest[comma + 1..]) else {
            return Err(format!("bad access size in `{}`", show(line)));
        };
        if record == Record::Instruction && !self.instructions {
            return Ok(record);
        }
        let last = addr.checked_add(size.max(1) - 1).ok_or_else(|| {
            format!(
                "access runs past the end of the address space: `{}`",
                show(line)
            )
        })?;
        let (first, last) = (addr >> self.shift, last >> self.shift);
        if last - first >= MAX_PAGES_PER_ACCESS {
            return Err(format!(
                "access of {size} bytes spans more than {MAX_PAGES_PER_ACCESS} pages: `{}`",
                show(line)
            ));
        }
        for vpn in first..=last {
            emit(vpn, write);
        }
        Ok(record)
    }
}

fn expected(line: &[u8]) -> String {
    format!(
        "expected a lackey record (`I  addr,size`, ` L`, ` S` or ` M addr,size`) or a \
         `==pid==` message, found `{}`",
        show(line)
    )
}

/// Reads lackey output from `input` into a trace with `options` (page size,
/// instruction fetches, repeat collapsing); `path` names the source in errors.
pub fn read(input: impl BufRead, path: &Path, options: &LoadOptions) -> Result<Trace, TraceError> {
    let parser = LackeyParser::new(options);
    let mut trace = Trace::new();
    trace.page_size = Some(options.page_size);
    let mut sink = Collapse::new(Batched::new(trace), options.collapse_repeats);
    for_each_line(input, path, |_, line| {
        parser
            .line(line, |vpn, write| {
                // A Trace sink never fails.
                let _ = sink.reference(vpn, write);
            })
            .map(drop)
    })?;
    Ok(sink.finish().map(Batched::into_trace).unwrap_or_default())
}

/// Parses lackey output from `input` into any sink; the first sink error
/// stops parsing and is returned as [`ParseInto::Sink`].
pub fn parse_into<S: TraceSink>(
    input: impl BufRead,
    path: &Path,
    options: &LoadOptions,
    sink: &mut Collapse<S>,
) -> Result<(), ParseInto> {
    let parser = LackeyParser::new(options);
    let mut failed: Option<std::io::Error> = None;
    let r = for_each_line(input, path, |_, line| {
        parser
            .line(line, |vpn, write| {
                if failed.is_none() {
                    if let Err(e) = sink.reference(vpn, write) {
                        failed = Some(e);
                    }
                }
            })
            .map(drop)?;
        match failed {
            Some(_) => Err(String::new()),
            None => Ok(()),
        }
    });
    match (failed, r) {
        (Some(e), _) => Err(ParseInto::Sink(e)),
        (None, Err(e)) => Err(ParseInto::Trace(e)),
        (None, Ok(())) => Ok(()),
    }
}

/// Why [`parse_into`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ParseInto {
    /// The input was unreadable or malformed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The sink failed to take a reference.
    #[error("writing the trace: {0}")]
    Sink(std::io::Error),
}
