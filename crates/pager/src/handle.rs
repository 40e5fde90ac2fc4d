//! A writable file region handed to a process that is not its child (a
//! pickled region, for `multiprocessing`'s spawn and forkserver): the
//! region is shared first (`sharing`), as for a child, and the other
//! process maps the file with the kernel's `MAP_SHARED`, holding the lease
//! the handle names. Both then see each other's stores at once, as two
//! `MAP_SHARED` mappings of the file would; the region is paged again once
//! every such process has let its lease go.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::lease::{ClaimError, Ticket};
use crate::sharing::{self, ShareError};
use crate::sys::{self, PAGE};
use crate::Region;

/// What another process needs to map a shared region's file: plain data,
/// to be sent any way (serde, pickle).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareHandle {
    /// The backing file.
    pub path: PathBuf,
    /// Bytes mapped (from offset 0).
    pub len: usize,
    /// Whether the mapping is writable.
    pub writable: bool,
    /// The lease to claim (`lease::claim`); none for a read-only region.
    pub lease: Option<Ticket>,
}

/// Why a handle could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// The backing file could not be opened.
    #[error("cannot open shared region's file {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The lease cannot be claimed while the sharing process runs.
    #[error("cannot open shared region's handle")]
    Lease(#[from] ClaimError),
    /// The file could not be mapped.
    #[error("cannot map shared region's file {path}")]
    Map {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

impl Region {
    /// Shares the region with a process that is not its child: returns the
    /// handle that process opens ([`ShareHandle::open`]). Until every
    /// process that opened it has dropped its mapping, the region is the
    /// kernel's mapping of its file here too (a handle never opened keeps
    /// it so: staying shared is always safe). Only writable file regions
    /// are shared; a read-only region's handle needs no lease.
    pub fn share_handle(&self) -> Result<ShareHandle, ShareError> {
        let sh = &self.shared;
        let path = sh
            .sharing()
            .path()
            .ok_or(ShareError::NotAFile)?
            .to_path_buf();
        let lease = if sh.views().writable() && !sh.forked() {
            Some(sharing::share_pending(sh)?)
        } else {
            None
        };
        Ok(ShareHandle {
            path,
            len: sh.views().len(),
            writable: sh.views().writable(),
            lease,
        })
    }
}

impl ShareHandle {
    /// Claims the lease, then maps the file as the kernel's `MAP_SHARED`
    /// mapping. Refused while the sharing process runs if the handle was
    /// opened already (a pickle loaded twice) or came after the region was
    /// paged again; no lease is needed once that process is gone or has
    /// unmapped the region.
    pub fn open(&self) -> Result<SharedMapping, HandleError> {
        let lease = match &self.lease {
            Some(ticket) => crate::lease::claim(ticket)?,
            None => None,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(self.writable)
            .open(&self.path)
            .map_err(|source| HandleError::Open {
                path: self.path.clone(),
                source,
            })?;
        let map_len = self.len.div_ceil(PAGE) * PAGE;
        let addr = sys::map_shared(file.as_raw_fd(), map_len, self.writable).map_err(|source| {
            HandleError::Map {
                path: self.path.clone(),
                source,
            }
        })?;
        Ok(SharedMapping {
            addr,
            len: self.len,
            map_len,
            writable: self.writable,
            _lease: lease,
        })
    }
}

/// A shared region's file mapped in another process ([`ShareHandle::open`]).
/// Unmapped, and its lease let go, when dropped.
#[derive(Debug)]
pub struct SharedMapping {
    addr: usize,
    len: usize,
    map_len: usize,
    writable: bool,
    _lease: Option<OwnedFd>,
}

impl SharedMapping {
    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty (a region is at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether stores are allowed.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Writes the dirty pages to the file (`msync`).
    pub fn flush(&self) -> std::io::Result<()> {
        sys::msync(self.addr, self.map_len)
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: mapped by `open` and handed out only as raw pointers
        // whose validity ends with this value.
        unsafe { sys::unmap(self.addr, self.map_len) };
    }
}
