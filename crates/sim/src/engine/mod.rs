//! The simulated machine: a resident set under a policy, driven one
//! reference at a time, exactly as the live pager would see it.

use pagepilot_policy::registry::Built;
use pagepilot_policy::{Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};
use serde::Serialize;

use crate::trace::Trace;

mod reclaim;

const RESIDENT: u8 = 1;
/// Mapped in the application's view; cleared to emulate the referenced bit.
const REFERENCED: u8 = 2;
const MODIFIED: u8 = 4;
const TOUCHED: u8 = 8;
/// Resident and referenced: a reference to it is a hit.
const SEEN: u8 = RESIDENT | REFERENCED;

/// What one reference did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Resident and mapped: invisible to a live pager.
    Hit,
    /// Resident but unmapped by reference emulation: a minor fault.
    Minor,
    /// Not resident: a missing fault; `victim` was evicted to make room.
    Missing {
        /// First touch of the page.
        cold: bool,
        /// The page evicted, if any.
        victim: Option<Page>,
    },
}

/// Counters of one simulated run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// References simulated.
    pub references: u64,
    /// Missing faults, first touches included.
    pub faults: u64,
    /// First-touch faults.
    pub cold_faults: u64,
    /// Minor faults from reference-bit emulation.
    pub minor_faults: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Evicted or flushed pages that were modified.
    pub writebacks: u64,
    /// Victims the policy named that were not valid, overruled by the engine.
    pub overruled: u64,
}

/// Where a machine's `Request` and `Release` (HiPEC's commands,
/// [`Memory::request_frames`] and [`Memory::release_frames`]) take frames
/// from and give them back to: spare frames of its own, or a global frame
/// manager shared with other machines ([`crate::pooled`]).
pub trait FrameSource {
    /// `Request(count)`: the frames granted, at most `count`.
    fn request(&mut self, count: usize) -> usize;
    /// `Release(count)`: `count` free frames given back; returns how many
    /// the source took.
    fn release(&mut self, count: usize) -> usize;
}

/// A machine's own spare frames, granted until none is left.
struct Spare(usize);

impl FrameSource for Spare {
    fn request(&mut self, count: usize) -> usize {
        let granted = count.min(self.0);
        self.0 -= granted;
        granted
    }
    fn release(&mut self, count: usize) -> usize {
        self.0 += count;
        count
    }
}

/// The engine's side of the policy interface in the simulator.
pub struct SimMemory<'t> {
    flags: Vec<u8>,
    pages: &'t [u64],
    trace: &'t Trace,
    capacity: usize,
    resident: usize,
    pool: Box<dyn FrameSource + 't>,
    fallback_hand: usize,
    writebacks: u64,
}

impl<'t> SimMemory<'t> {
    fn new(trace: &'t Trace, frames: usize, pool: Box<dyn FrameSource + 't>) -> Self {
        SimMemory {
            flags: vec![0; trace.distinct()],
            pages: &trace.pages,
            trace,
            capacity: frames,
            resident: 0,
            pool,
            fallback_hand: 0,
            writebacks: 0,
        }
    }

    fn page_at(&self, slot: u32) -> Page {
        Page {
            slot,
            vpn: self.pages[slot as usize],
        }
    }

    /// A resident page chosen by the engine when the policy has none or names
    /// an invalid one: the next resident slot after a rotating hand.
    fn fallback_victim(&mut self, incoming: u32) -> Option<Page> {
        let n = self.flags.len();
        for _ in 0..n {
            let s = self.fallback_hand;
            self.fallback_hand = (self.fallback_hand + 1) % n;
            if self.flags[s] & RESIDENT != 0 && s as u32 != incoming {
                return Some(self.page_at(s as u32));
            }
        }
        None
    }
}

