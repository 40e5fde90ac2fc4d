//! Anonymous memory's page store: pagepilot's own swap file, unnamed and
//! sparse, with a record of the pages written to it (the rest are zero).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use crate::error::CreateError;
use crate::stored::StoredPages;
use crate::sys::{self, PAGE};
use crate::PageStore;

/// Pagepilot's own swap file for an anonymous region: unnamed (O_TMPFILE or
/// created and unlinked), sparse, page `i` at offset `i * PAGE`.
pub struct SwapStore {
    file: File,
    is_direct: bool,
    /// The pages written to swap.
    stored: StoredPages,
    /// The dataspace's length in bytes.
    len: u64,
    /// Held while the store is open from an [`crate::AnonymousManager`],
    /// which keeps the other end to know it is.
    pub(crate) attached: Option<Arc<()>>,
}

impl SwapStore {
    /// Creates a swap file in `dir` for `len` bytes of anonymous memory
    /// (sparse: it grows with what is written).
    pub fn create(dir: &Path, len: u64) -> Result<Self, CreateError> {
        let err = |source| CreateError::Io {
            path: dir.into(),
            source,
        };
        let (file, is_direct) = match sys::tmpfile_direct(dir) {
            Ok(x) => x,
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                let path = dir.join(format!(
                    ".pagepilot-swap-{}-{:x}",
                    std::process::id(),
                    &dir as *const _ as usize
                ));
                let x = sys::open_direct(&path, true, true).map_err(err)?;
                std::fs::remove_file(&path).map_err(err)?;
                x
            }
            Err(e) => return Err(err(e)),
        };
        Ok(SwapStore {
            file,
            is_direct,
            stored: StoredPages::default(),
            len,
            attached: None,
        })
    }
}

impl PageStore for SwapStore {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        // Read runs of stored pages; pages never stored are zeroed (which
        // also allocates a fresh frame, so it can be mapped): the caller's
        // buffer need not be zero (a compressed tier reads into its own).
        let mut p = 0;
        while p < pages {
            if !self.has_data(first + p) {
                // SAFETY: page `p < pages` of the caller's buffer.
                unsafe { dst.add(p * PAGE).write_bytes(0, PAGE) };
                p += 1;
                continue;
            }
            let start = p;
            while p < pages && self.has_data(first + p) {
                p += 1;
            }
            let off = ((first + start) * PAGE) as u64;
            // SAFETY: `dst + start*PAGE .. dst + p*PAGE` lies inside the caller's buffer.
            unsafe {
                sys::pread_full(
                    self.file.as_raw_fd(),
                    dst.add(start * PAGE),
                    (p - start) * PAGE,
                    off,
                )?
            };
        }
        Ok(pages)
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        // SAFETY: the caller guarantees `src` covers `pages * PAGE` readable bytes.
        unsafe {
            sys::pwrite_all(
                self.file.as_raw_fd(),
                src,
                pages * PAGE,
                (first * PAGE) as u64,
            )?
        };
        self.stored.add(first, pages);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn direct(&self) -> bool {
        self.is_direct
    }

    fn read_source(&self, first: usize, pages: usize) -> Option<(std::os::fd::RawFd, u64)> {
        (first..first + pages)
            .all(|p| self.has_data(p))
            .then(|| (self.file.as_raw_fd(), (first * PAGE) as u64))
    }

    fn has_data(&self, page: usize) -> bool {
        self.stored.contains(page)
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.stored.bytes()
    }

    fn size(&self) -> u64 {
        self.len
    }

    fn persistent(&self) -> bool {
        false
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
