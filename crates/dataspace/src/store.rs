//! The page-I/O interface a region's fault path calls: a dataspace opened
//! by its manager, addressed in pages. Buffers are page aligned and whole
//! pages.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};

/// An open dataspace, page-addressed: what [`crate::Manager::open`] hands
/// out and a region's fault path reads from and writes back to (one call on
/// this trait object per read or write).
pub trait PageStore: Send + Sync {
    /// Fills `pages` pages at `dst` with the data of pages `first..first+pages`.
    /// Returns how many of them exist: fewer than `pages` when the store
    /// ends before (a file truncated while mapped); the bytes of the last
    /// page beyond the end are left zero.
    ///
    /// # Safety
    /// `dst` must be page aligned, valid for `pages * PAGE` bytes of writes and
    /// not accessed by anyone else during the call.
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize>;

    /// Stores `pages` pages from `src` as pages `first..first+pages`. Bytes
    /// beyond the store's current end are dropped, as the kernel drops the
    /// pages of a truncated file.
    ///
    /// # Safety
    /// `src` must be page aligned and valid for `pages * PAGE` bytes of reads.
    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()>;

    /// Makes completed writes durable (fdatasync for files).
    fn sync(&self) -> io::Result<()>;

    /// The dataspace's length in bytes when it was opened.
    fn size(&self) -> u64;

    /// Whether the store is accessed with O_DIRECT.
    fn direct(&self) -> bool;

    /// How many pages the kernel would read around a fault on a mapping of
    /// the store (its device's `read_ahead_kb`), if it would.
    fn readaround_pages(&self) -> Option<usize> {
        None
    }

    /// Whether page `page` must be read (false: it is known to be zero).
    fn has_data(&self, page: usize) -> bool {
        let _ = page;
        true
    }

    /// The descriptor and offset from which pages `first..first+pages` can
    /// be read by one positioned read (an io_uring read), if they can.
    fn read_source(&self, first: usize, pages: usize) -> Option<(RawFd, u64)> {
        let _ = (first, pages);
        None
    }

    /// Fills pages `first..first+pages` of `frames`, a file laid out as the
    /// store from `frames_off` on (a region's memfd), with their data
    /// without mapping them, if the store can move them from the kernel's
    /// page cache straight in (`splice`): no frame is faulted in and
    /// cleared before the copy, as [`PageStore::read`] into a mapping of
    /// the frames would. Returns what `read` would (the pages that exist;
    /// the bytes of the last one beyond the end are zero), or `None`: it
    /// cannot, `read` must.
    fn fill(
        &self,
        first: usize,
        pages: usize,
        frames: BorrowedFd<'_>,
        frames_off: u64,
    ) -> Option<io::Result<usize>> {
        let _ = (first, pages, frames, frames_off);
        None
    }

    /// [`PageStore::read`] into `dst` if the kernel's page cache holds every
    /// page (a copy, no wait for a device), else `None` and nothing read;
    /// also `None` where the store cannot tell.
    ///
    /// # Safety
    /// As [`PageStore::read`], for `dst`.
    unsafe fn read_cached(
        &self,
        first: usize,
        pages: usize,
        dst: *mut u8,
    ) -> Option<io::Result<usize>> {
        let _ = (first, pages, dst);
        None
    }

    /// [`PageStore::fill`] where the store can, else [`PageStore::read`]
    /// into `dst` (the same frames, mapped): one look at where the pages
    /// are decides both.
    ///
    /// # Safety
    /// As [`PageStore::read`], for `dst`.
    unsafe fn fill_or_read(
        &self,
        first: usize,
        pages: usize,
        dst: *mut u8,
        frames: BorrowedFd<'_>,
        frames_off: u64,
    ) -> io::Result<usize> {
        match self.fill(first, pages, frames, frames_off) {
            Some(filled) => filled,
            // SAFETY: the caller's guarantee, passed on.
            None => unsafe { self.read(first, pages, dst) },
        }
    }

    /// The file a child process maps in the region's place after `fork`
    /// (`None`: the region is absent in the child).
    fn file(&self) -> Option<RawFd> {
        None
    }

