//! pagepilot's binary trace format (specified in `docs/trace-format.md`).
//!
//! A 48-byte little-endian header, then the reference array (one `u32` slot
//! per reference), the page table (one `u64` page number per slot) and, if
//! flagged, a write bitset. Slots are numbered in order of first reference,
//! so the reference array can be written while a program runs and checked
//! in one pass while read.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::sink::Batched;

use super::index::{intern, VpnIndex};
use super::{Position, Trace, TraceError};

/// The first eight bytes of every binary trace.
pub const MAGIC: &[u8; 8] = b"PPTRACE\0";
/// The format version this code reads and writes.
pub const VERSION: u32 = 1;
/// Bytes before the reference array.
pub const HEADER_LEN: u64 = 48;
/// Flag: a write bitset follows the page table.
pub const FLAG_WRITES: u32 = 1;
/// Flag: the writer never finished (counts are not valid).
pub const FLAG_UNFINISHED: u32 = 1 << 31;

/// Bytes read per step: counts in headers are not trusted, so arrays grow
/// only as data actually arrives.
const CHUNK: usize = 1 << 20;

/// The header of a binary trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    flags: u32,
    page_size: u64,
    refs: u64,
    pages: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut h = [0u8; HEADER_LEN as usize];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.flags.to_le_bytes());
        h[16..24].copy_from_slice(&self.page_size.to_le_bytes());
        h[24..32].copy_from_slice(&self.refs.to_le_bytes());
        h[32..40].copy_from_slice(&self.pages.to_le_bytes());
        h
    }

    fn write_words(&self) -> u64 {
        if self.flags & FLAG_WRITES != 0 {
            self.refs.div_ceil(64)
        } else {
            0
        }
    }

    /// Total file length the header describes (saturating: a lying header
    /// must not overflow).
    fn total_len(&self) -> u64 {
        HEADER_LEN
            .saturating_add(self.refs.saturating_mul(4))
            .saturating_add(self.pages.saturating_mul(8))
            .saturating_add(self.write_words().saturating_mul(8))
    }
}

