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
//!
//! The cost is bounded by what the client really had, not by what it
//! claims: only pages below the memory file's end, the backing file's end
//! and the map's are considered; within them the memory file's data
//! extents are walked (`SEEK_DATA`, `SEEK_HOLE`), and for each extent only
//! the dirty-map words covering it are read. A 32 TiB memfd of holes under
//! a 1 GiB map of ones costs a few system calls. What is left is bounded
//! by a deadline, checked before each run is written and after each
//! window of the map is read.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::Instant;

use rustix::fs::{OFlags, SeekFrom};
use rustix::io::Errno;

use super::dirtyfile::DirtyFile;
use super::files::{privileged, read_at_most, FilesError, RegionFds, PAGE};

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
    #[error(transparent)]
    Dirty(#[from] FilesError),
    /// The size of the memory or backing file is unknown.
    #[error("fstat of the {which} file")]
    Stat {
        /// Which file.
        which: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The backing file became setuid, or setgid and group-executable,
    /// since the region was registered: nothing is written to it.
    #[error(
        "the backing file is now setuid or setgid-executable (mode {mode:o}): nothing written, root's writes would keep the bit"
    )]
    Privileged {
        /// The file's mode.
        mode: u32,
    },
    /// Where the memory file has data could not be found out; the pages
    /// from there on were not examined.
    #[error("SEEK_DATA/SEEK_HOLE in the memory file from page {page}")]
    Seek {
        /// The page.
        page: u64,
        /// Why.
        source: std::io::Error,
    },
    /// Pages could not be read from the memory file.
    #[error("reading pages {first}..{end} of the memory file")]
    Read {
        /// The first page.
        first: u64,
        /// The page after the last.
        end: u64,
        /// Why.
        source: std::io::Error,
    },
    /// Pages could not be written to the backing file.
    #[error("writing pages {first}..{end} to the backing file")]
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
///
/// Dirty pages in holes of the memory file are skipped without being
/// counted: counting them would mean reading the map's bits over the
/// holes, which is what the write-back is bounded not to do.
#[derive(Debug, Default)]
pub struct WriteBack {
    /// Pages written to the backing file.
    pub written: u64,
    /// Dirty pages that could not be written.
    pub failed: u64,
    /// The first failures (reads, writes, seeks, the map, the final
    /// `fdatasync`).
    pub errors: Vec<WriteBackError>,
    /// Pages considered: those below the memory file's end, the backing
    /// file's end and the end of the pages the map covers.
    pub considered: u64,
    /// Pages of the region (below the memory file's end and the map's) at
    /// or past the backing file's end: not looked at, whether dirty or
    /// not (the kernel drops a truncated file's pages past its end).
    pub past_end: u64,
    /// The deadline passed before the write-back was done.
    pub out_of_time: bool,
    /// Dirty pages with data found but not written because the deadline
    /// passed.
    pub left: u64,
    /// Pages of those considered that the write-back did not reach (the
    /// deadline passed, or an error ended it): their dirty bits were not
    /// read.
    pub unexamined: u64,
    /// Data extents of the memory file visited.
    pub extents: u64,
    /// Bytes of the dirty map's bitmap read.
    pub map_bytes_read: u64,
}

impl WriteBack {
    /// Whether every dirty page with data below the backing file's end was
    /// written and synchronised.
    pub fn is_complete(&self) -> bool {
        !self.out_of_time && self.failed == 0 && self.errors.is_empty() && self.unexamined == 0
    }

    fn fail(&mut self, pages: u64, e: WriteBackError) {
        self.failed += pages;
        self.note(e);
    }

    fn note(&mut self, e: WriteBackError) {
        if self.errors.len() < ERRORS_KEPT {
            self.errors.push(e);
        }
    }
}

