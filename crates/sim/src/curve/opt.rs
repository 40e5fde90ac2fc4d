//! OPT stack distances in one pass (Mattson et al. 1970, with Belady's
//! priority: the page referenced soonest is kept).
//!
//! The OPT stack orders the seen pages so that the top `c` are exactly what
//! OPT keeps with `c` frames. When the page at depth `d` is referenced it
//! moves to the top, and the repair of depths `1..d` only moves the pages that
//! are *records*: those whose next reference is later than that of every page
//! above them. Each record takes the previous record's place and the last
//! one drops to depth `d` (Sugumar and Abraham 1993 exploit the same
//! structure). A max-tree over next-reference times finds each record in
//! O(log pages), so a reference costs O((records + 1) log pages); on sweeps
//! and random traces the records are few.

use super::Curve;

const NONE: u32 = u32::MAX;

/// The whole OPT curve of `refs` (slots below `slots`).
pub fn opt(refs: &[u32], slots: usize) -> Curve {
    // Times of pages never referenced again are `len + slot`: later than any
    // reference and distinct, so the stack order is total.
    if refs.len() as u64 + slots as u64 + 1 < u64::from(u32::MAX) {
        run::<u32>(refs, slots)
    } else {
        run::<u64>(refs, slots)
    }
}

/// A next-reference time.
trait Time: Copy + Ord + Default {
    fn of(t: u64) -> Self;
}

impl Time for u32 {
    #[inline]
    fn of(t: u64) -> Self {
        t as u32
    }
}

impl Time for u64 {
    #[inline]
    fn of(t: u64) -> Self {
        t
    }
}

fn run<T: Time>(refs: &[u32], slots: usize) -> Curve {
    let n = refs.len() as u64;
    let next = next_references::<T>(refs, slots);
    let mut stack = Stack::<T>::new(slots);
    let mut hist = vec![0u64; slots + 2];
    let mut cold = 0u64;
    for (i, &x) in refs.iter().enumerate() {
        let key = next[i];
        match stack.reference(x, key) {
            Some(d) => hist[d + 1] += 1,
            None => cold += 1,
        }
    }
    Curve::from_histogram(n, cold, &hist)
}

/// For each reference, the time of the next reference to the same page, or
/// `len + slot` if there is none.
fn next_references<T: Time>(refs: &[u32], slots: usize) -> Vec<T> {
    let n = refs.len() as u64;
    let mut upcoming: Vec<T> = (0..slots as u64).map(|s| T::of(n + s)).collect();
    let mut next = vec![T::default(); refs.len()];
    for (i, &s) in refs.iter().enumerate().rev() {
        next[i] = upcoming[s as usize];
        upcoming[s as usize] = T::of(i as u64);
    }
    next
}

/// The OPT stack: pages by depth, with a max-tree of their next-reference
/// times.
struct Stack<T> {
    /// Page at each depth (0 = top).
    page: Vec<u32>,
    /// Depth of each page, `NONE` before its first reference.
    depth: Vec<u32>,
    len: usize,
    /// Leaves at `size..2 * size` hold the next-reference time at each depth;
    /// unused depths hold the zero time, which is never a record.
    tree: Vec<T>,
    size: usize,
}

impl<T: Time> Stack<T> {
    fn new(slots: usize) -> Self {
        let size = slots.max(2).next_power_of_two();
        Stack {
            page: vec![NONE; slots.max(1)],
            depth: vec![NONE; slots],
            len: 0,
            tree: vec![T::default(); 2 * size],
            size,
        }
    }

    /// References page `x`, whose next reference is at `key`; returns its
    /// depth before the reference (0-based), `None` on a first touch.
    #[inline]
    fn reference(&mut self, x: u32, key: T) -> Option<usize> {
        let at = self.depth[x as usize];
        let d = if at == NONE { self.len } else { at as usize };
        if d > 0 {
            self.repair(d);
        }
        self.place(0, x, key);
        if at == NONE {
            self.len += 1;
            None
        } else {
            Some(d)
        }
    }

    /// Pushes the top down to make room, moving each record above depth `d`
    /// into the next record's place and the last one to depth `d`.
    #[inline]
    fn repair(&mut self, d: usize) {
        let mut carry = self.page[0];
        let mut carry_key = self.tree[self.size];
        // The top is the deepest-reaching record when nothing is later.
        if self.tree[1] > carry_key {
            let mut from = 1;
            while let Some(j) = self.first_later(from, carry_key, d) {
                let (p, k) = (self.page[j], self.tree[self.size + j]);
                self.place(j, carry, carry_key);
                carry = p;
                carry_key = k;
                from = j + 1;
            }
        }
        self.place(d, carry, carry_key);
    }

    #[inline]
    fn place(&mut self, d: usize, page: u32, key: T) {
        self.page[d] = page;
        self.depth[page as usize] = d as u32;
        let mut v = self.size + d;
        self.tree[v] = key;
        while v > 1 {
            let m = self.tree[v].max(self.tree[v ^ 1]);
            v >>= 1;
            if self.tree[v] == m {
                break;
            }
            self.tree[v] = m;
        }
    }

    /// The first depth in `from..limit` whose next reference is later than
    /// `bound`.
    #[inline]
    fn first_later(&self, from: usize, bound: T, limit: usize) -> Option<usize> {
        if from >= limit {
            return None;
        }
        let mut v = self.size + from;
        loop {
            if self.tree[v] > bound {
                break;
            }
            while v & 1 == 1 {
                v >>= 1;
            }
            if v == 0 {
                return None;
            }
            v += 1;
            // `v` now starts at a depth at least `from`; stop once past `limit`.
            let level = v.leading_zeros() - self.size.leading_zeros();
            if (v << level) - self.size >= limit {
                return None;
            }
        }
        while v < self.size {
            v *= 2;
            if self.tree[v] <= bound {
                v += 1;
            }
        }
        let j = v - self.size;
        (j < limit).then_some(j)
    }
}
