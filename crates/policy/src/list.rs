//! An intrusive doubly linked list over page slots, the building block of the
//! queue-based policies (FIFO, LRU, MRU, CLOCK's ring).

const NIL: u32 = u32::MAX;

/// A doubly linked list of slots with O(1) push, remove and move, stored in
/// flat arrays indexed by slot. A slot is in the list at most once.
#[derive(Clone, Debug)]
pub struct SlotList {
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    len: usize,
}

// Not derived: a derived default would make slot 0 the head of an empty list.
impl Default for SlotList {
    fn default() -> Self {
        Self::new()
    }
}

impl SlotList {
    /// An empty list.
    pub fn new() -> Self {
        SlotList {
            prev: Vec::new(),
            next: Vec::new(),
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    fn ensure(&mut self, slot: u32) {
        let need = slot as usize + 1;
        if self.prev.len() < need {
            let grown = need.max(self.prev.len() * 2);
            self.prev.resize(grown, NIL);
            self.next.resize(grown, NIL);
        }
    }

    /// Number of slots in the list.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `slot` is in the list.
    pub fn contains(&self, slot: u32) -> bool {
        let s = slot as usize;
        s < self.prev.len() && (self.prev[s] != NIL || self.head == slot)
    }

    /// The oldest slot (front).
    pub fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The newest slot (back).
    pub fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The slot after `slot` (towards the back).
    pub fn next_of(&self, slot: u32) -> Option<u32> {
        let n = self.next[slot as usize];
        (n != NIL).then_some(n)
    }

    /// The slot before `slot` (towards the front).
    pub fn prev_of(&self, slot: u32) -> Option<u32> {
        let p = self.prev[slot as usize];
        (p != NIL).then_some(p)
    }

    /// Appends `slot` at the back. It must not be in the list.
    pub fn push_back(&mut self, slot: u32) {
        self.ensure(slot);
        debug_assert!(!self.contains(slot));
        let s = slot as usize;
        self.prev[s] = self.tail;
        self.next[s] = NIL;
        if self.tail == NIL {
            self.head = slot;
        } else {
            self.next[self.tail as usize] = slot;
        }
        self.tail = slot;
        self.len += 1;
    }

    /// Removes `slot` if present; returns whether it was.
    pub fn remove(&mut self, slot: u32) -> bool {
        if !self.contains(slot) {
            return false;
        }
        let s = slot as usize;
        let (p, n) = (self.prev[s], self.next[s]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[s] = NIL;
        self.next[s] = NIL;
        self.len -= 1;
        true
    }

    /// Removes and returns the front slot.
    pub fn pop_front(&mut self) -> Option<u32> {
        let h = self.front()?;
        self.remove(h);
        Some(h)
    }

    /// Moves `slot` to the back, inserting it if absent.
    pub fn move_to_back(&mut self, slot: u32) {
        if self.tail == slot {
            return;
        }
        self.remove(slot);
        self.push_back(slot);
    }

    /// Iterates from front to back.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(self.front(), move |&s| self.next_of(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_slot_list_keeps_order_through_moves_and_removals() {
        let mut l = SlotList::new();
        for s in [3, 1, 4, 0] {
            l.push_back(s);
        }
        l.move_to_back(1);
        assert!(l.remove(4));
        assert!(!l.remove(4));
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![3, 0, 1]);
        assert_eq!(l.pop_front(), Some(3));
        assert_eq!(l.len(), 2);
        assert!(l.contains(0) && !l.contains(3));
    }

    #[test]
    fn test_default_slot_list_is_empty() {
        let mut l = SlotList::default();
        assert!(l.is_empty() && l.front().is_none() && !l.contains(0));
        l.push_back(0);
        l.push_back(1);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![0, 1]);
    }
}
