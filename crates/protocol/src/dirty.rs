//! The dirty state a client shares with the daemon: one bit per page of a
//! region, in memory both map (a memfd passed with `RegisterRegion`), so
//! that the daemon can write back the pages of a client that died.
//!
//! Layout, 64-bit little-endian words: word 0 is [`DIRTY_MAGIC`], word 1
//! the region's pages, then the bitmap (page `p` is bit `p % 64` of word
//! `2 + p / 64`). The client sets a page's bit before the page can be
//! written (before it is mapped writable) and clears it only once the
//! page's write-back is complete; the daemon reads it when the client is
//! gone. The daemon trusts nothing in it: [`DirtyMap::open`] checks the
//! magic and that the bitmap fits the memory it was given.

use std::sync::atomic::{AtomicU64, Ordering};

/// Word 0 of a dirty map: "ppdirty1".
pub const DIRTY_MAGIC: u64 = u64::from_le_bytes(*b"ppdirty1");

/// Words before the bitmap.
const HEADER_WORDS: usize = 2;

/// Memory that is not a dirty map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DirtyMapError {
    /// Word 0 is not [`DIRTY_MAGIC`].
    #[error("dirty map: word 0 is {0:#018x}, not the magic \"ppdirty1\"")]
    BadMagic(u64),
    /// The page count needs more memory than was given.
    #[error("dirty map: {pages} pages need {needed} words, the memory holds {words}")]
    TooSmall {
        /// Pages the header claims (or the writer asked for).
        pages: u64,
        /// Words those pages need.
        needed: usize,
        /// Words given.
        words: usize,
    },
}

/// A region's dirty bits in shared memory.
#[derive(Clone, Copy, Debug)]
pub struct DirtyMap<'a> {
    words: &'a [AtomicU64],
    pages: u64,
}

impl<'a> DirtyMap<'a> {
    /// Bytes of memory a map of `pages` pages takes.
    pub fn bytes_for(pages: u64) -> usize {
        (HEADER_WORDS + words_for(pages).unwrap_or(usize::MAX / 16)) * 8
    }

