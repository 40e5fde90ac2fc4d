//! The pages of an anonymous region written to its swap file: a bitmap in
//! words of 64 pages, a word held only once one of its pages was written, so
//! that it costs what was written, not the region's size (8 TiB of pages
//! would take 256 MiB of bits).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use pagepilot_policy::hash::BuildVpnHasher;

/// A set of page numbers, added to and read from any thread.
#[derive(Default)]
pub(crate) struct StoredPages {
    words: RwLock<HashMap<u32, AtomicU64, BuildVpnHasher>>,
}

impl StoredPages {
    /// Whether `page` was added.
    pub fn contains(&self, page: usize) -> bool {
        let words = self.words.read().unwrap_or_else(|p| p.into_inner());
        words
            .get(&((page / 64) as u32))
            .is_some_and(|w| w.load(Ordering::Acquire) & (1 << (page % 64)) != 0)
    }

    /// Adds pages `first..first + pages`.
    pub fn add(&self, first: usize, pages: usize) {
        let mut page = first;
        while page < first + pages {
            let key = (page / 64) as u32;
            let end = (first + pages).min((key as usize + 1) * 64);
            let bits = (page..end).fold(0u64, |b, p| b | 1 << (p % 64));
            let words = self.words.read().unwrap_or_else(|p| p.into_inner());
            match words.get(&key) {
                Some(w) => {
                    w.fetch_or(bits, Ordering::Release);
                }
                None => {
                    drop(words);
                    let mut words = self.words.write().unwrap_or_else(|p| p.into_inner());
                    let w = words.entry(key).or_insert_with(|| AtomicU64::new(0));
                    w.fetch_or(bits, Ordering::Release);
                }
            }
            page = end;
        }
    }

    /// Bytes held by the map: a key, a word and a control byte per entry.
    pub fn bytes(&self) -> usize {
        let words = self.words.read().unwrap_or_else(|p| p.into_inner());
        words.capacity() * (std::mem::size_of::<(u32, AtomicU64)>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_stored_pages_hold_what_was_added_across_words_and_nothing_else() {
        let s = StoredPages::default();
        let far = (1usize << 31) - 3;
        s.add(62, 5);
        s.add(far, 3);
        for p in 62..67 {
            assert!(s.contains(p), "{p}");
        }
        assert!(!s.contains(61) && !s.contains(67));
        assert!(s.contains(far) && s.contains(far + 2) && !s.contains(far - 1));
        // Three words, not a bit per page of 8 TiB.
        assert!(s.bytes() < 1024, "{}", s.bytes());
    }
}
