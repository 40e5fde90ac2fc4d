//! A region's pinned (locked) pages, the Cache Kernel's locked mappings:
//! never victims, counted against its user's pin quota. Kept as disjoint
//! ranges of page numbers; pinning a page twice pins it once.

use std::collections::BTreeMap;

/// Bytes of a page: pins arrive in bytes and are counted in pages.
pub const PAGE_SIZE: u64 = 4096;

/// The most separate pinned ranges a region may have, so that a client
/// pinning every other page cannot grow the daemon's memory without bound.
pub const MAX_PIN_RANGES: usize = 4096;

/// Why a pin or unpin was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// An empty range, or one whose end overflows.
    #[error("the range of {len} bytes at offset {offset} is empty or overflows")]
    Empty {
        /// Its offset, bytes.
        offset: u64,
        /// Its length, bytes.
        len: u64,
    },
    /// Unpinning pages that are not pinned.
    #[error("pages {first}..{end} are not all pinned")]
    NotPinned {
        /// The first page of the range.
        first: u64,
        /// One past its last page.
        end: u64,
    },
    /// Pinning would split the pins into too many separate ranges.
    #[error("pinning would make more than {max} separate pinned ranges in the region", max = MAX_PIN_RANGES)]
    TooManyRanges,
}

/// Pages `first..end` covering `len` bytes at `offset`.
pub fn pages(offset: u64, len: u64) -> Result<(u64, u64), PinError> {
    let end = offset
        .checked_add(len)
        .filter(|_| len > 0)
        .ok_or(PinError::Empty { offset, len })?;
    Ok((offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE)))
}

/// Pinned pages as disjoint, non-adjacent ranges: start → end (exclusive).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinSet {
    ranges: BTreeMap<u64, u64>,
    pages: u64,
}

impl PinSet {
    /// Pages pinned.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Separate ranges pinned.
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }

    /// Pages of `first..end` not pinned yet: what pinning it would add.
    pub fn unpinned_in(&self, first: u64, end: u64) -> u64 {
        (end - first) - self.overlap(first, end)
    }

    fn overlap(&self, first: u64, end: u64) -> u64 {
        self.touching(first, end)
            .map(|(s, e)| e.min(end).saturating_sub(s.max(first)))
            .sum()
    }

    /// The ranges that overlap or touch `first..end`.
    fn touching(&self, first: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let from = self
            .ranges
            .range(..first)
            .next_back()
            .filter(|(_, &e)| e >= first)
            .map_or(first, |(&s, _)| s);
        self.ranges.range(from..=end).map(|(&s, &e)| (s, e))
    }

    /// Pins pages `first..end`; returns how many were not pinned before.
    pub fn pin(&mut self, first: u64, end: u64) -> Result<u64, PinError> {
        let merged: Vec<(u64, u64)> = self.touching(first, end).collect();
        if self.ranges.len() + 1 - merged.len() > MAX_PIN_RANGES {
            return Err(PinError::TooManyRanges);
        }
        let added = self.unpinned_in(first, end);
        let (mut s, mut e) = (first, end);
        for (ms, me) in merged {
            self.ranges.remove(&ms);
            s = s.min(ms);
            e = e.max(me);
        }
        self.ranges.insert(s, e);
        self.pages += added;
        Ok(added)
    }

    /// Unpins pages `first..end`, which must all be pinned; returns how many.
    pub fn unpin(&mut self, first: u64, end: u64) -> Result<u64, PinError> {
        let Some((&s, &e)) = self.ranges.range(..=first).next_back() else {
            return Err(PinError::NotPinned { first, end });
        };
        if e < end {
            return Err(PinError::NotPinned { first, end });
        }
        let split = usize::from(s < first && end < e);
        if self.ranges.len() + split > MAX_PIN_RANGES {
            return Err(PinError::TooManyRanges);
        }
        self.ranges.remove(&s);
        if s < first {
            self.ranges.insert(s, first);
        }
        if end < e {
            self.ranges.insert(end, e);
        }
        self.pages -= end - first;
        Ok(end - first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_byte_ranges_cover_every_page_they_touch() {
        assert_eq!(pages(0, 1), Ok((0, 1)));
        assert_eq!(pages(4095, 2), Ok((0, 2)));
        assert_eq!(pages(8192, 8192), Ok((2, 4)));
        assert!(pages(5, 0).is_err());
        assert!(pages(u64::MAX, 1).is_err());
    }

    #[test]
    fn test_pinning_twice_counts_once_and_adjacent_ranges_merge() {
        let mut p = PinSet::default();
        assert_eq!(p.pin(0, 4), Ok(4));
        assert_eq!(p.pin(2, 6), Ok(2));
        assert_eq!(p.pin(6, 8), Ok(2));
        assert_eq!((p.pages(), p.ranges()), (8, 1));
        assert_eq!(p.pin(10, 12), Ok(2));
        assert_eq!(p.pin(0, 20), Ok(10));
        assert_eq!((p.pages(), p.ranges()), (20, 1));
    }

    #[test]
    fn test_unpinning_the_middle_splits_and_unpinning_what_is_not_pinned_is_refused() {
        let mut p = PinSet::default();
        p.pin(0, 10).unwrap();
        assert_eq!(p.unpin(3, 5), Ok(2));
        assert_eq!((p.pages(), p.ranges()), (8, 2));
        assert_eq!(p.unpin(2, 4), Err(PinError::NotPinned { first: 2, end: 4 }));
        assert_eq!(
            p.unpin(20, 21),
            Err(PinError::NotPinned { first: 20, end: 21 })
        );
        assert_eq!(p.unpin(0, 3), Ok(3));
        assert_eq!(p.unpin(5, 10), Ok(5));
        assert_eq!((p.pages(), p.ranges()), (0, 0));
    }

    #[test]
    fn test_pinning_every_other_page_stops_at_the_range_bound() {
        let mut p = PinSet::default();
        for i in 0..MAX_PIN_RANGES as u64 {
            p.pin(2 * i, 2 * i + 1).unwrap();
        }
        let before = p.clone();
        assert_eq!(
            p.pin(
                2 * MAX_PIN_RANGES as u64 + 10,
                2 * MAX_PIN_RANGES as u64 + 11
            ),
            Err(PinError::TooManyRanges)
        );
        // Filling a gap merges two ranges: allowed.
        assert_eq!(p.pin(1, 2), Ok(1));
        assert_eq!(before.ranges() - 1, p.ranges());
    }
}
