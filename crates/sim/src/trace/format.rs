//! Trace file formats and their detection.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// One page number per line, decimal or `0x` hex, `#` comments.
    Text,
    /// Raw `valgrind --tool=lackey --trace-mem=yes` output.
    Lackey,
    /// pagepilot's binary format (`docs/trace-format.md`).
    Binary,
    /// libCacheSim's `oracleGeneral` binary records; object id = page.
    OracleGeneral,
    /// libCacheSim's `txt`: one object id per line; object id = page.
    LcsTxt,
}

impl Format {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [Format; 5] = [
        Format::Text,
        Format::Lackey,
        Format::Binary,
        Format::OracleGeneral,
        Format::LcsTxt,
    ];

    /// The name `--format` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Lackey => "lackey",
            Format::Binary => "binary",
            Format::OracleGeneral => "oracle-general",
            Format::LcsTxt => "lcs-txt",
        }
    }

    /// Whether [`super::write`] can produce this format.
    pub fn writable(self) -> bool {
        matches!(self, Format::Text | Format::Binary | Format::OracleGeneral)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown format name; lists the known ones.
#[derive(Debug, thiserror::Error)]
#[error("unknown trace format `{0}` (known: text, lackey, binary, oracle-general, lcs-txt)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "text" | "txt" | "pages" => Format::Text,
            "lackey" | "valgrind" => Format::Lackey,
            "binary" | "bin" | "pptrace" => Format::Binary,
            "oracle-general" | "oraclegeneral" | "oracle_general" => Format::OracleGeneral,
            "lcs-txt" | "lcs_txt" | "libcachesim-txt" => Format::LcsTxt,
            _ => return Err(UnknownFormat(s.into())),
        })
    }
}

/// Detects the format from the first bytes (already decompressed) and the
/// file name; `None` when neither says.
pub(crate) fn detect(path: &Path, head: &[u8]) -> Option<Format> {
    if head.starts_with(super::binary::MAGIC) {
        return Some(Format::Binary);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let name = name.strip_suffix(".zst").unwrap_or(&name);
    if name.contains("oraclegeneral") {
        return Some(Format::OracleGeneral);
    }
    if name.ends_with(".lackey") {
        return Some(Format::Lackey);
    }
    if name.ends_with(".pptrace") {
        return Some(Format::Binary);
    }
    if name.ends_with(".lcs.txt") {
        return Some(Format::LcsTxt);
    }
    sniff_text(head)
}

/// Tells lackey output from a page-number list by its first meaningful
/// line; `None` for content that is not text.
fn sniff_text(head: &[u8]) -> Option<Format> {
    for line in head.split(|&b| b == b'\n') {
        if line.iter().any(|&b| b == 0 || b >= 0x80) {
            return None;
        }
        let t = line.trim_ascii();
        if t.is_empty() || t.starts_with(b"#") {
            continue;
        }
        let lackey = [&b"=="[..], b"--", b"I  ", b" L ", b" S ", b" M "];
        if lackey.iter().any(|p| line.starts_with(p)) {
            return Some(Format::Lackey);
        }
        return Some(Format::Text);
    }
    // Nothing but comments and blank lines: any text reader reports it empty.
    Some(Format::Text)
}
