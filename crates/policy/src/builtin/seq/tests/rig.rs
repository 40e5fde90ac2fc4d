//! A small engine for SEQ's unit tests: a resident set naming pages by
//! first use, and a driver that delivers faults and evictions.

use std::cell::Cell;
use std::collections::HashMap;

use super::super::{Dir, Rule, Seq, SeqParams};
use crate::builtin::ExactLru;
use crate::{Fault, FaultKind, Memory, Page, Policy};

/// A resident set that names pages by first use and counts residency tests.
#[derive(Default)]
pub struct Mem {
    vpns: Vec<u64>,
    pub index: HashMap<u64, u32>,
    pub resident: Vec<bool>,
    pub referenced: Vec<bool>,
    pub lookups: Cell<usize>,
}

impl Mem {
    pub fn named(&mut self, vpn: u64) -> Page {
        let next = self.vpns.len() as u32;
        let slot = *self.index.entry(vpn).or_insert(next);
        if slot == next {
            self.vpns.push(vpn);
            self.resident.push(false);
            self.referenced.push(false);
        }
        Page { slot, vpn }
    }
}

impl Memory for Mem {
    fn slots(&self) -> usize {
        self.vpns.len()
    }
    fn capacity(&self) -> usize {
        usize::MAX
    }
    fn resident(&self) -> usize {
        self.resident.iter().filter(|&&r| r).count()
    }
    fn is_resident(&self, slot: u32) -> bool {
        self.lookups.set(self.lookups.get() + 1);
        self.resident.get(slot as usize).copied().unwrap_or(false)
    }
    fn page(&self, slot: u32) -> Page {
        Page {
            slot,
            vpn: self.vpns[slot as usize],
        }
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        self.index.get(&vpn).map(|&slot| Page { slot, vpn })
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.referenced[slot as usize]
    }
    fn is_modified(&self, _slot: u32) -> bool {
        false
    }
    fn clear_referenced(&mut self, slot: u32) {
        self.referenced[slot as usize] = false;
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

/// SEQ on [`Mem`], with a clock of one tick per event.
pub struct Rig<F> {
    pub mem: Mem,
    pub seq: Seq<F>,
    pub time: u64,
}

pub fn params(l: u64, m: u64, n: usize, x: usize) -> SeqParams {
    SeqParams { l, m, n, x }
}

impl Rig<ExactLru> {
    pub fn new(p: SeqParams) -> Self {
        Rig {
            mem: Mem::default(),
            seq: Seq::exact(p, 0),
            time: 0,
        }
    }
}

impl<F: Policy> Rig<F> {
    /// A missing fault on `vpn` (evicting it first if it is resident).
    pub fn fault(&mut self, vpn: u64) -> Rule {
        let page = self.mem.named(vpn);
        if self.mem.resident[page.slot as usize] {
            self.evict(vpn);
        }
        self.mem.resident[page.slot as usize] = true;
        self.mem.referenced[page.slot as usize] = true;
        self.time += 1;
        let fault = Fault {
            page,
            kind: FaultKind::Missing,
            write: false,
            time: self.time,
        };
        self.seq.on_fault(fault, &mut self.mem);
        self.seq
            .last_rule()
            .expect("a missing fault applies a rule")
    }

    pub fn faults(&mut self, vpns: impl IntoIterator<Item = u64>) {
        for v in vpns {
            self.fault(v);
        }
        self.seq.table.check();
    }

    pub fn evict(&mut self, vpn: u64) {
        let page = self.mem.named(vpn);
        self.mem.resident[page.slot as usize] = false;
        self.seq.on_evict(page, &mut self.mem);
    }

    pub fn victim(&mut self) -> Option<u64> {
        let none = Page {
            slot: u32::MAX,
            vpn: u64::MAX,
        };
        self.seq.victim(none, &mut self.mem).map(|p| p.vpn)
    }

    /// Asks for a victim and evicts it, as the engine does.
    pub fn replace(&mut self) -> Option<u64> {
        let v = self.victim()?;
        self.evict(v);
        Some(v)
    }

    pub fn seqs(&self) -> Vec<(u64, u64, Dir)> {
        self.seq
            .sequences()
            .into_iter()
            .map(|s| (s.low, s.high, s.dir))
            .collect()
    }
}
