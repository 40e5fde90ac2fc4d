//! Which windows of a far dataspace were ever written: a Redis bitmap in
//! the cluster (`pp:{<name>}:written`, bit `w` for window `w`), read whole
//! when the dataspace is opened and held here, so that a fault on a page
//! of a window never written is served as zeros without a round trip, by
//! this process and by any that opens the dataspace later.
//!
//! A window's bit is set in the cluster before its pages are first written
//! (a write cut short between the two leaves a window marked written whose
//! pages read as zeros, which they were), and only once per window and
//! opening: windows already marked cost nothing more. What another process
//! writes after this one opened is not seen here for windows this one
//! still takes as never written, as a region never sees another's writes
//! to pages it holds: opens share what was written before them.

use std::sync::atomic::{AtomicU64, Ordering};

/// The windows of one open dataspace known to hold data.
#[derive(Debug)]
pub struct WrittenWindows {
    words: Vec<AtomicU64>,
    windows: usize,
}

impl WrittenWindows {
    /// The set read from the Redis bitmap `bitmap` (Redis numbers a
    /// bitmap's bits from the most significant bit of its first byte) for
    /// a dataspace of `windows` windows; bits beyond them are ignored.
    pub fn from_bitmap(bitmap: &[u8], windows: usize) -> Self {
        let words: Vec<AtomicU64> = (0..windows.div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        for (i, &byte) in bitmap.iter().enumerate().take(windows.div_ceil(8)) {
            for bit in 0..8 {
                let w = i * 8 + bit;
                if byte & (0x80 >> bit) != 0 && w < windows {
                    words[w / 64].fetch_or(1 << (w % 64), Ordering::Relaxed);
                }
            }
        }
        WrittenWindows { words, windows }
    }

    /// Whether window `w` holds data (false: every page of it is zero).
    /// Windows beyond the dataspace's end count as written: the store
    /// reads them, and answers what it answers past the end.
    pub fn contains(&self, w: usize) -> bool {
        w >= self.windows || self.words[w / 64].load(Ordering::Acquire) & (1 << (w % 64)) != 0
    }

    /// Records window `w` as written (its bit is set in the cluster).
    pub fn insert(&self, w: usize) {
        if w < self.windows {
            self.words[w / 64].fetch_or(1 << (w % 64), Ordering::Release);
        }
    }

    /// The windows among `windows` not known to be written, in order.
    pub fn unwritten(&self, windows: impl Iterator<Item = usize>) -> Vec<usize> {
        windows.filter(|&w| !self.contains(w)).collect()
    }

    /// Bytes held: a bit per window.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_bits_are_read_in_redis_order_from_the_high_bit_of_each_byte() {
        // SETBIT k 0 1, SETBIT k 9 1, SETBIT k 70 1.
        let mut bitmap = vec![0u8; 9];
        bitmap[0] = 0x80;
        bitmap[1] = 0x40;
        bitmap[8] = 0x02;
        let w = WrittenWindows::from_bitmap(&bitmap, 100);
        let set: Vec<usize> = (0..100).filter(|&i| w.contains(i)).collect();
        assert_eq!(set, vec![0, 9, 70]);
    }

    #[test]
    fn test_a_short_or_missing_bitmap_leaves_later_windows_unwritten() {
        let w = WrittenWindows::from_bitmap(&[], 10);
        assert!((0..10).all(|i| !w.contains(i)));
        assert_eq!(w.unwritten(0..10).len(), 10);
        w.insert(3);
        assert!(w.contains(3));
        assert_eq!(w.unwritten(2..5), vec![2, 4]);
    }

    #[test]
    fn test_bits_past_the_dataspace_are_ignored_and_windows_past_it_count_as_written() {
        let w = WrittenWindows::from_bitmap(&[0xff, 0xff], 3);
        assert!((0..3).all(|i| w.contains(i)));
        let w = WrittenWindows::from_bitmap(&[0x00], 3);
        assert!(!w.contains(2));
        assert!(
            w.contains(3) && w.contains(64),
            "beyond the end: read, not assumed zero"
        );
    }
}