/// Reads as many bytes as `buf` holds or up to the end of `input`.
pub(crate) fn fill(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads a binary trace from `input` (see [`read_with`]).
pub fn read(input: impl Read, path: &Path) -> Result<Trace, TraceError> {
    read_with(input, path, None, &super::LoadOptions::default())
}

/// Reads a binary trace; `size_hint` is the content length if known (it
/// is checked against the header before anything is allocated). Only
/// `collapse_repeats` of `options` applies.
pub fn read_with(
    mut input: impl Read,
    path: &Path,
    size_hint: Option<u64>,
    options: &super::LoadOptions,
) -> Result<Trace, TraceError> {
    let bad = |at: u64, what: String| TraceError::malformed(path, Position::Offset(at), what);
    let io = |e| TraceError::io(path, e);

    let mut h = [0u8; HEADER_LEN as usize];
    let got = fill(&mut input, &mut h).map_err(io)?;
    if !h.starts_with(MAGIC) {
        return Err(bad(
            0,
            "not a pagepilot binary trace (bad magic number)".into(),
        ));
    }
    if got < h.len() {
        return Err(bad(
            got as u64,
            format!("header cut short: {got} of {HEADER_LEN} bytes"),
        ));
    }
    let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
    let version = u32_at(8);
    if version != VERSION {
        return Err(bad(
            8,
            format!("unsupported version {version} (this reader knows {VERSION})"),
        ));
    }
    let header = Header {
        flags: u32_at(12),
        page_size: u64_at(16),
        refs: u64_at(24),
        pages: u64_at(32),
    };
    if header.flags & FLAG_UNFINISHED != 0 {
        return Err(bad(
            12,
            "the trace was never finished (its writer stopped early)".into(),
        ));
    }
    if header.flags & !FLAG_WRITES != 0 {
        return Err(bad(
            12,
            format!("unknown flags {:#x}", header.flags & !FLAG_WRITES),
        ));
    }
    if header.page_size != 0 && !header.page_size.is_power_of_two() {
        return Err(bad(
            16,
            format!("page size {} is not a power of two", header.page_size),
        ));
    }
    if header.pages > header.refs || header.pages > 1 << 32 {
        return Err(bad(
            32,
            format!(
                "{} pages for {} references is impossible",
                header.pages, header.refs
            ),
        ));
    }
    if u64_at(40) != 0 {
        return Err(bad(40, "reserved header field is not zero".into()));
    }
    if let Some(size) = size_hint {
        let want = header.total_len();
        if size != want {
            return Err(bad(
                size.min(want),
                format!("file is {size} bytes but its header describes {want}"),
            ));
        }
    }
    // Trust counts for allocation only as far as the file size vouches.
    let trusted = |n: u64| {
        if size_hint.is_some() {
            n as usize
        } else {
            n.min(CHUNK as u64) as usize
        }
    };

    let mut offset = HEADER_LEN;
    let mut buf = vec![0u8; CHUNK];

    // Reference array, checked to number slots in order of first reference.
    let mut refs: Vec<u32> = super::huge::vec_with_capacity(trusted(header.refs));
    let mut next: u64 = 0;
    let mut left = header.refs.saturating_mul(4);
    while left > 0 {
        let want = left.min(CHUNK as u64) as usize;
        let got = fill(&mut input, &mut buf[..want]).map_err(io)?;
        if got < want {
            return Err(bad(
                offset + got as u64,
                format!(
                    "data ends inside the reference array ({} references expected)",
                    header.refs
                ),
            ));
        }
        let start = refs.len();
        refs.extend(
            buf[..want]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4"))),
        );
        for (k, &slot) in refs[start..].iter().enumerate() {
            let slot = u64::from(slot);
            if slot >= next {
                if slot != next {
                    return Err(bad(offset + 4 * k as u64, format!(
                        "slot {slot} before slot {next} was referenced (slots must be numbered in order of first reference)"
                    )));
                }
                next += 1;
            }
        }
        offset += want as u64;
        left -= want as u64;
    }
    if next != header.pages {
        return Err(bad(
            32,
            format!(
                "header says {} pages but the references use {next}",
                header.pages
            ),
        ));
    }

    // Page table.
    let mut pages: Vec<u64> = Vec::with_capacity(trusted(header.pages));
    read_u64s(&mut input, header.pages, &mut pages, &mut buf, &mut offset)
        .map_err(|e| e.into_error(path, "page table"))?;

    // Write bitset.
    let words = header.write_words();
    let mut writes: Vec<u64> = Vec::with_capacity(trusted(words));
    read_u64s(&mut input, words, &mut writes, &mut buf, &mut offset)
        .map_err(|e| e.into_error(path, "write bitset"))?;
    if let Some(&last) = writes.last() {
        let used = header.refs % 64;
        if used != 0 && last >> used != 0 {
            return Err(bad(
                offset - 8,
                "write bits set past the last reference".into(),
            ));
        }
    }

    let got = fill(&mut input, &mut buf[..1]).map_err(io)?;
    if got != 0 {
        return Err(bad(offset, "trailing bytes after the trace".into()));
    }

    let page_size = (header.page_size != 0).then_some(header.page_size);
    let pages_at = HEADER_LEN + 4 * header.refs;
    let trace = Trace::from_checked_parts(refs, pages, writes, page_size).map_err(|dup| {
        bad(
            pages_at + 8 * dup as u64,
            "page number listed twice in the page table".into(),
        )
    })?;
    Ok(if options.collapse_repeats {
        collapsed(&trace)
    } else {
        trace
    })
}

/// A copy of `trace` without immediately repeated references to one page.
pub fn collapsed(trace: &Trace) -> Trace {
    let mut out = super::Collapse::new(Batched::new(Trace::new()), true);
    for (i, &slot) in trace.refs.iter().enumerate() {
        let _ = out.reference(trace.pages[slot as usize], trace.is_write(i));
    }
    let mut t = out.finish().map(Batched::into_trace).unwrap_or_default();
    t.page_size = trace.page_size;
    t
}

enum ArrayError {
    Io(std::io::Error),
    Short { at: u64, count: u64 },
}

impl ArrayError {
    fn into_error(self, path: &Path, what: &str) -> TraceError {
        match self {
            ArrayError::Io(e) => TraceError::io(path, e),
            ArrayError::Short { at, count } => TraceError::malformed(
                path,
                Position::Offset(at),
                format!("data ends inside the {what} ({count} entries expected)"),
            ),
        }
    }
}

fn read_u64s(
    input: &mut impl Read,
    count: u64,
    out: &mut Vec<u64>,
    buf: &mut [u8],
    offset: &mut u64,
) -> Result<(), ArrayError> {
    let mut left = count.saturating_mul(8);
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let got = fill(input, &mut buf[..want]).map_err(ArrayError::Io)?;
        if got < want {
            return Err(ArrayError::Short {
                at: *offset + got as u64,
                count,
            });
        }
        out.extend(
            buf[..want]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8"))),
        );
        *offset += want as u64;
        left -= want as u64;
    }
    Ok(())
}