    /// A buffered (not O_DIRECT) descriptor of the backing file open for
    /// writing, for the daemon to write pages back with if the client dies
    /// (`None`: no writable file).
    fn writable_file(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Bytes the store's own records hold (what it remembers per page).
    fn bookkeeping_bytes(&self) -> usize {
        0
    }

    /// Bytes read from the kernel's page cache rather than the device (the
    /// store's data was there already).
    fn cached_bytes_read(&self) -> u64 {
        0
    }

    /// Whether the pages must stay resident while a region maps them (a
    /// pinned dataspace): the pager pins them, within its quota.
    fn pinned(&self) -> bool {
        false
    }

    /// Whether the contents outlive the region mapping the store, so that a
    /// flush (and an unmap, and the exit) writes the modified pages back:
    /// false for a region's own anonymous memory, gone with it.
    fn persistent(&self) -> bool;

    /// The store as `Any`, for its manager to take it back on
    /// [`crate::Manager::close`].
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

impl std::fmt::Debug for dyn PageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageStore")
            .field("size", &self.size())
            .field("direct", &self.direct())
            .field("persistent", &self.persistent())
            .finish()
    }
}

/// The methods of [`PageStore`] a store that passes its pages through to
/// another (`$lower`, an expression of `$this`) forwards as they are: all
/// but what it says of itself (`persistent`, `pinned`) and `into_any`.
macro_rules! forward_pages {
    ($this:ident => $lower:expr) => {
        unsafe fn read(&$this, first: usize, pages: usize, dst: *mut u8) -> std::io::Result<usize> {
            // SAFETY: the caller's guarantee, passed on.
            unsafe { $lower.read(first, pages, dst) }
        }

        unsafe fn write(&$this, first: usize, pages: usize, src: *const u8) -> std::io::Result<()> {
            // SAFETY: the caller's guarantee, passed on.
            unsafe { $lower.write(first, pages, src) }
        }

        fn sync(&$this) -> std::io::Result<()> {
            $lower.sync()
        }

        fn size(&$this) -> u64 {
            $lower.size()
        }

        fn direct(&$this) -> bool {
            $lower.direct()
        }

        fn readaround_pages(&$this) -> Option<usize> {
            $lower.readaround_pages()
        }

        fn fill(
            &$this,
            first: usize,
            pages: usize,
            frames: std::os::fd::BorrowedFd<'_>,
            frames_off: u64,
        ) -> Option<std::io::Result<usize>> {
            $lower.fill(first, pages, frames, frames_off)
        }

        unsafe fn fill_or_read(
            &$this,
            first: usize,
            pages: usize,
            dst: *mut u8,
            frames: std::os::fd::BorrowedFd<'_>,
            frames_off: u64,
        ) -> std::io::Result<usize> {
            // SAFETY: the caller's guarantee, passed on.
            unsafe { $lower.fill_or_read(first, pages, dst, frames, frames_off) }
        }

        unsafe fn read_cached(
            &$this,
            first: usize,
            pages: usize,
            dst: *mut u8,
        ) -> Option<std::io::Result<usize>> {
            // SAFETY: the caller's guarantee, passed on.
            unsafe { $lower.read_cached(first, pages, dst) }
        }

        fn has_data(&$this, page: usize) -> bool {
            $lower.has_data(page)
        }

        fn read_source(&$this, first: usize, pages: usize) -> Option<(std::os::fd::RawFd, u64)> {
            $lower.read_source(first, pages)
        }

        fn file(&$this) -> Option<std::os::fd::RawFd> {
            $lower.file()
        }

        fn writable_file(&$this) -> Option<std::os::fd::BorrowedFd<'_>> {
            $lower.writable_file()
        }

        fn bookkeeping_bytes(&$this) -> usize {
            $lower.bookkeeping_bytes()
        }

        fn cached_bytes_read(&$this) -> u64 {
            $lower.cached_bytes_read()
        }
    };
}

pub(crate) use forward_pages;
