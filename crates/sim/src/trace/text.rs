//! Text traces: one page number per line, decimal or `0x` hex, `#` comments.

use std::io::BufRead;
use std::path::Path;

use super::{Trace, TraceError};

/// Reads a text trace from `input`; `path` names the source in errors.
pub fn read(input: impl BufRead, path: &Path) -> Result<Trace, TraceError> {
    let mut trace = Trace::new();
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| TraceError::Io {
            path: path.into(),
            source: e,
        })?;
        let text = line.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        let vpn = parsed.map_err(|_| TraceError::Malformed {
            path: path.into(),
            at: super::Position::Line(n as u64 + 1),
            what: format!("expected a page number, found `{text}`"),
        })?;
        trace.push(vpn, false);
    }
    Ok(trace)
}
