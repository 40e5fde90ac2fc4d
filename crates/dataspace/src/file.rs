//! A file as a page store: O_DIRECT reads for cold pages, buffered reads
//! for pages the kernel's page cache holds already, a buffered descriptor
//! for a partial last page, and the device's read-around.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{NoSuch, OpenError};
use crate::manager::DataspaceId;
use crate::sys::{self, PAGE};
use crate::PageStore;

/// A file dataspace. Pages the kernel's page cache holds already (a file
/// another program just wrote or read) are read from it, buffered: reading
/// them from the device again would be slower and the same bytes. The rest
/// is read with O_DIRECT, so that cold data is never cached twice.
pub struct FileStore {
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

impl FileStore {
    /// Opens `path`, checking that it exists, is a regular non-empty file of
    /// at least `want` bytes, and is writable if `writable`. Returns the store
    /// and the file's length.
    pub fn open(path: &Path, writable: bool, want: Option<u64>) -> Result<Self, OpenError> {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => OpenError::NoSuch(NoSuch {
                manager: crate::FileManager::NAME,
                id: DataspaceId::Path(path.into()),
            }),
            _ => OpenError::Io {
                path: path.into(),
                source: e,
            },
        })?;
        if !meta.is_file() {
            return Err(OpenError::NotAFile(path.into()));
        }
        let len = meta.len();
        if len == 0 {
            return Err(OpenError::Empty(path.into()));
        }
        if let Some(w) = want {
            if len < w {
                return Err(OpenError::Short {
                    id: DataspaceId::Path(path.into()),
                    actual: len,
                    expected: w,
                });
            }
        }
        // Root ignores permission bits when opening; honour them anyway.
        if writable && meta.permissions().readonly() {
            return Err(OpenError::ReadOnly(path.into()));
        }
        let map_open = |e: io::Error| match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM) if writable => {
                OpenError::ReadOnly(path.into())
            }
            _ => OpenError::Io {
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
        Ok(FileStore {
            direct,
            is_direct,
            cached,
            cached_bytes: AtomicU64::new(0),
            tail,
            len,
            readaround: sys::device_readahead_kb(path).map(|kb| kb as usize * 1024 / PAGE),
        })
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
    /// exist (see [`PageStore::read`]).
    ///
    /// # Safety
    /// As [`PageStore::read`].
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
    /// Of pages `first..first+pages`, how many lie within the file as
    /// opened (pages past its end are none of the page cache's business).
    fn within(&self, first: usize, pages: usize) -> usize {
        pages.min((self.len as usize).div_ceil(PAGE).saturating_sub(first))
    }

    /// [`PageStore::read`], the page cache holding `state` of the pages.
    ///
    /// # Safety
    /// As [`PageStore::read`].
    unsafe fn read_as(
        &self,
        first: usize,
        pages: usize,
        dst: *mut u8,
        state: Cached,
    ) -> io::Result<usize> {
        let whole = |file| {
            // SAFETY: forwarded from the caller.
            unsafe { self.read_from(file, first, pages, dst) }
        };
        match state {
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

    /// Splices pages `first..first+pages` from the page cache into
    /// `frames` at `frames_off` (see [`PageStore::fill`]).
    fn splice_into(
        &self,
        first: usize,
        pages: usize,
        frames: RawFd,
        frames_off: u64,
    ) -> io::Result<usize> {
        let off = (first * PAGE) as u64;
        let done = sys::splice_range(
            self.cached.as_raw_fd(),
            off,
            frames,
            frames_off,
            pages * PAGE,
        )?;
        let tail = done % PAGE;
        if tail != 0 {
            // The last page's bytes past the end of file: zero, whatever
            // the frame held.
            let zeros = [0u8; PAGE];
            let at = frames_off + done as u64;
            // SAFETY: `zeros` holds PAGE - tail readable bytes.
            unsafe { sys::pwrite_all(frames, zeros.as_ptr(), PAGE - tail, at)? };
        }
        if self.is_direct {
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

impl PageStore for FileStore {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let state = self.cached(first, self.within(first, pages));
        // SAFETY: forwarded from the caller.
        unsafe { self.read_as(first, pages, dst, state) }
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        let off = (first * PAGE) as u64;
        // The file as it is now, as the kernel writes a page back: another
        // process (or a `pwrite` beside the region) may have truncated or
        // grown it since it was opened.
        let now = self.direct.metadata()?.len();
        let end = (off + (pages * PAGE) as u64).min(now);
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

    fn fill(
        &self,
        first: usize,
        pages: usize,
        frames: std::os::fd::BorrowedFd<'_>,
        frames_off: u64,
    ) -> Option<io::Result<usize>> {
        // Only what the page cache holds: a cold page is read with O_DIRECT
        // (`read`), not cached twice.
        let within = self.within(first, pages);
        if within == 0 || !matches!(self.cached(first, within), Cached::All) {
            return None;
        }
        Some(self.splice_into(first, pages, frames.as_raw_fd(), frames_off))
    }

    unsafe fn fill_or_read(
        &self,
        first: usize,
        pages: usize,
        dst: *mut u8,
        frames: std::os::fd::BorrowedFd<'_>,
        frames_off: u64,
    ) -> io::Result<usize> {
        // One look at the page cache decides both.
        let within = self.within(first, pages);
        match self.cached(first, within) {
            Cached::All if within > 0 => {
                self.splice_into(first, pages, frames.as_raw_fd(), frames_off)
            }
            // SAFETY: forwarded from the caller.
            state => unsafe { self.read_as(first, pages, dst, state) },
        }
    }

    unsafe fn read_cached(
        &self,
        first: usize,
        pages: usize,
        dst: *mut u8,
    ) -> Option<io::Result<usize>> {
        let within = self.within(first, pages);
        if within == 0 || !matches!(self.cached(first, within), Cached::All) {
            return None;
        }
        if self.is_direct {
            self.cached_bytes
                .fetch_add((within * PAGE) as u64, Ordering::Relaxed);
        }
        // SAFETY: forwarded from the caller.
        Some(unsafe { self.read_as(first, pages, dst, Cached::All) })
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
            // Mixed: read by `PageStore::read`, run by run.
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

    fn size(&self) -> u64 {
        self.len
    }

    fn persistent(&self) -> bool {
        true
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