impl Memory for SimMemory<'_> {
    fn slots(&self) -> usize {
        self.flags.len()
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn resident(&self) -> usize {
        self.resident
    }
    fn is_resident(&self, slot: u32) -> bool {
        self.flags
            .get(slot as usize)
            .is_some_and(|f| f & RESIDENT != 0)
    }
    fn page(&self, slot: u32) -> Page {
        self.page_at(slot)
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        self.trace.slot_of(vpn).map(|slot| Page { slot, vpn })
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.flags
            .get(slot as usize)
            .is_some_and(|f| f & (RESIDENT | REFERENCED) == RESIDENT | REFERENCED)
    }
    fn is_modified(&self, slot: u32) -> bool {
        self.flags
            .get(slot as usize)
            .is_some_and(|f| f & (RESIDENT | MODIFIED) == RESIDENT | MODIFIED)
    }
    fn clear_referenced(&mut self, slot: u32) {
        if let Some(f) = self.flags.get_mut(slot as usize) {
            *f &= !REFERENCED;
        }
    }
    fn request_frames(&mut self, count: usize) -> usize {
        // No more frames than there are pages, as live.
        let count = count.min(self.flags.len().saturating_sub(self.capacity));
        let granted = self.pool.request(count);
        self.capacity += granted;
        granted
    }
    fn release_frames(&mut self, count: usize) -> usize {
        // Only free frames go back, and the machine keeps one, as live.
        let free = self
            .capacity
            .saturating_sub(self.resident)
            .min(self.capacity.saturating_sub(1));
        let returned = self.pool.release(count.min(free));
        self.capacity -= returned;
        returned
    }
    fn flush(&mut self, slot: u32) -> bool {
        match self.flags.get_mut(slot as usize) {
            Some(f) if *f & RESIDENT != 0 => {
                if *f & MODIFIED != 0 {
                    *f &= !MODIFIED;
                    self.writebacks += 1;
                }
                true
            }
            _ => false,
        }
    }
}

/// The policy being simulated, typed by what it sees.
enum Driver {
    Live(Box<dyn Policy>),
    Reference(Box<dyn ReferencePolicy>),
}

/// A simulated machine: memory of `frames` frames under one policy.
pub struct Machine<'t> {
    mem: SimMemory<'t>,
    driver: Driver,
    /// Counters so far.
    pub counters: Counters,
}

impl<'t> Machine<'t> {
    /// A machine over `trace`'s pages with `frames` frames and `pool` more
    /// frames available on request.
    pub fn new(trace: &'t Trace, policy: Built, frames: usize, pool: usize) -> Self {
        Machine::with_source(trace, policy, frames, Box::new(Spare(pool)))
    }

    /// A machine over `trace`'s pages with `frames` frames whose `Request`
    /// and `Release` go to `source`.
    pub fn with_source(
        trace: &'t Trace,
        policy: Built,
        frames: usize,
        source: Box<dyn FrameSource + 't>,
    ) -> Self {
        let driver = match policy {
            Built::Live(p) => Driver::Live(p),
            Built::Reference(p) => Driver::Reference(p),
        };
        Machine {
            mem: SimMemory::new(trace, frames.max(1), source),
            driver,
            counters: Counters::default(),
        }
    }

    /// Frames the policy holds now.
    pub fn capacity(&self) -> usize {
        self.mem.capacity
    }

    /// Pages resident now.
    pub fn resident(&self) -> usize {
        self.mem.resident
    }

    /// Whether the page in `slot` is resident (its next reference is no
    /// missing fault).
    pub fn is_resident(&self, slot: u32) -> bool {
        self.mem.is_resident(slot)
    }

    fn policy(&mut self) -> &mut dyn Policy {
        match &mut self.driver {
            Driver::Live(p) => p.as_mut(),
            Driver::Reference(p) => p.as_mut(),
        }
    }

    /// Policy incidents so far (for example a program stopped by its budget).
    pub fn incidents(&mut self) -> Vec<String> {
        self.policy().incidents()
    }

    /// Simulates one reference to `slot` at time `index`.
    #[inline]
    pub fn access(&mut self, slot: u32, write: bool, index: u64) -> Access {
        self.counters.references += 1;
        if let Driver::Reference(p) = &mut self.driver {
            p.on_reference(self.mem.page_at(slot), index);
        }
        self.serve(slot, write, index)
    }

    /// [`Machine::access`] once the policy has seen the reference.
    #[inline]
    fn serve(&mut self, slot: u32, write: bool, index: u64) -> Access {
        let s = slot as usize;
        let f = self.mem.flags[s];
        if f & RESIDENT != 0 {
            if write {
                self.mem.flags[s] |= MODIFIED;
            }
            if f & REFERENCED != 0 {
                return Access::Hit;
            }
            self.mem.flags[s] |= REFERENCED;
            self.counters.minor_faults += 1;
            let fault = Fault {
                page: self.mem.page_at(slot),
                kind: FaultKind::Minor,
                write,
                time: index,
            };
            self.deliver(fault);
            return Access::Minor;
        }
        self.missing(slot, write, index, f)
    }

    fn deliver(&mut self, fault: Fault) {
        let (mem, driver) = (&mut self.mem, &mut self.driver);
        match driver {
            Driver::Live(p) => p.on_fault(fault, mem),
            Driver::Reference(p) => p.on_fault(fault, mem),
        }
    }