    /// Writes a fresh map of `pages` clean pages into `words` (the client's
    /// side, at registration).
    pub fn init(words: &'a [AtomicU64], pages: u64) -> Result<DirtyMap<'a>, DirtyMapError> {
        let map = DirtyMap::fit(words, pages)?;
        for w in &words[HEADER_WORDS..] {
            w.store(0, Ordering::Relaxed);
        }
        words[1].store(pages, Ordering::Relaxed);
        words[0].store(DIRTY_MAGIC, Ordering::Release);
        Ok(map)
    }

    /// Writes the header of a fresh map of `pages` clean pages into memory
    /// known to hold zeros (a new memfd): the bitmap is left untouched, so
    /// that a map of a large sparse region costs memory only where pages
    /// are written ([`DirtyMap::init`] stores every word).
    pub fn init_zeroed(words: &'a [AtomicU64], pages: u64) -> Result<DirtyMap<'a>, DirtyMapError> {
        let map = DirtyMap::fit(words, pages)?;
        words[1].store(pages, Ordering::Relaxed);
        words[0].store(DIRTY_MAGIC, Ordering::Release);
        Ok(map)
    }

    /// Reads a map another process wrote (the daemon's side), checking its
    /// header against the memory given.
    pub fn open(words: &'a [AtomicU64]) -> Result<DirtyMap<'a>, DirtyMapError> {
        let too_small = DirtyMapError::TooSmall {
            pages: 0,
            needed: HEADER_WORDS,
            words: words.len(),
        };
        let magic = words.first().ok_or(too_small)?.load(Ordering::Acquire);
        if magic != DIRTY_MAGIC {
            return Err(DirtyMapError::BadMagic(magic));
        }
        let pages = words.get(1).ok_or(too_small)?.load(Ordering::Relaxed);
        DirtyMap::fit(words, pages)
    }

    fn fit(words: &'a [AtomicU64], pages: u64) -> Result<DirtyMap<'a>, DirtyMapError> {
        let needed = words_for(pages).and_then(|w| w.checked_add(HEADER_WORDS));
        match needed {
            Some(needed) if needed <= words.len() => Ok(DirtyMap { words, pages }),
            _ => Err(DirtyMapError::TooSmall {
                pages,
                needed: needed.unwrap_or(usize::MAX),
                words: words.len(),
            }),
        }
    }

    /// The region's pages.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Marks `page` dirty or clean. Marking dirty is ordered before what
    /// follows (the mapping that lets the page be written).
    pub fn set(&self, page: u64, dirty: bool) {
        if page >= self.pages {
            return;
        }
        let (word, bit) = self.locate(page);
        if dirty {
            word.fetch_or(bit, Ordering::SeqCst);
        } else {
            word.fetch_and(!bit, Ordering::Release);
        }
    }

    /// Whether `page` is marked dirty.
    pub fn is_dirty(&self, page: u64) -> bool {
        page < self.pages && {
            let (word, bit) = self.locate(page);
            word.load(Ordering::Acquire) & bit != 0
        }
    }

    /// The pages marked dirty, ascending.
    pub fn dirty_pages(&self) -> impl Iterator<Item = u64> + '_ {
        let bitmap = &self.words[HEADER_WORDS..HEADER_WORDS + words_for(self.pages).unwrap_or(0)];
        bitmap
            .iter()
            .enumerate()
            .flat_map(move |(i, w)| {
                let mut bits = w.load(Ordering::Acquire);
                std::iter::from_fn(move || {
                    (bits != 0).then(|| {
                        let b = u64::from(bits.trailing_zeros());
                        bits &= bits - 1;
                        i as u64 * 64 + b
                    })
                })
            })
            .filter(|&p| p < self.pages)
    }

    fn locate(&self, page: u64) -> (&AtomicU64, u64) {
        (
            &self.words[HEADER_WORDS + (page / 64) as usize],
            1 << (page % 64),
        )
    }
}

fn words_for(pages: u64) -> Option<usize> {
    usize::try_from(pages.div_ceil(64)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn pages_marked_dirty_are_read_back_by_the_other_side() {
        let mem = memory(DirtyMap::bytes_for(130) / 8);
        let writer = DirtyMap::init(&mem, 130).unwrap();
        for p in [0, 63, 64, 129] {
            writer.set(p, true);
        }
        writer.set(63, false);
        let reader = DirtyMap::open(&mem).unwrap();
        assert_eq!(reader.pages(), 130);
        assert_eq!(reader.dirty_pages().collect::<Vec<_>>(), vec![0, 64, 129]);
        assert!(reader.is_dirty(129) && !reader.is_dirty(63) && !reader.is_dirty(1000));
    }

    #[test]
    fn open_refuses_memory_without_the_magic() {
        let mem = memory(4);
        assert_eq!(
            DirtyMap::open(&mem).unwrap_err(),
            DirtyMapError::BadMagic(0)
        );
        assert!(matches!(
            DirtyMap::open(&[]),
            Err(DirtyMapError::TooSmall { .. })
        ));
    }

    #[test]
    fn open_refuses_a_page_count_the_memory_cannot_hold() {
        let mem = memory(3);
        DirtyMap::init(&mem, 64).unwrap();
        mem[1].store(65, Ordering::Relaxed);
        let err = DirtyMap::open(&mem).unwrap_err();
        assert_eq!(
            err,
            DirtyMapError::TooSmall {
                pages: 65,
                needed: 4,
                words: 3
            }
        );
        mem[1].store(u64::MAX, Ordering::Relaxed);
        assert!(matches!(
            DirtyMap::open(&mem),
            Err(DirtyMapError::TooSmall { .. })
        ));
    }

    #[test]
    fn a_map_initialised_over_zeroed_memory_opens_clean() {
        let mem = memory(DirtyMap::bytes_for(200) / 8);
        let writer = DirtyMap::init_zeroed(&mem, 200).unwrap();
        writer.set(199, true);
        let reader = DirtyMap::open(&mem).unwrap();
        assert_eq!(reader.pages(), 200);
        assert_eq!(reader.dirty_pages().collect::<Vec<_>>(), vec![199]);
        assert!(matches!(
            DirtyMap::init_zeroed(&mem[..3], 200),
            Err(DirtyMapError::TooSmall { .. })
        ));
    }

    #[test]
    fn bits_beyond_the_last_page_are_ignored() {
        let mem = memory(3);
        let map = DirtyMap::init(&mem, 10).unwrap();
        mem[2].store(u64::MAX, Ordering::Relaxed);
        map.set(10, true);
        assert_eq!(map.dirty_pages().count(), 10);
    }
}
