//! The program's page queues: intrusive lists over page slots sharing one set
//! of links, since a page is in at most one queue at a time (as a Mach
//! `vm_page` is on one paging queue). Putting a page in a queue takes it out
//! of the one it was in. All operations are O(1) and allocate only when a
//! slot beyond every slot seen so far appears.

const NIL: u32 = u32::MAX;
/// Owner value of a page in no queue.
const NONE: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct Ends {
    head: u32,
    tail: u32,
    len: u32,
}

/// A set of page queues.
#[derive(Clone, Debug)]
pub struct Queues {
    owner: Vec<u16>,
    prev: Vec<u32>,
    next: Vec<u32>,
    ends: Vec<Ends>,
}

impl Queues {
    /// `count` empty queues over `slots` page slots.
    pub fn new(count: usize, slots: usize) -> Self {
        Queues {
            owner: vec![NONE; slots],
            prev: vec![NIL; slots],
            next: vec![NIL; slots],
            ends: vec![
                Ends {
                    head: NIL,
                    tail: NIL,
                    len: 0
                };
                count
            ],
        }
    }

    #[inline(always)]
    fn ensure(&mut self, slot: u32) {
        let need = slot as usize + 1;
        if self.owner.len() < need {
            let grown = need.max(self.owner.len() * 2);
            self.owner.resize(grown, NONE);
            self.prev.resize(grown, NIL);
            self.next.resize(grown, NIL);
        }
    }

    /// Number of pages in queue `q`.
    #[inline(always)]
    pub fn len(&self, q: usize) -> usize {
        self.ends[q].len as usize
    }

    /// Whether `slot` is in queue `q`.
    #[inline(always)]
    pub fn contains(&self, q: usize, slot: u32) -> bool {
        self.owner.get(slot as usize) == Some(&(q as u16))
    }

    /// First page of `q`, or `u32::MAX`.
    #[inline(always)]
    pub fn front(&self, q: usize) -> u32 {
        self.ends[q].head
    }

    /// Last page of `q`, or `u32::MAX`.
    #[inline(always)]
    pub fn back(&self, q: usize) -> u32 {
        self.ends[q].tail
    }

    /// Takes `slot` out of whichever queue holds it; returns whether one did.
    #[inline(always)]
    pub fn remove(&mut self, slot: u32) -> bool {
        let s = slot as usize;
        let Some(&q) = self.owner.get(s) else {
            return false;
        };
        if q == NONE {
            return false;
        }
        let (p, n) = (self.prev[s], self.next[s]);
        let e = &mut self.ends[q as usize];
        if p == NIL {
            e.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            e.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        e.len -= 1;
        self.owner[s] = NONE;
        self.prev[s] = NIL;
        self.next[s] = NIL;
        true
    }

    /// Puts `slot` at the back of `q` (or the front), out of any other queue.
    #[inline(always)]
    pub fn push(&mut self, q: usize, slot: u32, front: bool) {
        self.ensure(slot);
        self.remove(slot);
        let s = slot as usize;
        let e = &mut self.ends[q];
        if front {
            self.next[s] = e.head;
            if e.head == NIL {
                e.tail = slot;
            } else {
                self.prev[e.head as usize] = slot;
            }
            e.head = slot;
        } else {
            self.prev[s] = e.tail;
            if e.tail == NIL {
                e.head = slot;
            } else {
                self.next[e.tail as usize] = slot;
            }
            e.tail = slot;
        }
        e.len += 1;
        self.owner[s] = q as u16;
    }

    /// Removes and returns the front (or back) page of `q`, or `u32::MAX`.
    #[inline(always)]
    pub fn pop(&mut self, q: usize, back: bool) -> u32 {
        let slot = if back { self.back(q) } else { self.front(q) };
        if slot != NIL {
            self.remove(slot);
        }
        slot
    }

    /// Pages of `q`, front to back.
    pub fn iter(&self, q: usize) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(Some(self.ends[q].head).filter(|&h| h != NIL), move |&s| {
            Some(self.next[s as usize]).filter(|&n| n != NIL)
        })
    }

    /// Number of queues.
    pub fn count(&self) -> usize {
        self.ends.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_page_moves_between_queues_and_keeps_order() {
        let mut q = Queues::new(2, 4);
        q.push(0, 1, false);
        q.push(0, 2, false);
        q.push(0, 9, true);
        assert_eq!(q.iter(0).collect::<Vec<_>>(), vec![9, 1, 2]);
        q.push(1, 1, false);
        assert_eq!(q.iter(0).collect::<Vec<_>>(), vec![9, 2]);
        assert!(q.contains(1, 1) && !q.contains(0, 1));
        assert_eq!(q.pop(0, true), 2);
        assert_eq!(q.pop(0, false), 9);
        assert_eq!(q.pop(0, false), u32::MAX);
        assert_eq!(q.len(1), 1);
    }
}
