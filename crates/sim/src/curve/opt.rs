//! OPT stack distances in one pass: the Critical Stack Algorithm of Bilardi,
//! Ekanadham and Pattnaik ("Optimal on-line computation of stack distances
//! for MIN and OPT", Computing Frontiers 2017).
//!
//! The OPT stack distance of a reference depends only on the past, so it is
//! computed on-line from the LRU order of the pages and one *critical marker*
//! per capacity `c >= 2` (the paper's `M(c)`, an LRU depth). Here both are
//! kept as times: a page is its last reference, and a marker is the time `T`
//! whose LRU depth is the number of pages referenced at or after `T`, so
//! moving a page to the top of the LRU order shifts every marker for free.
//! The paper's `beta(i) = #{c : M(c) <= i} - (i - 1)` becomes, for the page
//! last referenced at `tau`,
//! `beta(tau) = #{markers later than tau} - #{pages referenced after tau}`
//! (always >= 0). A reference to a page last referenced at `p` (LRU depth `D > 0`):
//! 1. finds `z`, the oldest page referenced after `p` with `beta = 0` (the
//!    top page always qualifies);
//! 2. finds the smallest capacity `c` whose marker is at or before `z`'s
//!    time: the OPT stack distance is `c + 1` (0-based marker indices);
//! 3. moves that marker to now and the page to now.
//!
//! `beta` is a suffix sum over times of +1 per marker and -1 per page; it
//! lives in a segment tree of those weights that also keeps, per node, the
//! least suffix sum at a live time, so every update is a point update. The
//! markers live in a min segment tree of their times over capacities.
//! Times are renumbered (order kept) whenever they fill a window of a few
//! times the footprint `V`, which keeps both trees at O(V) and in cache; the
//! renumbering costs O(V) once per O(V) references. Each step is O(log V),
//! so the whole curve costs O(n log V) for `n` references, whatever the trace.

use super::Curve;

/// `beta` of a dead time: never the minimum.
const DEAD: i32 = 1 << 29;
/// Marker time of an unused capacity: never at or before anything.
const UNSET: u32 = u32::MAX;
/// Last reference of an untouched slot.
const NONE: u32 = u32::MAX;

/// The whole OPT curve of `refs` (slots below `slots`).
pub fn opt(refs: &[u32], slots: usize) -> Curve {
    opt_upto(refs, slots, slots)
}

/// The OPT curve of `refs` for memory sizes up to `limit` frames; distances
/// beyond `limit` are counted as misses at every kept size.
pub fn opt_upto(refs: &[u32], slots: usize, limit: usize) -> Curve {
    let limit = limit.clamp(1, slots.max(1));
    let n = refs.len();
    let mut hist = vec![0u64; limit + 2];
    let mut cold = 0u64;
    if n == 0 {
        return Curve::from_histogram(0, 0, &hist, limit);
    }
    assert!(
        n < (u32::MAX - 1) as usize,
        "OPT curve: trace of {n} references is too long for 32-bit times"
    );
    // Last reference of each slot, NONE if untouched.
    let mut last = vec![NONE; slots];
    // Times live in a window of a few times the footprint, renumbered when
    // full: keeps the trees small (cache-resident) whatever the trace length.
    let window = n
        .next_power_of_two()
        .min((4 * slots).next_power_of_two().max(64));
    let mut beta = Beta::new(window);
    let mut markers = Markers::new(slots.max(1));
    let mut seen = 0usize;
    let mut now = 0u32;
    for &x in refs {
        if now as usize == window {
            now = renumber(&mut last, &mut markers, &mut beta, seen);
        }
        let p = last[x as usize];
        if p != NONE && p + 1 == now {
            // Already on top: the LRU order and the markers stay as they are,
            // so the page keeps its time and no time is spent.
            hist[1] += 1;
            continue;
        }
        last[x as usize] = now;
        if p == NONE {
            // A new page at the LRU top: every marker gets one deeper on its
            // own, the new capacity's marker is the top (now); the first
            // capacity has none.
            let marked = seen > 0;
            if marked {
                markers.set(seen, now);
            }
            beta.arrive(now, marked);
            seen += 1;
            cold += 1;
        } else {
            let z = beta.first_zero_after(p);
            let c = markers.first_at_or_before(z);
            let moved = markers.time(c);
            markers.set(c, now);
            beta.reference(moved, p, now);
            hist[(c + 1).min(limit + 1)] += 1;
        }
        now += 1;
    }
    Curve::from_histogram(n as u64, cold, &hist, limit)
}

