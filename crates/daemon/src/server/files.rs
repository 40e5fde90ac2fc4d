//! The descriptors a `RegisterRegion` brings (`SCM_RIGHTS`, in the order
//! memory, backing, dirty), checked before the core hears of the region
//! and kept until the region is unregistered or its client is gone.
//!
//! The daemon trusts nothing a client sends: each descriptor is checked
//! for what the write-back of a dead client will do with it. The dirty map
//! is read with `pread` rather than mapped: a client that shrinks a
//! mapped file would make the daemon's next read of it a `SIGBUS`, which
//! would kill the daemon for everyone.
//!
//! The memory and dirty descriptors must be memfds (shared memory: their
//! `fstat`, `pread` and `SEEK_DATA` never wait on a device or a server),
//! told by `fcntl(F_GET_SEALS)`, which only shared memory answers and
//! which asks no file system anything. Only the backing descriptor may be
//! a file whose operations can block (a hung network or FUSE mount).
//! The backing file must not be setuid, nor setgid and group-executable:
//! the daemon writes as root, and the kernel keeps those bits on a write
//! by a process with `CAP_FSETID` where it would clear them on the
//! client's own.

use std::fs::{File, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};

use pagepilot_protocol::{DirtyMap, DirtyMapError, RegionFiles, DIRTY_MAGIC};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, StatxFlags};

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
    #[error("the {which} descriptor: fstat failed")]
    Stat {
        /// Which descriptor.
        which: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The memory or dirty descriptor is not a memfd (nor other shared
    /// memory): `fcntl(F_GET_SEALS)` failed on it.
    #[error("the {which} descriptor is not a memfd but a {kind} (F_GET_SEALS failed)")]
    NotMemfd {
        /// Which descriptor.
        which: &'static str,
        /// What it is, as far as a `statx` that asks no file system
        /// (`AT_STATX_DONT_SYNC`) tells.
        kind: &'static str,
        /// Why `F_GET_SEALS` failed (`EINVAL` for a file that is not
        /// shared memory).
        source: std::io::Error,
    },
    /// The backing file is setuid, or setgid and group-executable: a
    /// write by the daemon (root) would keep the bit the client's own
    /// write would clear.
    #[error(
        "the backing file is setuid or setgid-executable (mode {mode:o}): root's writes would keep the bit"
    )]
    BackingPrivileged {
        /// The file's mode.
        mode: u32,
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
    #[error("the dirty descriptor")]
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
    /// The region's memory (a memfd, checked).
    pub memory: Option<File>,
    /// The file its pages are written back to.
    pub backing: Option<File>,
    /// The memory holding its dirty bits ([`DirtyMap`] layout; a memfd,
    /// checked).
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
            memfd(m, "memory")?;
            let size = regular(m, "memory")?.len();
            if size % PAGE != 0 {
                return Err(FilesError::MemoryNotPages(size));
            }
            Some(size / PAGE)
        }
        None => None,
    };
    if let Some(b) = &kept.backing {
        let mode = regular(b, "backing")?.mode();
        if privileged(mode) {
            return Err(FilesError::BackingPrivileged { mode });
        }
        let flags = rustix::fs::fcntl_getfl(b).map_err(|e| FilesError::Flags(e.into()))?;
        if !flags.intersects(OFlags::WRONLY | OFlags::RDWR) {
            return Err(FilesError::BackingReadOnly);
        }
        if flags.contains(OFlags::APPEND) {
            return Err(FilesError::BackingAppend);
        }
    }
    if let Some(d) = &kept.dirty {
        memfd(d, "dirty")?;
        let size = regular(d, "dirty")?.len();
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

/// Whether a file of `mode` gives privileges to who runs it: setuid, or
/// setgid with group-execute (setgid without it marks mandatory locking,
/// and gives nothing).
pub(super) fn privileged(mode: u32) -> bool {
    let mode = Mode::from_raw_mode(mode);
    mode.contains(Mode::SUID) || mode.contains(Mode::SGID | Mode::XGRP)
}

/// Refuses a descriptor that is not a memfd (or other shared memory):
/// `F_GET_SEALS` is answered by shared memory alone, without asking any
/// file system.
fn memfd(file: &File, which: &'static str) -> Result<(), FilesError> {
    match rustix::fs::fcntl_get_seals(file) {
        Ok(_) => Ok(()),
        Err(e) => Err(FilesError::NotMemfd {
            which,
            kind: kind_without_asking(file),
            source: e.into(),
        }),
    }
}

/// What a file is, told by a `statx` that takes what the kernel knows
/// already (`AT_STATX_DONT_SYNC`: a FUSE or network file system is not
/// asked), for the message of a refusal.
fn kind_without_asking(file: &File) -> &'static str {
    let flags = AtFlags::EMPTY_PATH | AtFlags::STATX_DONT_SYNC;
    match rustix::fs::statx(file, "", flags, StatxFlags::TYPE) {
        Ok(s) => match FileType::from_raw_mode(s.stx_mode.into()) {
            FileType::RegularFile => "regular file",
            FileType::Directory => "directory",
            FileType::Socket => "socket",
            FileType::Fifo => "pipe",
            FileType::CharacterDevice => "character device",
            FileType::BlockDevice => "block device",
            _ => "file of another kind",
        },
        Err(_) => "file of unknown kind",
    }
}

/// The metadata of a regular file (a memfd is one), or why it is not one.
pub(super) fn regular(file: &File, which: &'static str) -> Result<Metadata, FilesError> {
    let meta = file
        .metadata()
        .map_err(|source| FilesError::Stat { which, source })?;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(meta);
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
pub(super) fn dirty_header(file: &File, size: u64) -> Result<u64, FilesError> {
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