    #[cold]
    fn missing(&mut self, slot: u32, write: bool, index: u64, f: u8) -> Access {
        let cold = f & TOUCHED == 0;
        self.counters.faults += 1;
        self.counters.cold_faults += u64::from(cold);
        let incoming = self.mem.page_at(slot);
        let mut victim = None;
        while self.mem.resident >= self.mem.capacity {
            let Some(v) = self.choose_victim(incoming) else {
                break;
            };
            self.evict(v);
            victim = Some(v);
        }
        self.mem.flags[slot as usize] =
            RESIDENT | REFERENCED | TOUCHED | if write { MODIFIED } else { 0 };
        self.mem.resident += 1;
        self.deliver(Fault {
            page: incoming,
            kind: FaultKind::Missing,
            write,
            time: index,
        });
        Access::Missing { cold, victim }
    }

    fn choose_victim(&mut self, incoming: Page) -> Option<Page> {
        let (mem, driver) = (&mut self.mem, &mut self.driver);
        let named = match driver {
            Driver::Live(p) => p.victim(incoming, mem),
            Driver::Reference(p) => p.victim(incoming, mem),
        };
        match named {
            Some(v)
                if v.slot != incoming.slot
                    && mem.is_resident(v.slot)
                    && v.vpn == mem.page_at(v.slot).vpn =>
            {
                Some(v)
            }
            // No victim needed: the policy obtained a frame (Request).
            None if incoming.slot != u32::MAX && mem.resident < mem.capacity => None,
            _ => {
                self.counters.overruled += 1;
                self.mem.fallback_victim(incoming.slot)
            }
        }
    }

    fn evict(&mut self, page: Page) {
        let f = &mut self.mem.flags[page.slot as usize];
        if *f & MODIFIED != 0 {
            self.counters.writebacks += 1;
        }
        *f &= TOUCHED;
        self.mem.resident -= 1;
        self.counters.evictions += 1;
        let (mem, driver) = (&mut self.mem, &mut self.driver);
        match driver {
            Driver::Live(p) => p.on_evict(page, mem),
            Driver::Reference(p) => p.on_evict(page, mem),
        }
    }

    /// Simulates every reference of `trace` in order, as [`Machine::access`]
    /// would one by one. A reference to a resident page whose referenced bit
    /// is set is a hit that no live policy observes (a live pager does not
    /// see it either): for live policies such hits are counted in a tight
    /// loop, without a call per reference; a reference policy is handed
    /// each run of them in one call ([`ReferencePolicy::on_hits`]).
    pub fn run_trace(&mut self, trace: &Trace) {
        if matches!(self.driver, Driver::Reference(_)) {
            self.run_reference(trace);
        } else {
            self.run_live(trace);
        }
        self.counters.references += trace.refs.len() as u64;
    }

    fn run_live(&mut self, trace: &Trace) {
        let writes = trace.has_writes();
        for (i, &slot) in trace.refs.iter().enumerate() {
            let write = writes && trace.is_write(i);
            let f = &mut self.mem.flags[slot as usize];
            if *f & SEEN == SEEN {
                if write {
                    *f |= MODIFIED;
                }
            } else {
                self.serve(slot, write, i as u64);
            }
        }
    }

    fn run_reference(&mut self, trace: &Trace) {
        let (refs, vpns) = (&trace.refs[..], self.mem.pages);
        let writes = trace.has_writes();
        let mut i = 0;
        while i < refs.len() {
            let run = i;
            while let Some(&slot) = refs.get(i) {
                let f = &mut self.mem.flags[slot as usize];
                if *f & SEEN != SEEN {
                    break;
                }
                if writes && trace.is_write(i) {
                    *f |= MODIFIED;
                }
                i += 1;
            }
            let Driver::Reference(p) = &mut self.driver else {
                return;
            };
            if i > run {
                p.on_hits(&refs[run..i], run as u64, vpns);
            }
            if let Some(&slot) = refs.get(i) {
                p.on_reference(self.mem.page_at(slot), i as u64);
                self.serve(slot, writes && trace.is_write(i), i as u64);
                i += 1;
            }
        }
    }

    /// Counters with the flush write-backs included.
    pub fn finish(mut self) -> Counters {
        self.counters.writebacks += self.mem.writebacks;
        self.counters
    }
}

/// Runs a whole trace through a policy with `frames` frames.
pub fn simulate(trace: &Trace, policy: Built, frames: usize) -> Counters {
    let mut m = Machine::new(trace, policy, frames, 0);
    m.run_trace(trace);
    m.finish()
}

/// As [`simulate`], with the policy's incidents (for example a policy
/// program stopped by its budget) for the run's report.
pub fn simulate_reporting(trace: &Trace, policy: Built, frames: usize) -> (Counters, Vec<String>) {
    let mut m = Machine::new(trace, policy, frames, 0);
    m.run_trace(trace);
    let incidents = m.incidents();
    (m.finish(), incidents)
}

#[cfg(test)]
mod tests;
