//! Splitting a byte stream into lines without allocating per line.

use std::io::BufRead;
use std::path::Path;

use super::{Position, TraceError};

/// The longest line any text reader accepts: input is untrusted, and a
/// "line" of gigabytes is a binary file read as text.
pub(crate) const MAX_LINE: usize = 1 << 16;

/// Calls `f(line_number, line)` for every line of `input` (1-based numbers,
/// without the `\n`; a final line without `\n` counts). `f` returns what was
/// wrong with a line, which becomes a [`TraceError::Malformed`] at that line.
pub(crate) fn for_each_line(
    mut input: impl BufRead,
    path: &Path,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<(), TraceError> {
    let mut number = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    let mut call = |number: u64, line: &[u8]| {
        f(number, line).map_err(|what| TraceError::malformed(path, Position::Line(number), what))
    };
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(TraceError::io(path, e)),
        };
        if buf.is_empty() {
            if !carry.is_empty() {
                call(number + 1, &carry)?;
            }
            return Ok(());
        }
        let mut rest = buf;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            number += 1;
            if carry.is_empty() {
                call(number, &rest[..end])?;
            } else {
                carry.extend_from_slice(&rest[..end]);
                call(number, &carry)?;
                carry.clear();
            }
            rest = &rest[end + 1..];
        }
        carry.extend_from_slice(rest);
        if carry.len() > MAX_LINE {
            return Err(TraceError::malformed(
                path,
                Position::Line(number + 1),
                format!("line longer than {MAX_LINE} bytes (not a text trace?)"),
            ));
        }
        let used = buf.len();
        input.consume(used);
    }
}

/// A line shown in an error message: lossy UTF-8, cut to a readable length.
pub(crate) fn show(line: &[u8]) -> String {
    const SHOWN: usize = 60;
    let cut = &line[..line.len().min(SHOWN)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if line.len() > SHOWN {
        s.push('…');
    }
    s
}

/// Parses an unsigned decimal or `0x`/`0X` hex number making up all of `s`.
#[inline]
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    match s {
        [b'0', b'x' | b'X', hex @ ..] => parse_hex(hex),
        _ => parse_dec(s),
    }
}

/// Parses an unsigned decimal number making up all of `s`.
#[inline]
pub(crate) fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Parses an unsigned hex number (no prefix) making up all of `s`.
#[inline]
pub(crate) fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = v.checked_mul(16)?.checked_add(u64::from(d))?;
    }
    Some(v)
}
