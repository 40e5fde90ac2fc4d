//! The dirty map a file region shares with the daemon
//! ([`pagepilot_protocol::DirtyMap`]): one bit per page in a memfd of its
//! own ("pagepilot-dirty"), so that the daemon can write back the pages of
//! a client that died (SIGKILL runs no exit handler).
//!
//! The frame table mirrors its flags into it under the region's lock (in
//! its transitions and [`crate::frame_table::FrameTable::set_flags`]): a
//! page's bit is set while the page holds a frame and is MODIFIED or
//! FLUSHING, and it is set before the ioctl that lets the application write
//! the page (every path sets MODIFIED first, then maps or un-protects). It
//! is cleared when the flags no longer say so: a flush's write-back ended
//! (FLUSHING cleared, the data is in the file), or the page became Absent
//! after its write-back and punch. Entering Evicting keeps the page's flags,
//! so the bit stays set while the eviction writes the page back. A bit left
//! set on a punched page is harmless (the daemon skips holes of the
//! memfd); a bit missing on a dirty page would lose its data.
//!
//! A bitmap page of the memfd that clears entirely is punched out, so that
//! a huge sparse region written at random costs at most a page of the map
//! per dirty frame, not a bit per page of its whole size.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;

use pagepilot_protocol::DirtyMap;

use crate::frame_table::{FLUSHING, MODIFIED};
use crate::shared::Shared;
use crate::sys::{self, PAGE};

/// Words before the bitmap (the layout of `pagepilot_protocol::DirtyMap`:
/// magic, pages, then page `p` is bit `p % 64` of word `2 + p / 64`).
const HEADER_WORDS: usize = 2;
/// Words per page of the memfd.
const WORDS_PER_PAGE: usize = PAGE / 8;

/// The flags that set a page's bit (for a page holding a frame).
pub const DIRTY_FLAGS: u8 = MODIFIED | FLUSHING;

/// A region's dirty map: the memfd's mapping, written under the region's lock.
pub struct DirtyMirror {
    /// The mapping and the map over it.
    mapped: mapped::MappedMap,
    /// A descriptor of the memfd of its own, to punch emptied pages.
    fd: OwnedFd,
}

/// The one place a `'static` borrow of the dirty map's memory exists: the
/// module's privacy keeps it from the rest of the crate.
mod mapped {
    use std::io;
    use std::mem::ManuallyDrop;
    use std::sync::atomic::AtomicU64;

    use pagepilot_protocol::DirtyMap;

    use crate::sys;

    /// The dirty memfd's shared mapping and the map over it. The memory is
    /// handed out only as borrows of `self` ([`words`](Self::words),
    /// [`map`](Self::map)), so that no reference to it outlives this value;
    /// it is unmapped in `Drop` and nowhere else, so that field order does
    /// not matter: the `'static` fields have no drop glue (asserted below)
    /// and are never read after.
    pub(super) struct MappedMap {
        /// The whole mapping, as words. `'static` is a lie told only here:
        /// valid until `Drop` unmaps `mapping`.
        words: &'static [AtomicU64],
        /// The map over `words`; the same.
        map: DirtyMap<'static>,
        /// Unmapped by `Drop`, explicitly, once.
        mapping: ManuallyDrop<sys::Mapping>,
    }

    // The fields that borrow the mapping do nothing when dropped, whenever
    // that is relative to the unmap.
    const _: () = assert!(!std::mem::needs_drop::<&'static [AtomicU64]>());
    const _: () = assert!(!std::mem::needs_drop::<DirtyMap<'static>>());

    impl MappedMap {
        /// Takes `mapping` (fresh, of a new memfd: reading zeros, `bytes`
        /// long) and writes a fresh map of `pages` pages into it.
        pub(super) fn new(mapping: sys::Mapping, pages: u64) -> io::Result<MappedMap> {
            // SAFETY: the mapping is page aligned (so aligned for u64),
            // `mapping.len()` bytes long, readable and writable, and only
            // ever accessed atomically (by this process, and by the daemon
            // in its own mapping of the memfd). It stays mapped until
            // `Drop` below; the slice's `'static` never leaves this type
            // (the accessors shorten it to a borrow of `self`).
            let words: &'static [AtomicU64] = unsafe {
                std::slice::from_raw_parts(mapping.ptr().cast::<AtomicU64>(), mapping.len() / 8)
            };
            // A fresh memfd reads zeros: only the header is written.
            let map = DirtyMap::init_zeroed(words, pages)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            Ok(MappedMap {
                words,
                map,
                mapping: ManuallyDrop::new(mapping),
            })
        }

        /// The mapping's words (header and bitmap), for as long as `self`
        /// is borrowed.
        pub(super) fn words(&self) -> &[AtomicU64] {
            self.words
        }

        /// The map, for as long as `self` is borrowed.
        pub(super) fn map(&self) -> DirtyMap<'_> {
            self.map
        }
    }

    impl Drop for MappedMap {
        fn drop(&mut self) {
            // SAFETY: dropped once, here; `words` and `map` are not read
            // after (this is the value's end; they have no drop glue), and
            // no borrow of them handed out by the accessors outlives `self`.
            unsafe { ManuallyDrop::drop(&mut self.mapping) };
        }
    }
}

