//! Writing back a dead client's dirty pages (the Cache Kernel's
//! write-back to the owner, done by the daemon for an owner that is gone):
//! each page its dirty map marks, read from its memory file, written to
//! its backing file at the same offset, then `fdatasync`. What plain
//! `mmap` would keep of a process killed mid-run is kept.
//!
//! A dirty page where the memory file has a hole is skipped: the client
//! wrote it back and freed its frame (`PUNCH_HOLE`) before clearing the
//! bit, and a hole's zeros must never overwrite the data. Pages at or past
//! the backing file's end are skipped too: the kernel drops the pages of a
//! truncated file beyond its end.

use std::fs::File;
use std::os::unix::fs::FileExt;

use rustix::fs::{OFlags, SeekFrom};
use rustix::io::Errno;

use super::files::{dirty_pages, read_at_most, FilesError, RegionFds, PAGE};

/// The longest run of contiguous pages moved by one read and one write.
const RUN_PAGES: u64 = 256;
/// Failures kept in a [`WriteBack`] for the log (the rest are counted).
const ERRORS_KEPT: usize = 4;

/// Why a region could not be written back, or part of it.
#[derive(Debug, thiserror::Error)]
pub enum WriteBackError {
    /// A descriptor the write-back needs did not come with the region.
    #[error("no {0} descriptor came with the region")]
    Missing(&'static str),
    /// The dirty map could not be read.
    #[error("{0}")]
    Dirty(#[from] FilesError),
    /// The size of the memory or backing file is unknown.
    #[error("fstat of the {which} file: {source}")]
    Stat {
        /// Which file.
        which: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// Whether a page has data could not be found out.
    #[error("SEEK_DATA in the memory file at page {page}: {source}")]
    Seek {
        /// The page.
        page: u64,
        /// Why.
        source: std::io::Error,
    },
    /// Pages could not be read from the memory file.
    #[error("reading pages {first}..{end} of the memory file: {source}")]
    Read {
        /// The first page.
        first: u64,
        /// The page after the last.
        end: u64,
        /// Why.
        source: std::io::Error,
    },
    /// Pages could not be written to the backing file.
    #[error("writing pages {first}..{end} to the backing file: {source}")]
    Write {
        /// The first page.
        first: u64,
        /// The page after the last.
        end: u64,
        /// Why.
        source: std::io::Error,
    },
    /// The backing file could not be synchronised.
    #[error("fdatasync of the backing file: {0}")]
    Sync(std::io::Error),
}

/// What a write-back did.
#[derive(Debug, Default)]
pub struct WriteBack {
    /// Pages written to the backing file.
    pub written: u64,
    /// Dirty pages skipped because the memory file holds none of their
    /// data (written back and freed by the client already).
    pub holes: u64,
    /// Dirty pages skipped at or past the backing file's end.
    pub beyond_end: u64,
    /// Dirty pages that could not be written.
    pub failed: u64,
    /// The first failures (reads, writes, the final `fdatasync`).
    pub errors: Vec<WriteBackError>,
}

impl WriteBack {
    fn fail(&mut self, pages: u64, e: WriteBackError) {
        self.failed += pages;
        if self.errors.len() < ERRORS_KEPT {
            self.errors.push(e);
        }
    }
}

/// Writes back a region's dirty pages. `Err` when nothing could be tried
/// (a descriptor missing, the dirty map unreadable); failures of single
/// pages are counted in the result, the rest still written.
pub fn write_back(
    fds: &RegionFds,
    _deadline: std::time::Instant,
) -> Result<WriteBack, WriteBackError> {
    let memory = fds
        .memory
        .as_ref()
        .ok_or(WriteBackError::Missing("memory"))?;
    let backing = fds
        .backing
        .as_ref()
        .ok_or(WriteBackError::Missing("backing"))?;
    let dirty = fds.dirty.as_ref().ok_or(WriteBackError::Missing("dirty"))?;
    let len = |f: &File, which| {
        f.metadata()
            .map(|m| m.len())
            .map_err(|source| WriteBackError::Stat { which, source })
    };
    let (memory_len, backing_len) = (len(memory, "memory")?, len(backing, "backing")?);
    let mut out = WriteBack::default();
    let mut data = Extents::default();
    let mut mover = Mover::new(memory, backing, backing_len);
    let mut run: Option<(u64, u64)> = None;
    dirty_pages(dirty, memory_len / PAGE, |page| {
        let offset = page * PAGE;
        if offset >= backing_len {
            out.beyond_end += 1;
            return;
        }
        match data.has_data(memory, offset) {
            Ok(true) => {}
            Ok(false) => {
                out.holes += 1;
                return;
            }
            Err(source) => {
                out.fail(1, WriteBackError::Seek { page, source });
                return;
            }
        }
        run = match run {
            Some((first, end)) if end == page && end - first < RUN_PAGES => Some((first, end + 1)),
            Some((first, end)) => {
                mover.flush(first, end, &mut out);
                Some((page, page + 1))
            }
            None => Some((page, page + 1)),
        };
    })?;
    if let Some((first, end)) = run {
        mover.flush(first, end, &mut out);
    }
    if out.written > 0 {
        if let Err(e) = backing.sync_data() {
            let written = std::mem::take(&mut out.written);
            out.fail(written, WriteBackError::Sync(e));
        }
    }
    Ok(out)
}

/// Where the memory file has data, as far as the last `SEEK_DATA` told:
/// pages are asked in ascending order, so one pair of seeks answers for a
/// whole extent and the hole before it.
#[derive(Debug, Default)]
struct Extents {
    /// Data known from here...
    start: u64,
    /// ...to here; offsets before `end` need no seek.
    end: u64,
}

impl Extents {
    fn has_data(&mut self, file: &File, offset: u64) -> std::io::Result<bool> {
        if offset >= self.end {
            match rustix::fs::seek(file, SeekFrom::Data(offset)) {
                Ok(start) => {
                    let end = rustix::fs::seek(file, SeekFrom::Hole(start))?;
                    (self.start, self.end) = (start, end.max(start + 1));
                }
                // No data after `offset`: a hole to the end.
                Err(Errno::NXIO) => (self.start, self.end) = (u64::MAX, u64::MAX),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(offset >= self.start && offset < self.end)
    }
}

/// Moves runs of pages from the memory file to the backing file through
/// one page-aligned buffer (aligned so that an `O_DIRECT` backing
/// descriptor takes it).
struct Mover<'f> {
    memory: &'f File,
    backing: &'f File,
    backing_len: u64,
    buf: Vec<u8>,
    align: usize,
}

impl<'f> Mover<'f> {
    fn new(memory: &'f File, backing: &'f File, backing_len: u64) -> Mover<'f> {
        let buf = vec![0u8; (RUN_PAGES * PAGE + PAGE) as usize];
        let align = buf.as_ptr().align_offset(PAGE as usize);
        Mover {
            memory,
            backing,
            backing_len,
            buf,
            align,
        }
    }

    /// Pages `first..end`, all below the backing file's end; the last may
    /// be cut at that end.
    fn flush(&mut self, first: u64, end: u64, out: &mut WriteBack) {
        let offset = first * PAGE;
        let bytes = (end * PAGE).min(self.backing_len) - offset;
        let buf = &mut self.buf[self.align..self.align + bytes as usize];
        let got = match read_at_most(self.memory, buf, offset) {
            Ok(got) => got,
            Err(source) => {
                out.fail(end - first, WriteBackError::Read { first, end, source });
                return;
            }
        };
        // A memory file shrunk since: what is gone is not written.
        match write_all_at(self.backing, &buf[..got], offset) {
            Ok(()) => out.written += (got as u64).div_ceil(PAGE),
            Err(source) => out.fail(end - first, WriteBackError::Write { first, end, source }),
        }
    }
}

/// Writes all of `buf` at `offset`. An `O_DIRECT` descriptor refuses a
/// length that is not whole blocks (the backing file's last, partial
/// page): that write goes through the page cache, `O_DIRECT` cleared for
/// it and set again (the flag is the open file's, shared with whoever else
/// holds it).
fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    match file.write_all_at(buf, offset) {
        Err(e) if e.raw_os_error() == Some(Errno::INVAL.raw_os_error()) => {
            let flags = rustix::fs::fcntl_getfl(file)?;
            if !flags.contains(OFlags::DIRECT) {
                return Err(e);
            }
            rustix::fs::fcntl_setfl(file, flags - OFlags::DIRECT)?;
            let result = file.write_all_at(buf, offset);
            rustix::fs::fcntl_setfl(file, flags)?;
            result
        }
        other => other,
    }
}

#[cfg(test)]
#[path = "writeback_tests.rs"]
mod tests;
