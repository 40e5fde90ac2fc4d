//! Page-reference traces: the in-memory form every reader produces.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

mod error;
pub mod text;

pub use error::{Position, TraceError};

/// Reads the trace in `path`, refusing an empty one.
pub fn load(path: &Path) -> Result<Trace, TraceError> {
    let file = File::open(path).map_err(|e| TraceError::Io {
        path: path.into(),
        source: e,
    })?;
    let trace = text::read(BufReader::new(file), path)?;
    if trace.is_empty() {
        return Err(TraceError::Empty { path: path.into() });
    }
    Ok(trace)
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
    index: HashMap<u64, u32>,
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

    /// Appends a reference.
    pub fn push(&mut self, vpn: u64, write: bool) {
        let next = self.pages.len() as u32;
        let slot = *self.index.entry(vpn).or_insert(next);
        if slot == next {
            self.pages.push(vpn);
        }
        let i = self.refs.len();
        self.refs.push(slot);
        if write {
            let word = i / 64;
            if self.writes.len() <= word {
                self.writes.resize(word + 1, 0);
            }
            self.writes[word] |= 1 << (i % 64);
        }
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

    /// The slot of a virtual page number, if the trace references it.
    pub fn slot_of(&self, vpn: u64) -> Option<u32> {
        self.index.get(&vpn).copied()
    }
}
