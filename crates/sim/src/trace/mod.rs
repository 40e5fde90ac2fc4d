//! Page-reference traces: the in-memory form every reader produces, and the
//! readers and writers of every supported file format.
//!
//! Entry points: [`load`] (format detected) and [`load_with`] (options);
//! [`write`] / [`save`] for output; [`Format`] names the formats.

use std::path::Path;

mod error;
mod format;
mod hash;
mod huge;
mod index;
mod lines;
mod options;
mod source;

pub mod binary;
pub mod lackey;
pub mod lcs;
pub mod record;
pub mod sink;
pub mod text;

pub use error::{Position, TraceError};
pub use format::Format;
pub use options::{LoadOptions, DEFAULT_PAGE_SIZE};
pub use sink::{Collapse, TraceSink};

use index::{intern, VpnIndex};

/// Reads the trace in `path` (format detected), refusing an empty one.
pub fn load(path: &Path) -> Result<Trace, TraceError> {
    load_with(path, &LoadOptions::default())
}

/// Reads the trace in `path` with `options`, refusing an empty one.
///
/// `.zst` input (by magic number) is decompressed while reading. The format
/// is `options.format` if set, else detected from the content's magic
/// number, then the file name, then the first lines.
pub fn load_with(path: &Path, options: &LoadOptions) -> Result<Trace, TraceError> {
    options.check()?;
    let src = source::open(path)?;
    let format = match options.format {
        Some(f) => f,
        None => format::detect(path, &src.head)
            .ok_or_else(|| TraceError::Undetected { path: path.into() })?,
    };
    let trace = match format {
        Format::Text => text::read_with(src.reader, path, options)?,
        Format::Lackey => lackey::read(src.reader, path, options)?,
        Format::Binary => binary::read_with(src.reader, path, src.size_hint, options)?,
        Format::OracleGeneral => lcs::read_oracle_general(src.reader, path, options)?,
        Format::LcsTxt => lcs::read_txt(src.reader, path, options)?,
    };
    if trace.is_empty() {
        return Err(TraceError::Empty { path: path.into() });
    }
    Ok(trace)
}

/// The format [`load`] would read `path` as (content, then name).
pub fn detect(path: &Path) -> Result<Format, TraceError> {
    let src = source::open(path)?;
    format::detect(path, &src.head).ok_or_else(|| TraceError::Undetected { path: path.into() })
}

/// Writes `trace` to `path` in `format` (only [`Format::Binary`],
/// [`Format::Text`] and [`Format::OracleGeneral`] can be written), zstd-compressed if `path` ends in `.zst`.
pub fn save(trace: &Trace, path: &Path, format: Format) -> Result<(), TraceError> {
    if !format.writable() {
        return Err(TraceError::Unwritable { format });
    }
    let io = |e| TraceError::io(path, e);
    let file = std::fs::File::create(path).map_err(io)?;
    let out = std::io::BufWriter::with_capacity(1 << 20, file);
    if source::is_zst_name(path) {
        let mut enc = zstd::Encoder::new(out, 3).map_err(io)?;
        // The frame checksum turns silent corruption into a read error.
        enc.include_checksum(true).map_err(io)?;
        write(trace, &mut enc, format, path)?;
        let mut out = enc.finish().map_err(io)?;
        std::io::Write::flush(&mut out).map_err(io)
    } else {
        let mut out = out;
        write(trace, &mut out, format, path)?;
        std::io::Write::flush(&mut out).map_err(io)
    }
}

/// Writes `trace` to `out` in `format`; `path` names the output in errors.
pub fn write(
    trace: &Trace,
    out: &mut impl std::io::Write,
    format: Format,
    path: &Path,
) -> Result<(), TraceError> {
    let r = match format {
        Format::Binary => binary::write(trace, out),
        Format::Text => text::write(trace, out),
        Format::OracleGeneral => lcs::write_oracle_general(trace, out),
        other => return Err(TraceError::Unwritable { format: other }),
    };
    r.map_err(|e| TraceError::Io {
        path: path.into(),
        source: e,
    })
}

