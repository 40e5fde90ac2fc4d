//! LRU stack distances: the number of distinct pages referenced since the
//! page's previous reference, plus one.
//!
//! Each seen page keeps one mark at the time of its last reference; the
//! distance is one more than the number of marks after it. Marks live in a
//! bitmap over time with a Fenwick tree of per-word counts, so a reference
//! costs O(log(pages / 64)). Time is renumbered densely whenever the window
//! fills, which keeps the structure at a few times the footprint, so it stays
//! in cache however long the trace is.

use super::Curve;

const NONE: u32 = u32::MAX;

/// The whole LRU curve of `refs` (slots below `slots`).
pub fn lru(refs: &[u32], slots: usize) -> Curve {
    let mut marks = Marks::new(slots);
    let mut last = vec![NONE; slots];
    let mut hist = vec![0u64; slots + 2];
    let mut cold = 0u64;
    for &s in refs {
        let s = s as usize;
        let l = last[s];
        if l != NONE && l + 1 == marks.now {
            // The page on top again: the stack does not change.
            hist[1] += 1;
            continue;
        }
        if l == NONE {
            cold += 1;
        } else {
            hist[marks.after(l) as usize + 1] += 1;
            marks.clear(l);
        }
        let t = marks.push(s as u32, &mut last);
        last[s] = t;
    }
    Curve::from_histogram(refs.len() as u64, cold, &hist, slots)
}

/// Marks at the last-reference times of the seen pages.
struct Marks {
    bits: Vec<u64>,
    /// Fenwick tree (1-based) over the popcounts of `bits`' words.
    tree: Vec<u32>,
    /// The page marked at each time.
    owner: Vec<u32>,
    live: u32,
    now: u32,
}

impl Marks {
    fn new(slots: usize) -> Marks {
        let span = (4 * slots + 64).max(4096).next_multiple_of(64);
        Marks {
            bits: vec![0; span / 64],
            tree: vec![0; span / 64 + 1],
            owner: vec![NONE; span],
            live: 0,
            now: 0,
        }
    }

    /// Marks at or before time `t`.
    #[inline]
    fn up_to(&self, t: u32) -> u32 {
        let w = (t / 64) as usize;
        let mut n = (self.bits[w] & (u64::MAX >> (63 - t % 64))).count_ones();
        let mut i = w;
        while i > 0 {
            n += self.tree[i];
            i &= i - 1;
        }
        n
    }

    /// Marks strictly after time `t`.
    #[inline]
    fn after(&self, t: u32) -> u32 {
        self.live - self.up_to(t)
    }

    #[inline]
    fn add(&mut self, word: usize, delta: u32) {
        let mut i = word + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }

    #[inline]
    fn clear(&mut self, t: u32) {
        let w = (t / 64) as usize;
        self.bits[w] &= !(1 << (t % 64));
        self.live -= 1;
        self.add(w, u32::MAX);
    }

    /// Marks `page` at the current time and returns that time; renumbers
    /// (updating `last`) when the window is full.
    #[inline]
    fn push(&mut self, page: u32, last: &mut [u32]) -> u32 {
        if self.now as usize == self.owner.len() {
            self.compact(last);
        }
        let t = self.now;
        let w = (t / 64) as usize;
        self.bits[w] |= 1 << (t % 64);
        self.owner[t as usize] = page;
        self.live += 1;
        self.now += 1;
        self.add(w, 1);
        t
    }

    /// Renumbers the marks to times `0..live`, keeping their order.
    #[cold]
    fn compact(&mut self, last: &mut [u32]) {
        let mut k = 0u32;
        for w in 0..self.bits.len() {
            let mut word = self.bits[w];
            while word != 0 {
                let t = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let page = self.owner[t];
                self.owner[k as usize] = page;
                last[page as usize] = k;
                k += 1;
            }
        }
        debug_assert_eq!(k, self.live);
        self.bits.fill(0);
        for t in 0..k {
            self.bits[(t / 64) as usize] |= 1 << (t % 64);
        }
        self.tree.fill(0);
        for w in 0..self.bits.len() {
            self.tree[w + 1] = self.bits[w].count_ones();
        }
        for i in 1..self.tree.len() {
            let j = i + (i & i.wrapping_neg());
            if j < self.tree.len() {
                self.tree[j] += self.tree[i];
            }
        }
        self.now = k;
    }
}
