//! Text traces: one page number per line, decimal or `0x` hex, `#` comments.
//!
//! A page number may be followed by `w` (a write) or `r` (a read, the
//! default), so a text trace keeps the write flags of a binary one.

use std::io::{BufRead, Write};
use std::path::Path;

use super::sink::Batched;

use super::lines::{for_each_line, parse_u64, show};
use super::{Collapse, LoadOptions, Trace, TraceError};

/// Reads a text trace from `input`; `path` names the source in errors.
pub fn read(input: impl BufRead, path: &Path) -> Result<Trace, TraceError> {
    read_with(input, path, &LoadOptions::default())
}

/// Reads a text trace from `input` with `options` (only `collapse_repeats`
/// applies); `path` names the source in errors.
pub fn read_with(
    input: impl BufRead,
    path: &Path,
    options: &LoadOptions,
) -> Result<Trace, TraceError> {
    let mut sink = Collapse::new(Batched::new(Trace::new()), options.collapse_repeats);
    let mut page_size = None;
    for_each_line(input, path, |number, line| {
        if number == 1 {
            page_size = header_page_size(line);
        }
        if let Some((vpn, write)) = parse_line(line)? {
            // A Trace sink never fails.
            let _ = sink.reference(vpn, write);
        }
        Ok(())
    })?;
    let mut trace = sink.finish().map(Batched::into_trace).unwrap_or_default();
    trace.page_size = page_size;
    Ok(trace)
}

/// The page size [`TextWriter`] notes in its first line, if this is it.
fn header_page_size(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(HEADER)?.strip_prefix(b", page size ")?;
    let size = super::lines::parse_dec(rest.strip_suffix(b" bytes")?)?;
    size.is_power_of_two().then_some(size)
}

/// The first line [`TextWriter`] writes, before any page size.
const HEADER: &[u8] = b"# pagepilot page trace";

/// Parses one line: `None` for a blank or comment line.
#[inline]
fn parse_line(line: &[u8]) -> Result<Option<(u64, bool)>, String> {
    let text = match line.iter().position(|&b| b == b'#') {
        Some(hash) => &line[..hash],
        None => line,
    };
    let text = text.trim_ascii();
    if text.is_empty() {
        return Ok(None);
    }
    let (number, flag) = match text.iter().position(|b| b.is_ascii_whitespace()) {
        Some(sp) => (&text[..sp], text[sp..].trim_ascii_start()),
        None => (text, &b""[..]),
    };
    let Some(vpn) = parse_u64(number) else {
        return Err(format!("expected a page number, found `{}`", show(text)));
    };
    let write = match flag {
        b"" | b"r" | b"R" => false,
        b"w" | b"W" => true,
        other => {
            return Err(format!(
                "expected `r` or `w` after the page number, found `{}`",
                show(other)
            ))
        }
    };
    Ok(Some((vpn, write)))
}

/// Writes `trace` as text: a header comment, then one decimal page number
/// per line, followed by ` w` for writes.
pub fn write(trace: &Trace, out: &mut impl Write) -> std::io::Result<()> {
    let mut w = TextWriter::new(out, trace.page_size)?;
    for (i, &slot) in trace.refs.iter().enumerate() {
        w.push(trace.pages[slot as usize], trace.is_write(i))?;
    }
    Ok(())
}

/// Writes a text trace one reference at a time.
pub struct TextWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> TextWriter<W> {
    /// Starts a text trace on `out`, noting the page size in a comment.
    pub fn new(mut out: W, page_size: Option<u64>) -> std::io::Result<Self> {
        match page_size {
            Some(size) => {
                out.write_all(HEADER)?;
                writeln!(out, ", page size {size} bytes")?
            }
            None => {
                out.write_all(HEADER)?;
                writeln!(out)?
            }
        }
        Ok(TextWriter {
            out,
            line: Vec::with_capacity(32),
        })
    }

    /// Appends one reference.
    #[inline]
    pub fn push(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        self.line.clear();
        let mut digits = [0u8; 20];
        let mut n = digits.len();
        let mut v = vpn;
        loop {
            n -= 1;
            digits[n] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.line.extend_from_slice(&digits[n..]);
        if write {
            self.line.extend_from_slice(b" w");
        }
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> super::TraceSink for TextWriter<W> {
    fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        self.push(vpn, write)
    }
}
