//! A minimal machine for the built-ins' unit tests: the policy crate cannot
//! use the simulator (it depends on this crate), so this follows the same
//! protocol as `pagepilot_sim::engine` on a reference string of slots.

use crate::{Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};

/// Resident pages and their bits; pages are `vpn == slot`.
pub struct Testbed {
    resident: Vec<bool>,
    referenced: Vec<bool>,
    capacity: usize,
    count: usize,
    /// Missing faults so far.
    pub faults: u64,
    /// Minor faults so far.
    pub minor: u64,
    /// Victims in eviction order.
    pub evicted: Vec<u32>,
}

impl Testbed {
    /// A machine of `frames` frames over `slots` pages.
    pub fn new(slots: usize, frames: usize) -> Self {
        Testbed {
            resident: vec![false; slots],
            referenced: vec![false; slots],
            capacity: frames,
            count: 0,
            faults: 0,
            minor: 0,
            evicted: Vec::new(),
        }
    }

    fn page_at(slot: u32) -> Page {
        Page {
            slot,
            vpn: u64::from(slot),
        }
    }

    /// One reference seen by a live policy; panics on an invalid victim so
    /// tests catch policies that would be overruled.
    pub fn access(&mut self, p: &mut dyn Policy, slot: u32, time: u64) {
        let s = slot as usize;
        let page = Self::page_at(slot);
        if self.resident[s] {
            if !self.referenced[s] {
                self.referenced[s] = true;
                self.minor += 1;
                let f = Fault {
                    page,
                    kind: FaultKind::Minor,
                    write: false,
                    time,
                };
                p.on_fault(f, self);
            }
            return;
        }
        self.faults += 1;
        while self.count >= self.capacity {
            let v = p.victim(page, self).expect("policy named no victim");
            assert!(
                v.slot != slot && self.resident[v.slot as usize],
                "invalid victim {v:?} for incoming {slot}"
            );
            self.resident[v.slot as usize] = false;
            self.referenced[v.slot as usize] = false;
            self.count -= 1;
            self.evicted.push(v.slot);
            p.on_evict(v, self);
        }
        self.resident[s] = true;
        self.referenced[s] = true;
        self.count += 1;
        let f = Fault {
            page,
            kind: FaultKind::Missing,
            write: false,
            time,
        };
        p.on_fault(f, self);
    }

    /// Runs `refs` through a live policy.
    pub fn run(&mut self, p: &mut dyn Policy, refs: &[u32]) {
        for (i, &s) in refs.iter().enumerate() {
            self.access(p, s, i as u64);
        }
    }

    /// One reference seen by a reference policy (it sees every reference).
    pub fn access_reference<P: ReferencePolicy>(&mut self, p: &mut P, slot: u32, time: u64) {
        p.on_reference(Self::page_at(slot), time);
        self.access(p, slot, time);
    }

    /// Runs `refs` through a reference policy.
    pub fn run_reference<P: ReferencePolicy>(&mut self, p: &mut P, refs: &[u32]) {
        for (i, &s) in refs.iter().enumerate() {
            self.access_reference(p, s, i as u64);
        }
    }

    /// Whether `slot` is resident.
    pub fn holds(&self, slot: u32) -> bool {
        self.resident[slot as usize]
    }
}

impl Memory for Testbed {
    fn slots(&self) -> usize {
        self.resident.len()
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn resident(&self) -> usize {
        self.count
    }
    fn is_resident(&self, slot: u32) -> bool {
        self.resident.get(slot as usize).copied().unwrap_or(false)
    }
    fn page(&self, slot: u32) -> Page {
        Self::page_at(slot)
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        (vpn < self.resident.len() as u64).then(|| Self::page_at(vpn as u32))
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.is_resident(slot) && self.referenced[slot as usize]
    }
    fn is_modified(&self, _slot: u32) -> bool {
        false
    }
    fn clear_referenced(&mut self, slot: u32) {
        if let Some(r) = self.referenced.get_mut(slot as usize) {
            *r = false;
        }
    }
    fn request_frames(&mut self, _count: usize) -> usize {
        0
    }
    fn release_frames(&mut self, _count: usize) -> usize {
        0
    }
    fn flush(&mut self, slot: u32) -> bool {
        self.is_resident(slot)
    }
}
