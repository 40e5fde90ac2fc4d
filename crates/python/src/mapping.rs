//! What a `pagepilot.Region` object maps: a region this process pages, or
//! another process's writable file region shared with this one (unpickled:
//! the kernel's `MAP_SHARED` mapping of the file, holding that region's
//! lease). The object's methods act on either; the few that only make
//! sense for a paged region say so with `NotPaged`.

use pagepilot_pager::{FlushError, Region, SharedMapping};

/// The memory behind a `pagepilot.Region` object.
pub enum Mapping {
    /// Paged here, under this process's budget and policy.
    Paged(Region),
    /// Another process's region, mapped here as the kernel's mapping of its
    /// file; that process pages it again once this mapping is dropped.
    Shared(SharedMapping),
}

/// An operation that needs a region paged by this process.
#[derive(Debug, thiserror::Error)]
#[error(
    "{op}: this region is another process's region shared with this one (unpickled); \
     it is the kernel's mapping of the file here, with no budget or pager of its own"
)]
pub struct NotPaged {
    /// The operation refused.
    pub op: &'static str,
}

impl Mapping {
    /// The first byte.
    pub fn addr(&self) -> usize {
        match self {
            Mapping::Paged(r) => r.as_ptr() as usize,
            Mapping::Shared(m) => m.as_ptr() as usize,
        }
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        match self {
            Mapping::Paged(r) => r.len(),
            Mapping::Shared(m) => m.len(),
        }
    }

    /// The region paged here, or `NotPaged` naming `op`.
    pub fn paged(&mut self, op: &'static str) -> Result<&mut Region, NotPaged> {
        match self {
            Mapping::Paged(r) => Ok(r),
            Mapping::Shared(_) => Err(NotPaged { op }),
        }
    }

    /// Writes the dirty pages back: the pager's flush, or `msync` of the
    /// shared mapping.
    pub fn flush(&self) -> Result<(), FlushError> {
        match self {
            Mapping::Paged(r) => r.flush(),
            Mapping::Shared(m) => m.flush().map_err(FlushError::Sync),
        }
    }

    /// Writes back, then drops clean pages so that the next access reads
    /// the file. A shared mapping is the page cache itself, which already
    /// sees every other process's stores: `msync` only.
    pub fn invalidate(&self) -> Result<(), FlushError> {
        match self {
            Mapping::Paged(r) => r.invalidate(),
            Mapping::Shared(m) => m.flush().map_err(FlushError::Sync),
        }
    }

    /// The statistics as JSON: the pager's, or, for a shared mapping, the
    /// few that apply (`shared` true: it is not paged here).
    pub fn stats_json(&self) -> String {
        match self {
            Mapping::Paged(r) => r.stats_json(),
            Mapping::Shared(m) => serde_json::json!({
                "shared": true,
                "len": m.len(),
                "writable": m.writable(),
            })
            .to_string(),
        }
    }

    /// Writes back and unmaps; a shared mapping is synced (`msync`), then
    /// unmapped and its lease let go, whatever the sync said.
    pub fn unmap(self) -> Result<(), FlushError> {
        match self {
            Mapping::Paged(r) => r.unmap(),
            Mapping::Shared(m) => m.flush().map_err(FlushError::Sync),
        }
    }
}
