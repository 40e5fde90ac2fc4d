//! The sequence list: at most X sequences, an index of their heads for the
//! extension test, each page's sequence for the containment test, the
//! times of each sequence's last N faults, the deletion order and the
//! replacement order. Every operation is O(1) or O(log X) except re-placing a
//! split sequence in the deletion order (O(sequences of its length class)).
//! Nothing allocates per fault: the only growth is a sequence's page list,
//! amortised, and reused when the sequence's entry is.

use std::collections::HashMap;

use super::ages::{class_of, Ages};
use super::choice::Choice;
use super::params::SeqParams;
use super::sequence::{Dir, Sequence};
use super::victim;
use crate::hash::BuildVpnHasher;
use crate::{Memory, Page};

const NONE: u32 = u32::MAX;
/// Page lists up to this capacity are kept when their sequence is deleted.
const LIST_KEPT: usize = 4096;

/// SEQ's sequence list.
#[derive(Debug)]
pub struct Table {
    l: u64,
    n: usize,
    x: usize,
    seqs: Vec<Sequence>,
    /// The slot of each page of sequence `id`, by offset from its tail: the
    /// victim search and a split need no page look-up.
    slots: Vec<Vec<u32>>,
    free: Vec<u32>,
    live: usize,
    /// The last N fault times of sequence `id` in `ring[id*N..(id+1)*N]`.
    ring: Vec<u64>,
    /// Head page of every sequence -> its id. Only heads are needed: a fault
    /// extends a sequence only at its head.
    heads: HashMap<u64, u32, BuildVpnHasher>,
    /// Per slot: the sequence the page last joined (checked before use).
    member: Vec<u32>,
    /// Per slot: the time of the page's last missing fault.
    fault_time: Vec<u64>,
    ages: Ages,
    choice: Choice,
}

impl Table {
    /// An empty list for an engine naming `slots` page slots.
    pub fn new(params: &SeqParams, slots: usize) -> Self {
        let mut heads = HashMap::with_hasher(BuildVpnHasher::default());
        heads.reserve(2 * params.x.min(1 << 16));
        Table {
            l: params.l,
            n: params.n,
            x: params.x,
            seqs: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            ring: Vec::new(),
            heads,
            member: vec![NONE; slots],
            fault_time: vec![0; slots],
            ages: Ages::new(),
            choice: Choice::new(),
        }
    }

    /// Number of sequences tracked.
    pub fn count(&self) -> usize {
        self.live
    }

    /// The sequence `id`.
    pub fn get(&self, id: u32) -> &Sequence {
        &self.seqs[id as usize]
    }

