//! The program's page queues: intrusive lists over page slots sharing one set
//! of links, since a page is in at most one queue at a time (as a Mach
//! `vm_page` is on one paging queue). Putting a page in a queue takes it out
//! of the one it was in. All operations are O(1) and allocate only when a
//! slot beyond every slot seen so far appears.
//!
//! Layout, for the event's hot path: each slot's links are 8 bytes (one
//! cache line serves eight slots) and which queue holds a slot is kept in a
//! separate, denser owner array, so filing a newly faulted page reads only
//! its owner (2 bytes) before writing its links, and a page leaving memory
//! after it was dequeued costs one owner read.

const NIL: u32 = u32::MAX;
/// Owner value of a page in no queue.
const NONE: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct Ends {
    head: u32,
    tail: u32,
    len: u32,
}

/// A slot's links.
#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

/// A set of page queues.
#[derive(Clone, Debug)]
pub struct Queues {
    links: Vec<Link>,
    owner: Vec<u16>,
    ends: Vec<Ends>,
}

impl Queues {
    /// `count` empty queues over `slots` page slots. The operand array holds
    /// at most 256 entries, so `count` is far below the owner marker.
    pub fn new(count: usize, slots: usize) -> Self {
        Queues {
            links: vec![UNLINKED; slots],
            owner: vec![NONE; slots],
            ends: vec![
                Ends {
                    head: NIL,
                    tail: NIL,
                    len: 0
                };
                count.min(usize::from(NONE))
            ],
        }
    }

    #[inline(always)]
    fn ensure(&mut self, slot: u32) {
        let need = slot as usize + 1;
        if self.links.len() < need {
            self.grow(need);
        }
    }

    #[cold]
    fn grow(&mut self, need: usize) {
        let grown = need.max(self.links.len() * 2);
        self.links.resize(grown, UNLINKED);
        self.owner.resize(grown, NONE);
    }

    /// Number of pages in queue `q`.
    #[inline(always)]
    pub fn len(&self, q: usize) -> usize {
        self.ends[q].len as usize
    }

    /// Whether `slot` is in queue `q`.
    #[inline(always)]
    pub fn contains(&self, q: usize, slot: u32) -> bool {
        self.owner
            .get(slot as usize)
            .is_some_and(|&o| o == q as u16)
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
        match self.owner.get(s) {
            Some(&q) if q != NONE => {
                self.unlink(q as usize, s);
                true
            }
            _ => false,
        }
    }

    /// Unlinks slot `s`, which is in queue `q`.
    #[inline(always)]
    fn unlink(&mut self, q: usize, s: usize) {
        let Link { prev: p, next: n } = self.links[s];
        let e = &mut self.ends[q];
        if p == NIL {
            e.head = n;
        } else {
            self.links[p as usize].next = n;
        }
        if n == NIL {
            e.tail = p;
        } else {
            self.links[n as usize].prev = p;
        }
        e.len -= 1;
        self.owner[s] = NONE;
    }

    /// Puts `slot` at the back of `q` (or the front), out of any other queue.
    #[inline(always)]
    pub fn push(&mut self, q: usize, slot: u32, front: bool) {
        self.ensure(slot);
        let s = slot as usize;
        let was = self.owner[s];
        if was != NONE {
            self.unlink(was as usize, s);
        }
        self.owner[s] = q as u16;
        let e = &mut self.ends[q];
        if front {
            self.links[s] = Link {
                prev: NIL,
                next: e.head,
            };
            if e.head == NIL {
                e.tail = slot;
            } else {
                self.links[e.head as usize].prev = slot;
            }
            e.head = slot;
        } else {
            self.links[s] = Link {
                prev: e.tail,
                next: NIL,
            };
            if e.tail == NIL {
                e.head = slot;
            } else {
                self.links[e.tail as usize].next = slot;
            }
            e.tail = slot;
        }
        e.len += 1;
    }

    /// Removes and returns the front (or back) page of `q`, or `u32::MAX`.
    #[inline(always)]
    pub fn pop(&mut self, q: usize, back: bool) -> u32 {
        let slot = if back { self.back(q) } else { self.front(q) };
        if slot != NIL {
            self.unlink(q, slot as usize);
        }
        slot
    }

    /// Moves the front page of non-empty `q` to its back (a second chance):
    /// the same as `push(q, pop(q, false), false)`, with fewer link updates.
    #[inline(always)]
    pub fn rotate(&mut self, q: usize) {
        let e = &mut self.ends[q];
        let s = e.head;
        if s == NIL || s == e.tail {
            return;
        }
        let n = self.links[s as usize].next;
        e.head = n;
        self.links[n as usize].prev = NIL;
        self.links[e.tail as usize].next = s;
        self.links[s as usize] = Link {
            prev: e.tail,
            next: NIL,
        };
        e.tail = s;
    }

    /// Pages of `q`, front to back.
    pub fn iter(&self, q: usize) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(Some(self.ends[q].head).filter(|&h| h != NIL), move |&s| {
            Some(self.links[s as usize].next).filter(|&n| n != NIL)
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

    #[test]
    fn test_rotate_moves_front_to_back_like_pop_and_push() {
        let mut q = Queues::new(2, 2);
        q.rotate(0);
        assert_eq!(q.front(0), u32::MAX, "empty queue stays empty");
        q.push(0, 5, false);
        q.rotate(0);
        assert_eq!(q.iter(0).collect::<Vec<_>>(), vec![5]);
        q.push(0, 6, false);
        q.push(0, 7, false);
        q.push(1, 3, false);
        q.rotate(0);
        assert_eq!(q.iter(0).collect::<Vec<_>>(), vec![6, 7, 5]);
        assert_eq!((q.front(0), q.back(0), q.len(0)), (6, 5, 3));
        assert!(q.contains(0, 5) && q.contains(1, 3));
        // The rotated page's links are whole: it can be removed from the back.
        assert!(q.remove(5));
        assert_eq!(q.iter(0).collect::<Vec<_>>(), vec![6, 7]);
        assert_eq!(q.back(0), 7);
        // A page beyond the slots seen grows the arrays.
        q.push(1, 40, true);
        assert_eq!(q.iter(1).collect::<Vec<_>>(), vec![40, 3]);
    }
}