/// A page-reference trace held in memory, with pages renumbered densely.
///
/// `refs[i]` is the slot of the i-th reference; `pages[slot]` is its virtual
/// page number. Slots are assigned in order of first reference.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Slot of each reference, in order.
    pub refs: Vec<u32>,
    /// Virtual page number of each slot.
    pub pages: Vec<u64>,
    /// Bitset over references: bit i set if reference i was a write. Empty
    /// when the trace records no writes.
    pub writes: Vec<u64>,
    /// Bytes per page when the trace came from addresses (lackey, or a
    /// binary trace that says so); `None` when pages are abstract numbers.
    pub page_size: Option<u64>,
    index: VpnIndex,
    /// The last page pushed and its slot: consecutive references to one page
    /// are the common case in address traces.
    last: Option<(u64, u32)>,
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a trace from virtual page numbers (no writes).
    pub fn from_pages(vpns: impl IntoIterator<Item = u64>) -> Self {
        let mut t = Trace::new();
        for v in vpns {
            t.push(v, false);
        }
        t
    }

    /// Builds a trace from parts already checked by a reader: slots in
    /// order of first reference, `writes` empty or covering every
    /// reference. Fails with the index of a page listed twice.
    pub(crate) fn from_checked_parts(
        refs: Vec<u32>,
        pages: Vec<u64>,
        mut writes: Vec<u64>,
        page_size: Option<u64>,
    ) -> Result<Self, usize> {
        // Pages come in first-reference order, scattered over the table:
        // prefetching a few ahead overlaps the cache misses.
        const AHEAD: usize = 16;
        let mut index = VpnIndex::with_capacity(pages.len());
        for (slot, &vpn) in pages.iter().enumerate() {
            if let Some(&ahead) = pages.get(slot + AHEAD) {
                index.prefetch(ahead);
            }
            if !index.get_or_insert(vpn, slot as u32).1 {
                return Err(slot);
            }
        }
        if writes.iter().all(|&w| w == 0) {
            writes = Vec::new();
        }
        Ok(Trace {
            refs,
            pages,
            writes,
            page_size,
            index,
            last: None,
        })
    }

    /// Appends a reference.
    #[inline]
    pub fn push(&mut self, vpn: u64, write: bool) {
        let slot = intern(&mut self.index, &mut self.pages, &mut self.last, vpn);
        let i = self.refs.len();
        self.refs.push(slot);
        if write {
            self.set_write(i);
        }
    }

    /// Hints that `vpn` will be pushed soon.
    #[inline]
    pub(crate) fn prefetch(&self, vpn: u64) {
        self.index.prefetch(vpn);
    }

    fn set_write(&mut self, i: usize) {
        let word = i / 64;
        if self.writes.len() <= word {
            self.writes.resize(word + 1, 0);
        }
        self.writes[word] |= 1 << (i % 64);
    }

    /// Number of references.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// Whether the trace has no references.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Number of distinct pages (the footprint in pages).
    pub fn distinct(&self) -> usize {
        self.pages.len()
    }

    /// Whether reference `i` is a write.
    #[inline]
    pub fn is_write(&self, i: usize) -> bool {
        self.writes
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Whether any reference is a write.
    pub fn has_writes(&self) -> bool {
        self.writes.iter().any(|&w| w != 0)
    }

    /// Number of references that are writes.
    pub fn write_count(&self) -> u64 {
        self.writes.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The slot of a virtual page number, if the trace references it.
    pub fn slot_of(&self, vpn: u64) -> Option<u32> {
        self.index.get(vpn)
    }

    /// The virtual page number of each reference, in order.
    pub fn vpns(&self) -> impl Iterator<Item = u64> + '_ {
        self.refs.iter().map(|&s| self.pages[s as usize])
    }
}

impl TraceSink for Trace {
    fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        self.push(vpn, write);
        Ok(())
    }
}
