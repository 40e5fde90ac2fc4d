//! The descriptors a `RegisterRegion` brings (`SCM_RIGHTS`, in the order
//! memory, backing, dirty), checked before the core hears of the region
//! and kept until the region is unregistered or its client is gone.
//!
//! The daemon trusts nothing a client sends: each descriptor is checked
//! for what the write-back of a dead client will do with it. The dirty map
//! is read with `pread` rather than mapped: a client that shrinks a
//! mapped file would make the daemon's next read of it a `SIGBUS`, which
//! would kill the daemon for everyone.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::sync::atomic::AtomicU64;

use pagepilot_protocol::{DirtyMap, DirtyMapError, RegionFiles, DIRTY_MAGIC};
use rustix::fs::OFlags;

/// Bytes of a page (a frame).
pub const PAGE: u64 = 4096;

/// The largest dirty map accepted: 1 GiB, the bits of 32 TiB of pages.
pub const MAX_DIRTY_BYTES: u64 = 1 << 30;

/// Why a descriptor that came with a `RegisterRegion` was refused (the
/// text of the `BadFiles` reply).
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// More or fewer descriptors than the registration's `files` announce
    /// (the transport should have caught it).
    #[error("{announced} descriptors announced, {arrived} arrived")]
    Count {
        /// Announced by the message.
        announced: u16,
        /// Received.
        arrived: usize,
    },
    /// The checks did not finish in time (a file on a file system that
    /// does not answer).
    #[error(
        "the descriptors could not be checked within {0:?}: a file on a file system that does \
         not answer?"
    )]
    TimedOut(std::time::Duration),
    /// `fstat` failed.
    #[error("the {which} descriptor: fstat failed: {source}")]
    Stat {
        /// Which descriptor.
        which: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// Not a regular file (a memfd is one).
    #[error("the {which} descriptor is a {kind}, not a regular file or memfd")]
    NotRegular {
        /// Which descriptor.
        which: &'static str,
        /// What it is.
        kind: &'static str,
    },
    /// The memory file's size is not whole pages.
    #[error("the memory descriptor's size {0} is not a multiple of 4096")]
    MemoryNotPages(u64),
    /// The backing file cannot be written through this descriptor.
    #[error("the backing descriptor is open read-only: write-back needs O_WRONLY or O_RDWR")]
    BackingReadOnly,
    /// Writes through the backing descriptor would land at its end.
    #[error("the backing descriptor is open with O_APPEND: pages would not land at their offsets")]
    BackingAppend,
    /// `fcntl(F_GETFL)` failed.
    #[error("the backing descriptor: fcntl(F_GETFL) failed: {0}")]
    Flags(std::io::Error),
    /// The dirty map is beyond [`MAX_DIRTY_BYTES`].
    #[error("the dirty descriptor holds {0} bytes, more than the 1 GiB a dirty map may take")]
    DirtyTooLarge(u64),
    /// The dirty map could not be read.
    #[error("the dirty descriptor cannot be read: {0}")]
    DirtyRead(std::io::Error),
    /// The dirty map's header is wrong.
    #[error("the dirty descriptor: {0}")]
    DirtyMap(#[from] DirtyMapError),
    /// The dirty map covers more pages than the memory file holds.
    #[error(
        "the dirty descriptor covers {pages} pages, the memory descriptor holds {memory_pages}"
    )]
    DirtyBeyondMemory {
        /// Pages the map covers.
        pages: u64,
        /// Pages in the memory file.
        memory_pages: u64,
    },
}

/// A region's descriptors, as checked at registration.
#[derive(Debug, Default)]
pub struct RegionFds {
    /// The region's memory (its memfd).
    pub memory: Option<File>,
    /// The file its pages are written back to.
    pub backing: Option<File>,
    /// The memory holding its dirty bits ([`DirtyMap`] layout).
    pub dirty: Option<File>,
}

impl RegionFds {
    /// Whether the daemon can write the region back for a dead client:
    /// it knows which pages are dirty, where their bytes are and where
    /// they go.
    pub fn can_write_back(&self) -> bool {
        self.memory.is_some() && self.backing.is_some() && self.dirty.is_some()
    }
}

