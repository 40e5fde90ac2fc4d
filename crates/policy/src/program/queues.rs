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

/// A slot's links and owning queue, together so one cache line serves all.
#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
    owner: u16,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
    owner: NONE,
};

/// A set of page queues.
#[derive(Clone, Debug)]
pub struct Queues {
    links: Vec<Link>,
    ends: Vec<Ends>,
}

impl Queues {
    /// `count` empty queues over `slots` page slots.
    pub fn new(count: usize, slots: usize) -> Self {
        Queues {
            links: vec![UNLINKED; slots],
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
        if self.links.len() < need {
            let grown = need.max(self.links.len() * 2);
            self.links.resize(grown, UNLINKED);
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
        self.links
            .get(slot as usize)
            .is_some_and(|l| l.owner == q as u16)
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
        let Some(&Link {
            prev: p,
            next: n,
            owner: q,
        }) = self.links.get(s)
        else {
            return false;
        };
        if q == NONE {
            return false;
        }
        let e = &mut self.ends[q as usize];
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
        self.links[s] = UNLINKED;
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
            self.links[s] = Link {
                prev: NIL,
                next: e.head,
                owner: q as u16,
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
                owner: q as u16,
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
            self.remove(slot);
        }
        slot
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
}
