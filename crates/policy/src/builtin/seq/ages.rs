//! SEQ's deletion order for the sequence list.
//!
//! When adding a sequence would exceed X, SEQ deletes the oldest sequence (by
//! time of its most recent fault) of length less than L; if there is none, the
//! oldest of length at most 2L, then at most 4L, and so on. Sequences are kept
//! in length classes (`< L`, `L..=2L`, `2L+1..=4L`, ...), each an intrusive
//! list in order of last fault, so the choice is O(1) and needs no allocation.

const NIL: u32 = u32::MAX;
const NONE: u8 = u8::MAX;
/// Number of length classes; lengths are below 2^63, so 64 always suffice.
const CLASSES: usize = 64;

/// Sequences by length class, each class oldest first.
#[derive(Debug)]
pub struct Ages {
    prev: Vec<u32>,
    next: Vec<u32>,
    class: Vec<u8>,
    head: [u32; CLASSES],
    tail: [u32; CLASSES],
    /// Bit k set when class k is not empty.
    nonempty: u64,
}

/// The deletion class of a sequence of `len` pages: 0 for `len < l`, else the
/// smallest `k >= 1` with `len <= 2^k * l`.
pub fn class_of(len: u64, l: u64) -> u8 {
    if len < l {
        return 0;
    }
    let q = len.div_ceil(l);
    let k = if q <= 1 {
        0
    } else {
        64 - (q - 1).leading_zeros()
    };
    k.clamp(1, CLASSES as u32 - 1) as u8
}

impl Ages {
    /// An empty order.
    pub fn new() -> Self {
        Ages {
            prev: Vec::new(),
            next: Vec::new(),
            class: Vec::new(),
            head: [NIL; CLASSES],
            tail: [NIL; CLASSES],
            nonempty: 0,
        }
    }

    fn ensure(&mut self, id: u32) {
        let need = id as usize + 1;
        if self.class.len() < need {
            self.prev.resize(need, NIL);
            self.next.resize(need, NIL);
            self.class.resize(need, NONE);
        }
    }

    /// The class `id` is in, if any.
    pub fn class(&self, id: u32) -> Option<u8> {
        self.class.get(id as usize).copied().filter(|&c| c != NONE)
    }

    /// Adds `id` as the newest of class `c`.
    pub fn push_newest(&mut self, c: u8, id: u32) {
        let tail = self.tail[c as usize];
        self.link_after(c, id, tail);
    }

    /// Adds `id` to class `c` in order of last fault, walking from the newest
    /// end: needed only when a split leaves a sequence whose last fault is
    /// not the current one.
    pub fn insert_in_order(&mut self, c: u8, id: u32, last: impl Fn(u32) -> u64) {
        let t = last(id);
        let mut after = self.tail[c as usize];
        while after != NIL && last(after) > t {
            after = self.prev[after as usize];
        }
        self.link_after(c, id, after);
    }

    /// Links `id` into class `c` right after `after` (NIL: at the front).
    fn link_after(&mut self, c: u8, id: u32, after: u32) {
        self.ensure(id);
        debug_assert_eq!(self.class[id as usize], NONE);
        let ci = c as usize;
        let before = if after == NIL {
            self.head[ci]
        } else {
            self.next[after as usize]
        };
        let i = id as usize;
        self.prev[i] = after;
        self.next[i] = before;
        if after == NIL {
            self.head[ci] = id;
        } else {
            self.next[after as usize] = id;
        }
        if before == NIL {
            self.tail[ci] = id;
        } else {
            self.prev[before as usize] = id;
        }
        self.class[i] = c;
        self.nonempty |= 1 << c;
    }

    /// Makes `id` the newest of class `c` (it just faulted).
    pub fn touch(&mut self, c: u8, id: u32) {
        if self.class(id) == Some(c) && self.tail[c as usize] == id {
            return;
        }
        self.remove(id);
        self.push_newest(c, id);
    }

    /// Removes `id` from its class, if it is in one.
    pub fn remove(&mut self, id: u32) {
        let Some(c) = self.class(id) else {
            return;
        };
        let (i, ci) = (id as usize, c as usize);
        let (p, n) = (self.prev[i], self.next[i]);
        if p == NIL {
            self.head[ci] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail[ci] = p;
        } else {
            self.prev[n as usize] = p;
        }
        if self.head[ci] == NIL {
            self.nonempty &= !(1 << c);
        }
        self.prev[i] = NIL;
        self.next[i] = NIL;
        self.class[i] = NONE;
    }

    /// The sequence SEQ deletes first: the oldest of the lowest non-empty class.
    pub fn first_to_delete(&self) -> Option<u32> {
        (self.nonempty != 0).then(|| self.head[self.nonempty.trailing_zeros() as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_length_classes_follow_l_2l_4l() {
        let l = 20;
        assert_eq!(class_of(1, l), 0);
        assert_eq!(class_of(19, l), 0);
        assert_eq!(class_of(20, l), 1);
        assert_eq!(class_of(40, l), 1);
        assert_eq!(class_of(41, l), 2);
        assert_eq!(class_of(80, l), 2);
        assert_eq!(class_of(81, l), 3);
        assert_eq!(class_of(u64::MAX >> 1, 1), 63);
    }

    #[test]
    fn test_first_to_delete_is_oldest_of_lowest_class() {
        let mut a = Ages::new();
        a.push_newest(2, 7);
        a.push_newest(1, 3);
        a.push_newest(1, 4);
        assert_eq!(a.first_to_delete(), Some(3));
        a.remove(3);
        assert_eq!(a.first_to_delete(), Some(4));
        a.remove(4);
        assert_eq!(a.first_to_delete(), Some(7));
        a.remove(7);
        assert_eq!(a.first_to_delete(), None);
    }

    #[test]
    fn test_insert_in_order_places_by_last_fault() {
        let last = |id: u32| [10, 30, 20, 40][id as usize];
        let mut a = Ages::new();
        a.push_newest(0, 0);
        a.push_newest(0, 1);
        a.push_newest(0, 3);
        a.insert_in_order(0, 2, last);
        let mut order = Vec::new();
        while let Some(id) = a.first_to_delete() {
            order.push(id);
            a.remove(id);
        }
        assert_eq!(order, vec![0, 2, 1, 3]);
    }
}