/// Checks the descriptors `fds` that came with a registration announcing
/// `files`, and keeps them.
pub fn check(files: RegionFiles, fds: Vec<OwnedFd>) -> Result<RegionFds, FilesError> {
    if fds.len() != usize::from(files.count()) {
        return Err(FilesError::Count {
            announced: files.count(),
            arrived: fds.len(),
        });
    }
    let mut fds = fds.into_iter().map(File::from);
    let mut next = |wanted: bool| if wanted { fds.next() } else { None };
    let kept = RegionFds {
        memory: next(files.memory),
        backing: next(files.backing),
        dirty: next(files.dirty),
    };
    let memory_pages = match &kept.memory {
        Some(m) => {
            let size = regular_size(m, "memory")?;
            if size % PAGE != 0 {
                return Err(FilesError::MemoryNotPages(size));
            }
            Some(size / PAGE)
        }
        None => None,
    };
    if let Some(b) = &kept.backing {
        regular_size(b, "backing")?;
        let flags = rustix::fs::fcntl_getfl(b).map_err(|e| FilesError::Flags(e.into()))?;
        if !flags.intersects(OFlags::WRONLY | OFlags::RDWR) {
            return Err(FilesError::BackingReadOnly);
        }
        if flags.contains(OFlags::APPEND) {
            return Err(FilesError::BackingAppend);
        }
    }
    if let Some(d) = &kept.dirty {
        let size = regular_size(d, "dirty")?;
        if size > MAX_DIRTY_BYTES {
            return Err(FilesError::DirtyTooLarge(size));
        }
        let pages = dirty_header(d, size)?;
        if let Some(memory_pages) = memory_pages.filter(|&m| pages > m) {
            return Err(FilesError::DirtyBeyondMemory {
                pages,
                memory_pages,
            });
        }
    }
    Ok(kept)
}

/// The size of a regular file (a memfd is one), or why it is not one.
fn regular_size(file: &File, which: &'static str) -> Result<u64, FilesError> {
    let meta = file
        .metadata()
        .map_err(|source| FilesError::Stat { which, source })?;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(meta.len());
    } else if t.is_dir() {
        "directory"
    } else if t.is_socket() {
        "socket"
    } else if t.is_fifo() {
        "pipe"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "file of another kind"
    };
    Err(FilesError::NotRegular { which, kind })
}

/// Checks a dirty map's header against the file's `size` (as
/// [`DirtyMap::open`] would against a mapping of it) and returns the pages
/// it covers, reading only the header.
fn dirty_header(file: &File, size: u64) -> Result<u64, FilesError> {
    let mut header = [0u8; 16];
    let got = read_at_most(file, &mut header, 0).map_err(FilesError::DirtyRead)?;
    let word = |i: usize| u64::from_le_bytes(header[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    let words = usize::try_from(size / 8).unwrap_or(usize::MAX);
    if got < 16 {
        return Err(DirtyMapError::TooSmall {
            pages: 0,
            needed: 2,
            words,
        }
        .into());
    }
    if word(0) != DIRTY_MAGIC {
        return Err(DirtyMapError::BadMagic(word(0)).into());
    }
    let pages = word(1);
    let needed = DirtyMap::bytes_for(pages);
    if u64::try_from(needed).map_or(true, |n| n > size) {
        return Err(DirtyMapError::TooSmall {
            pages,
            needed: needed / 8,
            words,
        }
        .into());
    }
    Ok(pages)
}

/// Reads into `buf` at `offset` until it is full or the file ends; returns
/// the bytes read.
pub(crate) fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Words of a dirty map read in one go by the write-back.
const WINDOW_WORDS: usize = 8192;

/// The pages a dirty file marks, ascending, read a window of 64 KiB at a
/// time so that the daemon's memory does not grow with a client's map.
/// Each window is itself read as a [`DirtyMap`] of its own pages, so the
/// bitmap has one interpretation, the protocol crate's.
pub fn dirty_pages(
    file: &File,
    memory_pages: u64,
    mut each: impl FnMut(u64),
) -> Result<(), FilesError> {
    let size = regular_size(file, "dirty")?.min(MAX_DIRTY_BYTES);
    let pages = dirty_header(file, size)?.min(memory_pages);
    let mut bytes = vec![0u8; WINDOW_WORDS * 8];
    let mut first = 0u64;
    while first < pages {
        let window = (pages - first).min(WINDOW_WORDS as u64 * 64);
        let len = usize::try_from(window.div_ceil(64) * 8).unwrap_or(bytes.len());
        let offset = 16 + first / 8;
        let got = read_at_most(file, &mut bytes[..len], offset).map_err(FilesError::DirtyRead)?;
        // A file shrunk since registration ends the map where it ends.
        let covered = window.min((got / 8) as u64 * 64);
        let mut words = vec![AtomicU64::new(DIRTY_MAGIC), AtomicU64::new(covered)];
        words.extend(
            bytes[..got]
                .chunks_exact(8)
                .map(|w| AtomicU64::new(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))),
        );
        DirtyMap::open(&words)?
            .dirty_pages()
            .for_each(|p| each(first + p));
        if covered < window {
            break;
        }
        first += window;
    }
    Ok(())
}
