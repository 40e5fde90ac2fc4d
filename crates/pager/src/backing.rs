//! Dataspaces: the backing stores a region's pages come from and go back to
//! (a file, or pagepilot's own swap file for anonymous memory). Reads and
//! writes bypass the kernel page cache (O_DIRECT) so the data is cached once,
//! in the region's frames, under its budget.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::MapError;
use crate::stored::StoredPages;
use crate::sys::{self, PAGE};

/// What a region is backed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A file, mapped read-only or read-write.
    File {
        /// The file.
        path: PathBuf,
        /// Whether the application may write (dirty pages are written back).
        writable: bool,
    },
    /// Zero-filled memory of `len` bytes, spilled to a swap file of pagepilot's own.
    Anonymous {
        /// Length in bytes.
        len: usize,
    },
}

/// A backing store, page-addressed. Buffers are page aligned and whole pages.
pub trait Dataspace: Send + Sync {
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
    fn read_source(&self, first: usize, pages: usize) -> Option<(std::os::fd::RawFd, u64)> {
        let _ = (first, pages);
        None
    }

    /// The file a child process maps in the region's place after `fork`
    /// (`None`: the region is absent in the child).
    fn file(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// A buffered (not O_DIRECT) descriptor of the backing file open for
    /// writing, for the daemon to write pages back with if the client dies
    /// (`None`: no writable file).
    fn writable_file(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Bytes read from the kernel's page cache rather than the device (the
    /// store's data was there already).
    /// Bytes the store's own records hold (what it remembers per page).
    fn bookkeeping_bytes(&self) -> usize {
        0
    }

    fn cached_bytes_read(&self) -> u64 {
        0
    }

    /// Whether a write-back is needed for a page that was never modified.
    /// (Anonymous memory that was never written need not be stored.)
    fn persistent(&self) -> bool;
}

/// A file dataspace. Pages the kernel's page cache holds already (a file
/// another program just wrote or read) are read from it, buffered: reading
/// them from the device again would be slower and the same bytes. The rest
/// is read with O_DIRECT, so that cold data is never cached twice.
pub struct FileDataspace {
    direct: File,
    is_direct: bool,
    /// A buffered descriptor, for pages the page cache holds.
    cached: File,
    /// Bytes read through `cached`.
    cached_bytes: AtomicU64,
    /// Buffered descriptor (writable regions) for a partial last page: an
    /// O_DIRECT write of a whole page there would grow the file.
    tail: Option<File>,
    len: u64,
    /// The device's read-around, pages (`read_ahead_kb`), if it has one.
    readaround: Option<usize>,
}

impl FileDataspace {
    /// Opens `path`, checking that it exists, is a regular non-empty file of
    /// at least `want` bytes, and is writable if `writable`. Returns the store
    /// and the file's length.
    pub fn open(path: &Path, writable: bool, want: Option<usize>) -> Result<Self, MapError> {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => MapError::MissingFile(path.into()),
            _ => MapError::Open {
                path: path.into(),
                source: e,
            },
        })?;
        if !meta.is_file() {
            return Err(MapError::NotAFile(path.into()));
        }
        let len = meta.len();
        if len == 0 {
            return Err(MapError::EmptyFile(path.into()));
        }
        if let Some(w) = want {
            if len < w as u64 {
                return Err(MapError::ShortFile {
                    path: path.into(),
                    actual: len,
                    expected: w as u64,
                });
            }
        }
        // Root ignores permission bits when opening; honour them anyway.
        if writable && meta.permissions().readonly() {
            return Err(MapError::ReadOnly(path.into()));
        }
        let map_open = |e: io::Error| match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM) if writable => {
                MapError::ReadOnly(path.into())
            }
            _ => MapError::Open {
                path: path.into(),
                source: e,
            },
        };
        let (direct, is_direct) = sys::open_direct(path, writable, false).map_err(map_open)?;
        let cached = File::open(path).map_err(map_open)?;
        // Also for a file of whole pages: truncated while mapped, it may end
        // inside a page.
        let tail = if writable {
            Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(map_open)?,
            )
        } else {
            None
        };
        Ok(FileDataspace {
            direct,
            is_direct,
            cached,
            cached_bytes: AtomicU64::new(0),
            tail,
            len,
            readaround: sys::device_readahead_kb(path).map(|kb| kb as usize * 1024 / PAGE),
        })
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// How much of pages `first..first+pages` the page cache holds: all,
    /// none, or some (then page by page). Where the kernel cannot tell
    /// (`cachestat` missing), none: read from the device.
    fn cached(&self, first: usize, pages: usize) -> Cached {
        if !self.is_direct {
            return Cached::All;
        }
        let fd = self.direct.as_raw_fd();
        let count = |first: usize, n: usize| {
            sys::cached_pages(fd, (first * PAGE) as u64, (n * PAGE) as u64).unwrap_or(0)
        };
        match count(first, pages) {
            0 => Cached::None,
            c if c as usize >= pages => Cached::All,
            _ => Cached::Some,
        }
    }

    /// Reads pages `first..first+pages` from `file`; returns the pages that
    /// exist (see [`Dataspace::read`]).
    ///
    /// # Safety
    /// As [`Dataspace::read`].
    unsafe fn read_from(
        &self,
        file: &File,
        first: usize,
        pages: usize,
        dst: *mut u8,
    ) -> io::Result<usize> {
        let off = (first * PAGE) as u64;
        // SAFETY: the caller guarantees `dst` covers `pages * PAGE` writable bytes.
        // A short read at end of file leaves the rest of the (zeroed) frame as is.
        let done = unsafe { sys::pread_full(file.as_raw_fd(), dst, pages * PAGE, off)? };
        if std::ptr::eq(file, &self.cached) && self.is_direct {
            self.cached_bytes.fetch_add(done as u64, Ordering::Relaxed);
        }
        Ok(done.div_ceil(PAGE))
    }
}