/// Renumbers the times that matter (pages' last references and markers) to
/// `0..m` in order, rebuilds `beta` from scratch and returns `m`, the next
/// time. Order is all the algorithm looks at, so results do not change.
fn renumber(last: &mut [u32], markers: &mut Markers, beta: &mut Beta, seen: usize) -> u32 {
    let window = beta.size;
    let mut live = vec![false; window];
    let mut marks = vec![0u32; window];
    for &t in last.iter().filter(|&&t| t != NONE) {
        live[t as usize] = true;
    }
    // Capacity 0's marker is never set (the paper counts from capacity 2).
    for c in 1..seen {
        marks[markers.time(c) as usize] += 1;
    }
    let mut map = vec![0u32; window];
    let mut m = 0u32;
    for t in 0..window {
        if live[t] || marks[t] > 0 {
            map[t] = m;
            live[m as usize] = live[t];
            marks[m as usize] = marks[t];
            m += 1;
        }
    }
    for t in last.iter_mut().filter(|t| **t != NONE) {
        *t = map[*t as usize];
    }
    for c in 1..seen {
        let t = markers.time(c);
        markers.level[0][c] = map[t as usize];
    }
    markers.rebuild_all();
    beta.rebuild(&live[..m as usize], &marks[..m as usize]);
    m
}

/// `beta` over times: each time holds a weight (its markers minus 1 if a
/// page was last referenced then), so `beta(tau)` is the sum of the weights
/// after `tau`. A node of the segment tree keeps its weights' sum and the
/// least sum after a live time inside it (counted to the node's end).
struct Beta {
    size: usize,
    /// Per node: the sum of its weights and the least sum after a live time
    /// in it. Siblings are adjacent, so a step up reads one cache line.
    node: Vec<[i32; 2]>,
}

impl Beta {
    fn new(n: usize) -> Self {
        let size = n.next_power_of_two();
        Beta {
            size,
            node: vec![[0, DEAD]; 2 * size],
        }
    }

    #[inline]
    fn combine(l: [i32; 2], r: [i32; 2]) -> [i32; 2] {
        [l[0] + r[0], r[1].min(l[1] + r[0])]
    }

    /// Recomputes the nodes above leaf `v`, up to the first that does not change.
    #[inline]
    fn pull_up(&mut self, mut v: usize) {
        while v > 1 {
            v >>= 1;
            let next = Self::combine(self.node[2 * v], self.node[2 * v + 1]);
            if self.node[v] == next {
                return;
            }
            self.node[v] = next;
        }
    }

    /// A page is referenced at `t` (with a marker if `marked`).
    fn arrive(&mut self, t: u32, marked: bool) {
        let v = t as usize + self.size;
        self.node[v] = [i32::from(marked) - 1, 0];
        self.pull_up(v);
    }