impl DirtyMirror {
    /// Creates the dirty memfd of a region of `pages` pages, maps it and
    /// writes a fresh map into it. Returns the memfd (for the daemon) and
    /// the mirror.
    pub fn create(pages: usize) -> io::Result<(OwnedFd, DirtyMirror)> {
        let bytes = DirtyMap::bytes_for(pages as u64);
        let fd = sys::memfd("pagepilot-dirty", bytes)?;
        let mapping = sys::Mapping::shared(fd.as_raw_fd(), bytes, true)?;
        let mapped = mapped::MappedMap::new(mapping, pages as u64)?;
        let own = fd.try_clone()?;
        Ok((fd, DirtyMirror { mapped, fd: own }))
    }

    /// The dirty memfd and its mirror for a region of `pages` pages if
    /// `shared` (a writable file region), so that the daemon can write back
    /// for a client that was killed; none otherwise.
    pub fn for_region(
        shared: bool,
        pages: usize,
    ) -> io::Result<(Option<OwnedFd>, Option<DirtyMirror>)> {
        if !shared {
            return Ok((None, None));
        }
        let (fd, mirror) = DirtyMirror::create(pages)?;
        Ok((Some(fd), Some(mirror)))
    }

    /// Mirrors page `page`'s change from table bits `old` to `new` (state
    /// and flags, [`crate::frame_table::Table`]'s byte): one atomic operation
    /// when its bit changes, nothing otherwise.
    #[inline]
    pub fn mirror(&self, page: u32, old: bool, new: bool) {
        if old == new {
            return;
        }
        self.mapped.map().set(u64::from(page), new);
        if !new {
            self.release_if_clear(page);
        }
    }

    /// Whether page `page`'s bit is set.
    #[cfg(test)]
    pub fn is_set(&self, page: u32) -> bool {
        self.mapped.map().is_dirty(u64::from(page))
    }

    /// Punches out the bitmap's page holding `page`'s bit if no bit in it
    /// is set any more (never the first page: it holds the header).
    fn release_if_clear(&self, page: u32) {
        let words = self.mapped.words();
        let word = HEADER_WORDS + page as usize / 64;
        if words[word].load(Relaxed) != 0 {
            return;
        }
        let chunk = word / WORDS_PER_PAGE;
        if chunk == 0 {
            return;
        }
        let end = ((chunk + 1) * WORDS_PER_PAGE).min(words.len());
        if words[chunk * WORDS_PER_PAGE..end]
            .iter()
            .all(|w| w.load(Relaxed) == 0)
        {
            let _ = sys::punch_hole(self.fd.as_raw_fd(), chunk * PAGE, PAGE);
        }
    }
}

/// Whether table bits `bits` (state and flags) set a page's dirty bit: the
/// page holds data (Resident, Evicting, Unwritten, Locked) and is
/// modified or being flushed. Absent and Loading pages hold no flags.
#[inline]
pub fn is_dirty(bits: u8) -> bool {
    bits & DIRTY_FLAGS != 0
}

/// The descriptors of a region the daemon needs to write its dirty pages
/// back if the client dies (`RegisterRegion`'s files, in the protocol's
/// order).
pub(crate) struct DaemonFiles<'a> {
    /// The region's frames (the memfd both views map).
    pub memory: BorrowedFd<'a>,
    /// The backing file open for writing, buffered (not O_DIRECT: the
    /// daemon writes whatever alignment it likes). `None` for anonymous
    /// memory and read-only files.
    pub backing: Option<BorrowedFd<'a>>,
    /// The dirty map's memfd ([`DirtyMap`] layout). `None` where
    /// `backing` is.
    pub dirty: Option<BorrowedFd<'a>>,
}

impl Shared {
    /// The region's descriptors for the daemon (the client glue passes them
    /// with `SCM_RIGHTS`); `None` in a child after `fork`, where the region
    /// is the kernel's mapping of the file.
    pub(crate) fn daemon_files(&self) -> Option<DaemonFiles<'_>> {
        if self.forked() {
            return None;
        }
        let dirty = self.dirty_memfd().map(|fd| fd.as_fd());
        Some(DaemonFiles {
            memory: self.views().memfd(),
            backing: dirty.and(self.store().writable_file()),
            dirty,
        })
    }
}

impl crate::Region {
    /// The raw descriptors of [`Shared::daemon_files`]: memory, backing
    /// file, dirty map (-1 where there is none). For tests that play the
    /// daemon; not an API.
    #[doc(hidden)]
    pub fn daemon_fds_for_tests(&self) -> Option<[RawFd; 3]> {
        let f = self.shared.daemon_files()?;
        let raw = |fd: Option<BorrowedFd<'_>>| fd.map_or(-1, |fd| fd.as_raw_fd());
        Some([f.memory.as_raw_fd(), raw(f.backing), raw(f.dirty)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_bitmap_page_that_clears_is_punched_but_never_the_header() {
        let (_, m) = DirtyMirror::create(100_000).unwrap();
        let allocated = || sys::allocated_bytes(m.fd.as_raw_fd()).unwrap();
        assert_eq!(allocated(), PAGE as u64, "only the header is written");
        // Page 40,000's bit is in the bitmap's second page of the memfd.
        m.mirror(40_000, false, true);
        m.mirror(40_001, false, true);
        m.mirror(3, false, true);
        assert_eq!(allocated(), 2 * PAGE as u64);
        m.mirror(40_000, true, false);
        assert_eq!(allocated(), 2 * PAGE as u64, "a bit is still set there");
        m.mirror(40_001, true, false);
        assert_eq!(allocated(), PAGE as u64);
        // (Reading a punched page of the map would allocate it again.)
        assert!(m.is_set(3));
        m.mirror(3, true, false);
        assert_eq!(allocated(), PAGE as u64, "the header's page stays");
        assert_eq!(m.mapped.map().pages(), 100_000);
    }
}