/// Writes back a region's dirty pages, stopping once `deadline` passes
/// (what was written is still synchronised). `Err` when nothing could be
/// tried (a descriptor missing, the dirty map's header wrong, the backing
/// file privileged); failures of single pages are counted in the result,
/// the rest still written.
pub fn write_back(fds: &RegionFds, deadline: Instant) -> Result<WriteBack, WriteBackError> {
    let memory = fds
        .memory
        .as_ref()
        .ok_or(WriteBackError::Missing("memory"))?;
    let backing = fds
        .backing
        .as_ref()
        .ok_or(WriteBackError::Missing("backing"))?;
    let dirty = fds.dirty.as_ref().ok_or(WriteBackError::Missing("dirty"))?;
    let mut map = DirtyFile::open(dirty)?;
    let stat = |f: &File, which| {
        f.metadata()
            .map_err(|source| WriteBackError::Stat { which, source })
    };
    let memory_len = stat(memory, "memory")?.len();
    let backing_meta = stat(backing, "backing")?;
    // The mode may have changed since registration.
    if privileged(backing_meta.mode()) {
        return Err(WriteBackError::Privileged {
            mode: backing_meta.mode(),
        });
    }
    let backing_len = backing_meta.len();
    let region = memory_len.div_ceil(PAGE).min(map.pages());
    let limit = region.min(backing_len.div_ceil(PAGE));
    let mut out = WriteBack {
        considered: limit,
        past_end: region - limit,
        ..WriteBack::default()
    };
    let mut runs = Runs {
        mover: Mover::new(memory, backing, backing_len),
        run: None,
        deadline,
    };
    // The first page not examined yet.
    let mut page = 0;
    'extents: while page < limit {
        let (first, end) = match next_extent(memory, page, limit) {
            Ok(Some(extent)) => extent,
            Ok(None) => {
                page = limit;
                break;
            }
            Err(source) => {
                out.note(WriteBackError::Seek { page, source });
                break;
            }
        };
        out.extents += 1;
        page = first;
        while page < end {
            let window = match map.window(page, end) {
                Ok(w) => w,
                Err(e) => {
                    out.note(e.into());
                    break 'extents;
                }
            };
            let mut dirty = window.dirty_pages();
            while let Some(p) = dirty.next() {
                if !runs.add(p, &mut out) {
                    out.left += 1 + dirty.count() as u64;
                    page = window.end();
                    break 'extents;
                }
            }
            page = window.end();
            if runs.expired(&mut out) {
                break 'extents;
            }
        }
    }
    runs.flush(&mut out);
    out.unexamined = limit - page.min(limit);
    out.map_bytes_read = map.bytes_read;
    if out.written > 0 {
        if let Err(e) = backing.sync_data() {
            let written = std::mem::take(&mut out.written);
            out.fail(written, WriteBackError::Sync(e));
        }
    }
    Ok(out)
}

/// The next data extent of the memory file at or after page `from`, as
/// pages `first..end` cut at `limit`; `None` when there is no data before
/// `limit`.
fn next_extent(memory: &File, from: u64, limit: u64) -> std::io::Result<Option<(u64, u64)>> {
    let start = match rustix::fs::seek(memory, SeekFrom::Data(from * PAGE)) {
        Ok(start) => start,
        // No data after `from`: a hole to the end.
        Err(Errno::NXIO) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let first = start / PAGE;
    if first >= limit {
        return Ok(None);
    }
    let hole = rustix::fs::seek(memory, SeekFrom::Hole(start))?;
    Ok(Some((first, hole.div_ceil(PAGE).clamp(first + 1, limit))))
}

/// Dirty pages gathered into runs and written while the deadline allows.
struct Runs<'f> {
    mover: Mover<'f>,
    /// Pages `first..end` gathered, not written yet.
    run: Option<(u64, u64)>,
    deadline: Instant,
}

impl Runs<'_> {
    /// Adds the dirty page `page` (pages come ascending), writing the run
    /// in hand if `page` does not extend it. False when the deadline
    /// passed: the run in hand is counted as left, `page` is not.
    fn add(&mut self, page: u64, out: &mut WriteBack) -> bool {
        if let Some((first, end)) = self.run {
            if end == page && end - first < RUN_PAGES {
                self.run = Some((first, end + 1));
                return true;
            }
            if !self.flush(out) {
                return false;
            }
        }
        self.run = Some((page, page + 1));
        true
    }

    /// Writes the run in hand, unless the deadline passed (then its pages
    /// are counted as left, and false returned).
    fn flush(&mut self, out: &mut WriteBack) -> bool {
        if self.run.is_none() {
            return true;
        }
        if self.expired(out) {
            return false;
        }
        if let Some((first, end)) = self.run.take() {
            self.mover.flush(first, end, out);
        }
        true
    }

    /// Whether the deadline passed; if so the run in hand is dropped and
    /// counted as left.
    fn expired(&mut self, out: &mut WriteBack) -> bool {
        if Instant::now() < self.deadline {
            return false;
        }
        out.out_of_time = true;
        if let Some((first, end)) = self.run.take() {
            out.left += end - first;
        }
        true
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
