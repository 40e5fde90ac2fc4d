//! Helpers shared by the policy-program test files: a small engine the
//! programs run against.

use pagepilot_policy::program::interp::EventInput;
use pagepilot_policy::{Memory, Page};

/// Slots of the test engine.
pub const SLOTS: usize = 16;

/// A small engine: resident (bit 0), referenced (bit 1), modified (bit 2).
#[derive(Clone, Debug, PartialEq)]
pub struct Mem {
    /// Per slot: resident (bit 0), referenced (bit 1), modified (bit 2).
    pub flags: [u8; SLOTS],
    /// Frames the policy may use.
    pub capacity: usize,
}

impl Memory for Mem {
    fn slots(&self) -> usize {
        SLOTS
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn resident(&self) -> usize {
        self.flags.iter().filter(|f| **f & 1 != 0).count()
    }
    fn is_resident(&self, slot: u32) -> bool {
        self.flags.get(slot as usize).is_some_and(|f| f & 1 != 0)
    }
    fn page(&self, slot: u32) -> Page {
        Page {
            slot,
            vpn: u64::from(slot) + 100,
        }
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        (100..100 + SLOTS as u64)
            .contains(&vpn)
            .then(|| self.page((vpn - 100) as u32))
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.flags.get(slot as usize).is_some_and(|f| f & 3 == 3)
    }
    fn is_modified(&self, slot: u32) -> bool {
        self.flags.get(slot as usize).is_some_and(|f| f & 5 == 5)
    }
    fn clear_referenced(&mut self, slot: u32) {
        if let Some(f) = self.flags.get_mut(slot as usize) {
            *f &= !2;
        }
    }
    fn request_frames(&mut self, count: usize) -> usize {
        let n = count.min(2);
        self.capacity += n;
        n
    }
    fn release_frames(&mut self, count: usize) -> usize {
        let n = count.min(self.capacity.saturating_sub(1));
        self.capacity -= n;
        n
    }
    fn flush(&mut self, slot: u32) -> bool {
        self.is_resident(slot)
    }
}

impl Mem {
    /// An engine with no page resident and room for `capacity` frames.
    pub fn new(capacity: usize) -> Mem {
        Mem {
            flags: [0; SLOTS],
            capacity,
        }
    }

    /// Sets every slot's flags from the xorshift state `x` (advanced in place),
    /// OR-ed with `always` (1: every page resident).
    pub fn scramble(&mut self, x: &mut u64, always: u8) {
        for (i, f) in self.flags.iter_mut().enumerate() {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *f = (*x >> (i % 32)) as u8 & 7 | always;
        }
    }

    /// The inputs of an event in round `round` faulting on slot `fault % SLOTS`: free frames
    /// alternate 0/1, every third round writes.
    pub fn event_input(&self, fault: usize, round: usize) -> EventInput {
        EventInput {
            fault: (fault % SLOTS) as u32,
            free: (round % 2) as i64,
            reclaim: 1,
            write: round.is_multiple_of(3),
            resident: self.resident() as i64,
            capacity: self.capacity as i64,
        }
    }
}
