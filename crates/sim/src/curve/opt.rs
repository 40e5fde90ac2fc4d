//! OPT stack distances in one pass (Mattson et al. 1970, with Belady's
//! priority: of two pages, the one referenced sooner is kept).
//!
//! The OPT stack orders the seen pages so that the top `c` are exactly what
//! OPT keeps with `c` frames. When the page at depth `d` is referenced it
//! moves to the top, and repairing depths `1..d` only moves the *records*:
//! pages whose next reference is later than that of every page above them.
//! Each record takes the next record's place and the last one drops to depth
//! `d`. Consecutive records form runs of increasing next-reference times; a
//! run moves down one place as a block, which in sequence terms is just its
//! last page jumping over the non-records that follow it. The stack is an
//! implicit treap (balanced by random priorities) whose nodes keep the
//! subtree's size, latest next reference and whether it is increasing, so
//! a reference costs O((runs + 1) log pages). OPT stacks are close to sorted
//! by next reference, so runs are few even where records are many.

use super::Curve;

const NIL: u32 = u32::MAX;

/// The whole OPT curve of `refs` (slots below `slots`).
pub fn opt(refs: &[u32], slots: usize) -> Curve {
    opt_upto(refs, slots, slots)
}

/// The OPT curve of `refs` for memory sizes up to `limit` frames. Only the
/// top `limit` pages of the stack are kept: they are OPT's memory of that
/// size, which evolves on its own, so the smaller the limit the faster.
pub fn opt_upto(refs: &[u32], slots: usize, limit: usize) -> Curve {
    let limit = limit.clamp(1, slots.max(1));
    // Times of pages never referenced again are `len + slot`: later than any
    // reference and distinct, so the stack order is total.
    if refs.len() as u64 + slots as u64 + 1 < u64::from(u32::MAX) {
        run::<u32>(refs, slots, limit)
    } else {
        run::<u64>(refs, slots, limit)
    }
}

/// Where a referenced page was in the stack.
enum Depth {
    /// Never referenced before.
    Cold,
    /// At this depth (0-based).
    At(usize),
    /// Below the kept part of the stack.
    Beyond,
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

fn run<T: Time>(refs: &[u32], slots: usize, limit: usize) -> Curve {
    let n = refs.len() as u64;
    let next = next_references::<T>(refs, slots);
    let mut stack = Stack::<T>::new(slots, limit);
    let mut hist = vec![0u64; limit + 2];
    let mut cold = 0u64;
    for (&x, &key) in refs.iter().zip(&next) {
        match stack.reference(x, key) {
            Depth::At(d) => hist[d + 1] += 1,
            Depth::Beyond => hist[limit + 1] += 1,
            Depth::Cold => cold += 1,
        }
    }
    Curve::from_histogram(n, cold, &hist, limit)
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

/// A page in the stack: a treap node with its subtree's summary.
#[derive(Clone, Copy, Default)]
struct Node<T> {
    left: u32,
    right: u32,
    parent: u32,
    size: u32,
    priority: u32,
    /// The page's next reference.
    key: T,
    /// Latest next reference in the subtree.
    max: T,
    /// Next references of the subtree's first and last pages.
    first: T,
    last: T,
    /// Whether the subtree's next references increase strictly in stack order.
    increasing: bool,
    /// Whether the page is in the kept part of the stack.
    seen: bool,
    /// Whether the page has been referenced.
    touched: bool,
}

/// The OPT stack: an implicit treap over the seen pages, top first.
struct Stack<T> {
    node: Vec<Node<T>>,
    root: u32,
    /// Pages kept at most.
    limit: usize,
}

impl<T: Time> Stack<T> {
    fn new(slots: usize, limit: usize) -> Self {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let node = (0..slots)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                Node {
                    left: NIL,
                    right: NIL,
                    parent: NIL,
                    size: 1,
                    priority: (seed >> 32) as u32,
                    ..Node::default()
                }
            })
            .collect();
        Stack {
            node,
            root: NIL,
            limit,
        }
    }

    #[inline]
    fn size(&self, t: u32) -> usize {
        if t == NIL {
            0
        } else {
            self.node[t as usize].size as usize
        }
    }

    /// Recomputes `t`'s summary from its children.
    #[inline]
    fn pull(&mut self, t: u32) {
        let n = self.node[t as usize];
        let (mut size, mut max, mut first, mut last, mut inc) = (1, n.key, n.key, n.key, true);
        if n.left != NIL {
            let l = &self.node[n.left as usize];
            size += l.size;
            max = max.max(l.max);
            first = l.first;
            inc &= l.increasing && l.last < n.key;
        }
        if n.right != NIL {
            let r = &self.node[n.right as usize];
            size += r.size;
            max = max.max(r.max);
            last = r.last;
            inc &= r.increasing && n.key < r.first;
        }
        let m = &mut self.node[t as usize];
        m.size = size;
        m.max = max;
        m.first = first;
        m.last = last;
        m.increasing = inc;
    }

    #[inline]
    fn set_left(&mut self, t: u32, c: u32) {
        self.node[t as usize].left = c;
        if c != NIL {
            self.node[c as usize].parent = t;
        }
    }