/// Writes `trace` in the binary format.
pub fn write(trace: &Trace, out: &mut impl Write) -> std::io::Result<()> {
    let has_writes = trace.has_writes();
    let header = Header {
        flags: if has_writes { FLAG_WRITES } else { 0 },
        page_size: trace.page_size.unwrap_or(0),
        refs: trace.refs.len() as u64,
        pages: trace.pages.len() as u64,
    };
    out.write_all(&header.encode())?;
    let mut buf = Vec::with_capacity(CHUNK);
    for chunk in trace.refs.chunks(CHUNK / 4) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|s| s.to_le_bytes()));
        out.write_all(&buf)?;
    }
    write_u64s(out, &trace.pages, &mut buf)?;
    if has_writes {
        let mut words = trace.writes.clone();
        words.resize(trace.refs.len().div_ceil(64), 0);
        write_u64s(out, &words, &mut buf)?;
    }
    Ok(())
}

fn write_u64s(out: &mut impl Write, words: &[u64], buf: &mut Vec<u8>) -> std::io::Result<()> {
    for chunk in words.chunks(CHUNK / 8) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|s| s.to_le_bytes()));
        out.write_all(buf)?;
    }
    Ok(())
}

/// Writes a binary trace one reference at a time (for recording): the
/// reference array streams out, the page table and write bits follow at
/// [`BinaryWriter::finish`], which then completes the header.
pub struct BinaryWriter<W: Write + Seek> {
    out: W,
    header: Header,
    index: VpnIndex,
    pages: Vec<u64>,
    writes: Vec<u64>,
    last: Option<(u64, u32)>,
    buf: Vec<u8>,
}

/// What a finished writer wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// References.
    pub references: u64,
    /// Distinct pages.
    pub pages: u64,
    /// References that were writes.
    pub writes: u64,
}

impl<W: Write + Seek> BinaryWriter<W> {
    /// Starts a trace on `out` (positioned at its start); `page_size` 0 if
    /// pages are abstract numbers.
    pub fn new(mut out: W, page_size: u64) -> std::io::Result<Self> {
        let header = Header {
            flags: FLAG_UNFINISHED,
            page_size,
            refs: 0,
            pages: 0,
        };
        out.write_all(&header.encode())?;
        Ok(BinaryWriter {
            out,
            header,
            index: VpnIndex::default(),
            pages: Vec::new(),
            writes: Vec::new(),
            last: None,
            buf: Vec::with_capacity(CHUNK),
        })
    }

    /// Appends one reference.
    #[inline]
    pub fn push(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        let slot = intern(&mut self.index, &mut self.pages, &mut self.last, vpn);
        let i = self.header.refs as usize;
        if write {
            let word = i / 64;
            if self.writes.len() <= word {
                self.writes.resize(word + 1, 0);
            }
            self.writes[word] |= 1 << (i % 64);
        }
        self.header.refs += 1;
        self.buf.extend_from_slice(&slot.to_le_bytes());
        if self.buf.len() >= CHUNK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// References so far.
    pub fn len(&self) -> u64 {
        self.header.refs
    }

    /// Whether no reference was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.header.refs == 0
    }

    /// Writes the page table and write bits, completes the header and
    /// flushes; returns what was written.
    pub fn finish(mut self) -> std::io::Result<Written> {
        self.out.write_all(&self.buf)?;
        let mut buf = std::mem::take(&mut self.buf);
        write_u64s(&mut self.out, &self.pages, &mut buf)?;
        let writes: u64 = self.writes.iter().map(|w| u64::from(w.count_ones())).sum();
        self.header.pages = self.pages.len() as u64;
        self.header.flags = 0;
        if writes > 0 {
            self.header.flags = FLAG_WRITES;
            self.writes
                .resize(self.header.refs.div_ceil(64) as usize, 0);
            write_u64s(&mut self.out, &self.writes, &mut buf)?;
        }
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&self.header.encode())?;
        self.out.flush()?;
        Ok(Written {
            references: self.header.refs,
            pages: self.header.pages,
            writes,
        })
    }
}

impl<W: Write + Seek> super::TraceSink for BinaryWriter<W> {
    fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        self.push(vpn, write)
    }
}