    /// Every sequence tracked, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Sequence> {
        self.seqs.iter().filter(|s| s.live)
    }

    /// Records the time of a missing fault on `slot`.
    pub fn note_fault(&mut self, slot: u32, time: u64) {
        let s = slot as usize;
        if self.fault_time.len() <= s {
            self.fault_time.resize(s + 1, 0);
            self.member.resize(s + 1, NONE);
        }
        self.fault_time[s] = time;
    }

    /// `page`'s slot will name another page: it is no sequence's member.
    /// (Its entry in its sequence's page list stays: a victim search checks
    /// that a slot still names the page it expects.)
    pub fn forget(&mut self, page: Page) {
        if let Some(m) = self.member.get_mut(page.slot as usize) {
            *m = NONE;
        }
    }

    /// The sequence whose range holds `page`.
    pub fn containing(&self, page: Page) -> Option<u32> {
        let id = *self.member.get(page.slot as usize)?;
        let s = self.seqs.get(id as usize)?;
        (s.live && s.offset_of(page.vpn).is_some()).then_some(id)
    }

    /// The sequence whose head is `vpn`.
    pub fn headed_at(&self, vpn: u64) -> Option<u32> {
        self.heads.get(&vpn).copied()
    }

    /// Time of the N-th most recent fault of `id` (its oldest known fault if
    /// it has fewer than N).
    pub fn nth_recent(&self, id: u32) -> u64 {
        let s = &self.seqs[id as usize];
        let known = (s.len.min(self.n as u64)) as usize;
        self.ring[id as usize * self.n + (s.ring_pos + self.n - (known - 1)) % self.n]
    }

    /// Adds `<pf, pf, nil>`, first deleting sequences in the paper's order
    /// while the list holds X.
    pub fn create(&mut self, page: Page, time: u64) -> u32 {
        while self.live >= self.x {
            match self.ages.first_to_delete() {
                Some(old) => self.delete(old),
                None => break,
            }
        }
        let fresh = Sequence::single(page.vpn, time);
        let id = match self.free.pop() {
            Some(id) => {
                self.seqs[id as usize] = fresh;
                id
            }
            None => {
                self.seqs.push(fresh);
                self.slots.push(Vec::new());
                self.ring.resize(self.ring.len() + self.n, 0);
                (self.seqs.len() - 1) as u32
            }
        };
        self.ring[id as usize * self.n] = time;
        self.slots[id as usize].clear();
        self.slots[id as usize].push(page.slot);
        self.live += 1;
        self.join(page, id);
        self.heads.insert(page.vpn, id);
        self.ages.push_newest(class_of(1, self.l), id);
        self.refresh_choice(id);
        id
    }

    /// Extends `id` by the fault on `page` in direction `dir`.
    pub fn extend(&mut self, id: u32, page: Page, dir: Dir, time: u64) {
        let s = &mut self.seqs[id as usize];
        self.heads.remove(&s.head());
        s.dir = dir;
        s.len += 1;
        s.last = time;
        s.ring_pos = (s.ring_pos + 1) % self.n;
        let (len, pos) = (s.len, s.ring_pos);
        self.ring[id as usize * self.n + pos] = time;
        self.slots[id as usize].push(page.slot);
        self.heads.insert(page.vpn, id);
        self.join(page, id);
        self.ages.touch(class_of(len, self.l), id);
        self.refresh_choice(id);
    }

    /// Splits `id` at `page`, which it holds: keeps the pages faulted before
    /// it (`<low, pf-1, up>` or `<pf+1, high, down>`), or deletes the sequence
    /// if there are none. The caller adds `<pf, pf, nil>`.
    pub fn split(&mut self, id: u32, page: Page) {
        let keep = self.seqs[id as usize].offset_of(page.vpn).unwrap_or(0);
        if keep == 0 {
            self.delete(id);
            return;
        }
        let s = &mut self.seqs[id as usize];
        self.heads.remove(&s.head());
        s.truncate(keep);
        let slots = &mut self.slots[id as usize];
        slots.truncate(keep as usize);
        self.heads.insert(s.head(), id);
        // The kept pages' faults are its last faults now; each page joined
        // by exactly one fault, so their times give the history back.
        let known = keep.min(self.n as u64);
        let base = id as usize * self.n;
        for back in 0..known {
            let slot = slots[(keep - 1 - back) as usize];
            let time = self.fault_time.get(slot as usize).copied().unwrap_or(0);
            self.ring[base + (s.ring_pos + self.n - back as usize) % self.n] = time;
        }
        s.last = self.ring[base + s.ring_pos];
        self.ages.remove(id);
        let seqs = &self.seqs;
        self.ages
            .insert_in_order(class_of(keep, self.l), id, |i| seqs[i as usize].last);
        self.refresh_choice(id);
    }

    /// Stops tracking `id`.
    pub fn delete(&mut self, id: u32) {
        let s = &mut self.seqs[id as usize];
        if !s.live {
            return;
        }
        s.live = false;
        self.heads.remove(&s.head());
        self.ages.remove(id);
        self.choice.remove(id);
        // Keep small page lists for reuse; give back what a long one grew.
        let slots = &mut self.slots[id as usize];
        if slots.capacity() > LIST_KEPT {
            *slots = Vec::new();
        }
        self.free.push(id);
        self.live -= 1;
    }

    /// Notes that `page` went to disk, widening its sequence's on-disk range.
    pub fn note_evicted(&mut self, page: Page) {
        if let Some(id) = self.containing(page) {
            let s = &mut self.seqs[id as usize];
            if let Some(off) = s.offset_of(page.vpn) {
                s.note_on_disk(off);
            }
        }
    }

    /// A victim from the sequences of length at least L, best first: the
    /// first resident page at least `m` pages behind the head.
    pub fn choose(&mut self, m: u64, mem: &dyn Memory) -> Option<Page> {
        let (seqs, slots) = (&mut self.seqs, &self.slots);
        self.choice
            .first(|id| victim::scan(&mut seqs[id as usize], &slots[id as usize], m, mem))
    }

    fn join(&mut self, page: Page, id: u32) {
        let s = page.slot as usize;
        if self.member.len() <= s {
            self.member.resize(s + 1, NONE);
            self.fault_time.resize(s + 1, 0);
        }
        self.member[s] = id;
    }

    fn refresh_choice(&mut self, id: u32) {
        if self.seqs[id as usize].len >= self.l {
            let key = self.nth_recent(id);
            self.choice.set(id, key);
        } else {
            self.choice.remove(id);
        }
    }

    /// Checks the table's invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let mut ranges: Vec<(u64, u64)> = self.iter().map(|s| (s.low(), s.high())).collect();
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            assert!(w[0].1 < w[1].0, "sequences overlap: {ranges:?}");
        }
        assert_eq!(self.iter().count(), self.live);
        assert!(self.live <= self.x);
        for (i, s) in self.seqs.iter().enumerate().filter(|(_, s)| s.live) {
            assert_eq!(self.heads.get(&s.head()), Some(&(i as u32)));
            assert_eq!(self.choice.contains(i as u32), s.len >= self.l);
            assert!(self.ages.class(i as u32).is_some());
            if let Some((a, b)) = s.disk {
                assert!(a <= b && b < s.len);
            }
            assert_eq!(self.slots[i].len() as u64, s.len);
        }
        assert_eq!(self.heads.len(), self.live);
    }
}