/// How much of a run of pages the page cache holds.
enum Cached {
    All,
    None,
    Some,
}

impl Dataspace for FileDataspace {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let whole = |file| {
            // SAFETY: forwarded from the caller.
            unsafe { self.read_from(file, first, pages, dst) }
        };
        match self.cached(first, pages) {
            Cached::All => return whole(&self.cached),
            Cached::None => return whole(&self.direct),
            Cached::Some => {}
        }
        // Page by page: runs of cached pages buffered, the rest direct.
        let cached: Vec<bool> = (first..first + pages)
            .map(|q| matches!(self.cached(q, 1), Cached::All))
            .collect();
        let mut p = 0;
        for run in cached.chunk_by(|a, b| a == b) {
            let n = run.len();
            let file = if run[0] { &self.cached } else { &self.direct };
            // SAFETY: `dst + p*PAGE .. dst + (p+n)*PAGE` lies inside the caller's buffer.
            let have = unsafe { self.read_from(file, first + p, n, dst.add(p * PAGE))? };
            if have < n {
                return Ok(p + have);
            }
            p += n;
        }
        Ok(pages)
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        let off = (first * PAGE) as u64;
        // The file as it is now: another process may have truncated it.
        let now = self.direct.metadata()?.len();
        let end = (off + (pages * PAGE) as u64).min(self.len).min(now);
        if end <= off {
            return Ok(());
        }
        let whole = ((end - off) as usize / PAGE) * PAGE;
        if whole > 0 {
            // SAFETY: `src` covers `pages * PAGE >= whole` readable bytes.
            unsafe { sys::pwrite_all(self.direct.as_raw_fd(), src, whole, off)? };
        }
        let rest = (end - off) as usize - whole;
        if rest > 0 {
            let tail = self.tail.as_ref().unwrap_or(&self.direct);
            // SAFETY: `src + whole + rest <= src + pages * PAGE`, readable.
            unsafe { sys::pwrite_all(tail.as_raw_fd(), src.add(whole), rest, off + whole as u64)? };
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.direct.sync_data()
    }

    fn read_source(&self, first: usize, pages: usize) -> Option<(std::os::fd::RawFd, u64)> {
        let file = match self.cached(first, pages) {
            Cached::None => &self.direct,
            Cached::All if self.is_direct => {
                self.cached_bytes
                    .fetch_add((pages * PAGE) as u64, Ordering::Relaxed);
                &self.cached
            }
            Cached::All => &self.direct,
            // Mixed: read by `Dataspace::read`, run by run.
            Cached::Some => return None,
        };
        Some((file.as_raw_fd(), (first * PAGE) as u64))
    }

    fn cached_bytes_read(&self) -> u64 {
        self.cached_bytes.load(Ordering::Relaxed)
    }

    fn file(&self) -> Option<std::os::fd::RawFd> {
        Some(self.direct.as_raw_fd())
    }

    fn writable_file(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.tail.as_ref().map(|f| f.as_fd())
    }

    fn readaround_pages(&self) -> Option<usize> {
        self.readaround
    }

    fn direct(&self) -> bool {
        self.is_direct
    }

    fn persistent(&self) -> bool {
        true
    }
}

/// Pagepilot's own swap file for an anonymous region: unnamed (O_TMPFILE or
/// created and unlinked), sparse, page `i` at offset `i * PAGE`.
pub struct SwapDataspace {
    file: File,
    is_direct: bool,
    /// The pages written to swap.
    stored: StoredPages,
}

impl SwapDataspace {
    /// Creates a swap file in `dir` (sparse: it grows with what is written).
    pub fn create(dir: &Path) -> Result<Self, MapError> {
        let err = |source| MapError::Swap {
            dir: dir.into(),
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
        Ok(SwapDataspace {
            file,
            is_direct,
            stored: StoredPages::default(),
        })
    }
}

impl Dataspace for SwapDataspace {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        // Read runs of stored pages; pages never stored are zero already.
        let mut p = 0;
        while p < pages {
            if !self.has_data(first + p) {
                // Never stored: a zero page, allocated so it can be mapped.
                sys::populate(dst as usize + p * PAGE, PAGE)?;
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

    fn persistent(&self) -> bool {
        false
    }
}
