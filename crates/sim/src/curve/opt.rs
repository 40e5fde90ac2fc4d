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
//! lives in an 8-ary segment tree of those weights that also keeps, per
//! node, the least suffix sum at a live time, so every update is a point
//! update and the tree is shallow. The markers live in a 16-ary min tree of
//! their times over capacities. A reference to the top page changes nothing
//! (not even its time), which makes the frequent repeated references free.
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
    // Last reference of each slot, NONE if untouched.
    let mut last = vec![NONE; slots];
    // Times live in a window of a few times the footprint, renumbered when
    // full: keeps the trees small (cache-resident) whatever the trace length.
    let window = n
        .next_power_of_two()
        .min((4 * slots).next_power_of_two().max(64));
    assert!(
        window < NONE as usize,
        "OPT curve: {slots} slots need 64-bit times"
    );
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
    let window = beta.window;
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

/// Children of a node of `beta`'s tree: one cache line of nodes.
const BRANCH: usize = 1 << BRANCH_BITS;
const BRANCH_BITS: usize = 3;

/// `beta` over times: each time holds a weight (its markers minus 1 if a
/// page was last referenced then), so `beta(tau)` is the sum of the weights
/// after `tau`. A node of the 8-ary segment tree keeps its weights' sum and
/// the least sum after a live time inside it (counted to the node's end).
struct Beta {
    /// Times kept (the window).
    window: usize,
    /// `level[0]` holds the times, each level above one node per `BRANCH`
    /// nodes below; the last level is the root alone.
    level: Vec<Vec<[i32; 2]>>,
}

impl Beta {
    fn new(window: usize) -> Self {
        let mut width = 1;
        while width < window {
            width *= BRANCH;
        }
        let mut level = vec![vec![[0, DEAD]; width]];
        while width > 1 {
            width /= BRANCH;
            level.push(vec![[0, DEAD]; width]);
        }
        Beta { window, level }
    }

    /// The node for the `BRANCH` nodes of `group`.
    #[inline]
    fn combine(group: &[[i32; 2]]) -> [i32; 2] {
        let (mut sum, mut least) = (0, DEAD);
        for &[s, l] in group.iter().rev() {
            least = least.min(l + sum);
            sum += s;
        }
        [sum, least]
    }

    /// Recomputes node `i` of level `h` from its children.
    #[inline]
    fn pull(&mut self, h: usize, i: usize) -> bool {
        let next = Self::combine(&self.level[h - 1][i * BRANCH..(i + 1) * BRANCH]);
        if self.level[h][i] == next {
            return false;
        }
        self.level[h][i] = next;
        true
    }

    /// Recomputes the nodes above the given leaves, up to the first level
    /// where none changes.
    fn pull_up<const K: usize>(&mut self, mut at: [usize; K]) {
        for h in 1..self.level.len() {
            let mut changed = false;
            for k in 0..K {
                at[k] /= BRANCH;
                if at[..k].contains(&at[k]) {
                    continue;
                }
                changed |= self.pull(h, at[k]);
            }
            if !changed {
                return;
            }
        }
    }

    /// A page is referenced at `t` (with a marker if `marked`).
    fn arrive(&mut self, t: u32, marked: bool) {
        let t = t as usize;
        self.level[0][t] = [i32::from(marked) - 1, 0];
        self.pull_up([t]);
    }

    /// The page last referenced at `p` is referenced at `now`, and the
    /// marker at `moved` moves to `now`.
    fn reference(&mut self, moved: u32, p: u32, now: u32) {
        let [moved, p, now] = [moved, p, now].map(|t| t as usize);
        let leaf = &mut self.level[0];
        leaf[moved][0] -= 1;
        leaf[p] = [leaf[p][0] + 1, DEAD];
        leaf[now] = [0, 0];
        // The sums' changes cancel above the paths' meeting points, so the
        // walk up usually stops there.
        self.pull_up([moved, p, now]);
    }

    /// Rebuilds from scratch: `live[t]` and `marks[t]` for the first times.
    fn rebuild(&mut self, live: &[bool], marks: &[u32]) {
        for level in &mut self.level {
            level.fill([0, DEAD]);
        }
        for (t, (&l, &m)) in live.iter().zip(marks).enumerate() {
            self.level[0][t] = [m as i32 - i32::from(l), if l { 0 } else { DEAD }];
        }
        for h in 1..self.level.len() {
            for i in 0..self.level[h].len() {
                self.pull(h, i);
            }
        }
    }

    /// The earliest live time after `p` whose `beta` is 0. The top page (the
    /// latest time) always has 0 and every live time has at least 0.
    fn first_zero_after(&self, p: u32) -> u32 {
        let top = self.level.len() - 1;
        self.find(top, 0, p as usize + 1, 0)
            .expect("the top page has beta 0") as u32
    }

    /// In node `i` of level `h`, which reaches `lo` and has some time with
    /// `beta` 0 given the weights after it sum to `after`: the first such
    /// time at or after `lo`. Only the node holding `lo` can come back empty.
    fn find(&self, h: usize, i: usize, lo: usize, after: i32) -> Option<usize> {
        if h == 0 {
            return Some(i);
        }
        let group = &self.level[h - 1][i * BRANCH..(i + 1) * BRANCH];
        let mut afters = [0; BRANCH];
        let mut acc = after;
        for j in (0..BRANCH).rev() {
            afters[j] = acc;
            acc += group[j][0];
        }
        let child_span_bits = BRANCH_BITS * (h - 1);
        let first = ((lo >> child_span_bits).saturating_sub(i * BRANCH)).min(BRANCH);
        (first..BRANCH)
            .filter(|&j| group[j][1] + afters[j] <= 0)
            .find_map(|j| self.find(h - 1, i * BRANCH + j, lo, afters[j]))
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
        let old = std::mem::replace(&mut self.level[0][c], t);
        let mut i = c;
        for h in 1..self.level.len() {
            i /= FANOUT;
            let node = self.level[h][i];
            let next = if t <= old {
                node.min(t)
            } else if node == old {
                // The raised marker was this group's least: look again.
                let group = &self.level[h - 1][i * FANOUT..(i + 1) * FANOUT];
                group.iter().copied().min().unwrap_or(UNSET)
            } else {
                return;
            };
            if next == node {
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