    /// The page last referenced at `p` is referenced at `now`, and the
    /// marker at `moved` moves to `now`.
    fn reference(&mut self, moved: u32, p: u32, now: u32) {
        let leaves = [moved, p, now].map(|t| t as usize + self.size);
        self.node[leaves[0]][0] -= 1;
        self.node[leaves[1]] = [self.node[leaves[1]][0] + 1, DEAD];
        self.node[leaves[2]] = [0, 0];
        // The sums' changes cancel above the paths' meeting points, so the
        // walk up usually stops there.
        let mut level = leaves;
        while level[2] > 1 {
            let mut changed = false;
            for i in 0..3 {
                let v = level[i] >> 1;
                level[i] = v;
                if level[..i].contains(&v) {
                    continue;
                }
                let next = Self::combine(self.node[2 * v], self.node[2 * v + 1]);
                if self.node[v] != next {
                    self.node[v] = next;
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// Rebuilds from scratch: `live[t]` and `marks[t]` for the first times.
    fn rebuild(&mut self, live: &[bool], marks: &[u32]) {
        self.node.fill([0, DEAD]);
        for (t, (&l, &m)) in live.iter().zip(marks).enumerate() {
            self.node[t + self.size] = [m as i32 - i32::from(l), if l { 0 } else { DEAD }];
        }
        for v in (1..self.size).rev() {
            self.node[v] = Self::combine(self.node[2 * v], self.node[2 * v + 1]);
        }
    }

    /// The earliest live time after `p` whose `beta` is 0. The top page (the
    /// latest time) always has 0 and every live time has at least 0.
    fn first_zero_after(&self, p: u32) -> u32 {
        let lo = p as usize + 1;
        self.find(1, 0, self.size, lo, 0)
            .expect("the top page has beta 0") as u32
    }

    /// In node `v` (times `nl..nr`, weights after it summing to `after`).
    fn find(&self, v: usize, nl: usize, nr: usize, lo: usize, after: i32) -> Option<usize> {
        if nr <= lo || self.node[v][1] + after > 0 {
            return None;
        }
        if v >= self.size {
            return Some(nl);
        }
        let mid = (nl + nr) / 2;
        self.find(2 * v, nl, mid, lo, after + self.node[2 * v + 1][0])
            .or_else(|| self.find(2 * v + 1, mid, nr, lo, after))
    }
}

/// Children of a node of the markers' tree: one cache line of times.
const FANOUT: usize = 16;

/// Critical markers by capacity index: a 16-ary min tree of their times,
/// shallow so that the search down it waits on few cache misses.
struct Markers {
    /// `level[0]` holds the markers, each level above the minima of groups
    /// of `FANOUT` below it; the last level is the root alone.
    level: Vec<Vec<u32>>,
}

impl Markers {
    fn new(n: usize) -> Self {
        let mut width = 1;
        while width < n {
            width *= FANOUT;
        }
        let mut level = vec![vec![UNSET; width]];
        while width > 1 {
            width /= FANOUT;
            level.push(vec![UNSET; width]);
        }
        Markers { level }
    }

    #[inline]
    fn time(&self, c: usize) -> u32 {
        self.level[0][c]
    }

    fn set(&mut self, c: usize, t: u32) {
        self.level[0][c] = t;
        let mut i = c;
        for h in 1..self.level.len() {
            i /= FANOUT;
            let group = &self.level[h - 1][i * FANOUT..(i + 1) * FANOUT];
            let next = group.iter().copied().min().unwrap_or(UNSET);
            if self.level[h][i] == next {
                return;
            }
            self.level[h][i] = next;
        }
    }

    fn rebuild_all(&mut self) {
        for h in 1..self.level.len() {
            let (below, above) = self.level.split_at_mut(h);
            for (i, m) in above[0].iter_mut().enumerate() {
                let group = &below[h - 1][i * FANOUT..(i + 1) * FANOUT];
                *m = group.iter().copied().min().unwrap_or(UNSET);
            }
        }
    }

    /// The smallest capacity index whose marker is at or before `t`.
    fn first_at_or_before(&self, t: u32) -> usize {
        debug_assert!(self.level.last().is_some_and(|r| r[0] <= t));
        let mut i = 0;
        for h in (0..self.level.len() - 1).rev() {
            let group = &self.level[h][i * FANOUT..(i + 1) * FANOUT];
            let k = group.iter().position(|&m| m <= t).unwrap_or(0);
            i = i * FANOUT + k;
        }
        i
    }
}
