//! Belady's OPT: a simulator-only reference, it needs the future.

use std::collections::BinaryHeap;

use crate::{Fault, Memory, Page, Policy, ReferencePolicy};

/// Never referenced again.
const NEVER: u64 = u64::MAX;

/// Belady's optimal replacement: evict the resident page whose next reference
/// is furthest in the future. Built from the whole reference string.
#[derive(Debug)]
pub struct Opt {
    /// For each reference index, the index of the next reference to the same page.
    next_ref: Vec<u64>,
    /// For each slot, the index of its next reference after the current one.
    next_use: Vec<u64>,
    resident: Vec<bool>,
    /// Max-heap of (next use, slot); stale entries are skipped lazily.
    heap: BinaryHeap<(u64, u32)>,
    resident_count: usize,
}

impl Opt {
    /// Builds OPT for the reference string `refs` (slots, in order).
    pub fn new(refs: &[u32], slots: usize) -> Self {
        Opt {
            next_ref: next_references(refs, slots),
            next_use: vec![NEVER; slots],
            resident: vec![false; slots],
            heap: BinaryHeap::new(),
            resident_count: 0,
        }
    }

    fn compact(&mut self) {
        let next_use = &self.next_use;
        let resident = &self.resident;
        self.heap
            .retain(|&(t, s)| resident[s as usize] && next_use[s as usize] == t);
    }
}

/// For each index `i`, the index of the next reference to `refs[i]`'s page, or
/// `u64::MAX`.
pub fn next_references(refs: &[u32], slots: usize) -> Vec<u64> {
    let mut last = vec![NEVER; slots];
    let mut next = vec![NEVER; refs.len()];
    for (i, &s) in refs.iter().enumerate().rev() {
        next[i] = last[s as usize];
        last[s as usize] = i as u64;
    }
    next
}

impl Policy for Opt {
    fn name(&self) -> String {
        "opt".into()
    }

    fn on_fault(&mut self, fault: Fault, _mem: &mut dyn Memory) {
        let s = fault.page.slot as usize;
        if !self.resident[s] {
            self.resident[s] = true;
            self.resident_count += 1;
            self.heap.push((self.next_use[s], fault.page.slot));
        }
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        while let Some(&(t, s)) = self.heap.peek() {
            if self.resident[s as usize] && self.next_use[s as usize] == t {
                return Some(mem.page(s));
            }
            self.heap.pop();
        }
        None
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        let s = page.slot as usize;
        if self.resident[s] {
            self.resident[s] = false;
            self.resident_count -= 1;
        }
    }
}

impl ReferencePolicy for Opt {
    fn on_reference(&mut self, page: Page, index: u64) {
        let s = page.slot as usize;
        let next = self.next_ref.get(index as usize).copied().unwrap_or(NEVER);
        self.next_use[s] = next;
        if self.resident[s] {
            self.heap.push((next, page.slot));
            if self.heap.len() > 4 * self.resident_count + 64 {
                self.compact();
            }
        }
    }
}