    #[inline]
    fn set_right(&mut self, t: u32, c: u32) {
        self.node[t as usize].right = c;
        if c != NIL {
            self.node[c as usize].parent = t;
        }
    }

    /// Splits `t` into its first `k` pages and the rest; both roots have no parent.
    fn split(&mut self, t: u32, k: usize) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let left = self.node[t as usize].left;
        let ls = self.size(left);
        let (a, b) = if k <= ls {
            let (a, b) = self.split(left, k);
            self.set_left(t, b);
            self.pull(t);
            (a, t)
        } else {
            let right = self.node[t as usize].right;
            let (a, b) = self.split(right, k - ls - 1);
            self.set_right(t, a);
            self.pull(t);
            (t, b)
        };
        for r in [a, b] {
            if r != NIL {
                self.node[r as usize].parent = NIL;
            }
        }
        (a, b)
    }

    /// Concatenates `a` then `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.node[a as usize].priority > self.node[b as usize].priority {
            let r = self.node[a as usize].right;
            let m = self.merge(r, b);
            self.set_right(a, m);
            self.pull(a);
            self.node[a as usize].parent = NIL;
            a
        } else {
            let l = self.node[b as usize].left;
            let m = self.merge(a, l);
            self.set_left(b, m);
            self.pull(b);
            self.node[b as usize].parent = NIL;
            b
        }
    }

    /// Depth of page `x` in the stack.
    fn rank(&self, x: u32) -> usize {
        let mut pos = self.size(self.node[x as usize].left);
        let mut n = x;
        loop {
            let p = self.node[n as usize].parent;
            if p == NIL {
                return pos;
            }
            if self.node[p as usize].right == n {
                pos += self.size(self.node[p as usize].left) + 1;
            }
            n = p;
        }
    }

    /// Length of the longest prefix of `t` with strictly increasing next
    /// references.
    fn increasing_prefix(&self, t: u32) -> usize {
        let mut len = 0;
        let mut prev: Option<T> = None;
        let mut n = t;
        let after = |prev: Option<T>, k: T| !matches!(prev, Some(p) if p >= k);
        while n != NIL {
            let node = &self.node[n as usize];
            if node.left != NIL {
                let l = &self.node[node.left as usize];
                if !(l.increasing && after(prev, l.first)) {
                    n = node.left;
                    continue;
                }
                len += l.size as usize;
                prev = Some(l.last);
            }
            if !after(prev, node.key) {
                return len;
            }
            len += 1;
            prev = Some(node.key);
            n = node.right;
        }
        len
    }

    /// Position of the first page of `t` whose next reference is later than
    /// `bound`, or the size of `t`.
    fn first_later(&self, t: u32, bound: T) -> usize {
        if t == NIL || self.node[t as usize].max <= bound {
            return self.size(t);
        }
        let mut pos = 0;
        let mut n = t;
        loop {
            let node = &self.node[n as usize];
            if node.left != NIL && self.node[node.left as usize].max > bound {
                n = node.left;
                continue;
            }
            pos += self.size(node.left);
            if node.key > bound {
                return pos;
            }
            pos += 1;
            n = node.right;
        }
    }

    /// References page `x`, whose next reference is at `key`; returns its
    /// depth before the reference.
    fn reference(&mut self, x: u32, key: T) -> Depth {
        let seen = self.node[x as usize].seen;
        let d = if seen { self.rank(x) } else { 0 };
        if seen && d == 0 {
            // Already on top: only its time changes.
            self.node[x as usize].key = key;
            let mut n = x;
            while n != NIL {
                self.pull(n);
                n = self.node[n as usize].parent;
            }
            return Depth::At(0);
        }
        let (above, below, depth) = if seen {
            let (above, rest) = self.split(self.root, d);
            let (_, below) = self.split(rest, 1);
            (above, below, Depth::At(d))
        } else if self.node[x as usize].touched {
            (self.root, NIL, Depth::Beyond)
        } else {
            (self.root, NIL, Depth::Cold)
        };
        let node = &mut self.node[x as usize];
        node.seen = true;
        node.touched = true;
        node.key = key;
        node.left = NIL;
        node.right = NIL;
        node.parent = NIL;
        self.pull(x);
        let mut out = x;
        let mut rest = above;
        while rest != NIL {
            let len = self.increasing_prefix(rest);
            if len == self.size(rest) {
                // One increasing run to the end moves down as a whole.
                out = self.merge(out, rest);
                break;
            }
            let (run, after) = self.split(rest, len);
            let carry = self.node[run as usize].last;
            let gap = self.first_later(after, carry);
            let (head, last) = self.split(run, len - 1);
            out = self.merge(out, head);
            if gap == self.size(after) {
                // No record below: the run's last page drops to depth `d`.
                out = self.merge(out, after);
                out = self.merge(out, last);
                break;
            }
            let (between, next) = self.split(after, gap);
            out = self.merge(out, between);
            out = self.merge(out, last);
            rest = next;
        }
        self.root = self.merge(out, below);
        if self.size(self.root) > self.limit {
            // The last carry left the kept part.
            let (kept, dropped) = self.split(self.root, self.limit);
            self.node[dropped as usize].seen = false;
            self.root = kept;
        }
        depth
    }
}
