//! The resident-mapping table of a region (the Cache Kernel's cached
//! mappings with their referenced and modified bits), and the policy's view
//! of it through [`Memory`].

use pagepilot_policy::{Memory, Page};

use crate::sys::{self, PAGE};

/// Where a page is. The low three bits of a slot's byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Not in memory.
    Absent,
    /// Being read in by a handler (its frame is reserved).
    Loading,
    /// In memory, known to the policy.
    Resident,
    /// Being written back and freed by a handler.
    Evicting,
    /// In memory and dirty, its write-back failed: held outside the policy
    /// (like a locked page) until a flush writes it.
    Pinned,
}

const STATE_MASK: u8 = 7;
/// Accessed since the bit was last cleared (the page is mapped in the
/// application's view).
pub const REFERENCED: u8 = 8;
/// Written since the last write-back.
pub const MODIFIED: u8 = 16;
/// A flush is writing the page back (it counts as dirty for eviction).
pub const FLUSHING: u8 = 32;
/// Read ahead by a prefetcher, in memory and mapped, not handed to the
/// policy yet: it is when the application enters the page's window.
pub const PENDING: u8 = 64;
/// The unmapped last page of a cluster read around a random fault: its
/// first touch tells that the cluster was used (`around`).
pub const PROBE: u8 = 128;

fn code(s: State) -> u8 {
    s as u8
}

/// The frame table. Lives under the region's lock, next to the policy.
pub struct Table {
    bits: Vec<u8>,
    /// Pages in state Resident (what the policy sees as resident).
    pub resident: usize,
    /// Frames holding data: every state but Absent.
    pub held: usize,
    /// Pinned pages.
    pub pinned: usize,
    /// Pages being evicted (their frames are about to be freed).
    pub evicting: usize,
    /// The budget in frames.
    pub capacity: usize,
    app: usize,
    hand: usize,
    /// Pages the policy asked to flush ([`Memory::flush`]); drained by a handler.
    pub flush_queue: Vec<u32>,
    /// Pages whose referenced bit was cleared and whose PTE is still to be
    /// zapped; zapped in contiguous runs by [`Table::zap_cleared`] before the
    /// lock is released.
    zap_queue: Vec<u32>,
    /// Per page: the region's eviction sequence number of its last eviction.
    evicted_at: Vec<u64>,
}

impl Table {
    /// A table of `pages` absent pages, `capacity` frames, application view at `app`.
    pub fn new(pages: usize, capacity: usize, app: usize) -> Self {
        Table {
            bits: vec![0; pages],
            resident: 0,
            held: 0,
            pinned: 0,
            evicting: 0,
            capacity,
            app,
            hand: 0,
            flush_queue: Vec::new(),
            zap_queue: Vec::new(),
            evicted_at: vec![0; pages],
        }
    }

    /// The eviction sequence number of page `s`'s last eviction (0: never).
    pub fn evicted_at(&self, s: u32) -> u64 {
        self.evicted_at[s as usize]
    }

    /// Records page `s`'s eviction as number `seq`.
    pub fn set_evicted_at(&mut self, s: u32, seq: u64) {
        self.evicted_at[s as usize] = seq;
    }

    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.bits.len()
    }

    /// The state of page `s`.
    pub fn state(&self, s: u32) -> State {
        match self.bits[s as usize] & STATE_MASK {
            0 => State::Absent,
            1 => State::Loading,
            2 => State::Resident,
            3 => State::Evicting,
            _ => State::Pinned,
        }
    }

    /// The flag bits of page `s`.
    pub fn flags(&self, s: u32) -> u8 {
        self.bits[s as usize] & !STATE_MASK
    }

    /// Sets the flag bits of page `s`.
    pub fn set_flags(&mut self, s: u32, flags: u8) {
        let b = &mut self.bits[s as usize];
        *b = (*b & STATE_MASK) | (flags & !STATE_MASK);
    }

    /// Moves page `s` to `to` with `flags`, keeping the counts.
    pub fn set(&mut self, s: u32, to: State, flags: u8) {
        let from = self.state(s);
        let held = |x: State| x != State::Absent;
        self.held = self.held + usize::from(held(to)) - usize::from(held(from));
        self.resident = self.resident + usize::from(to == State::Resident)
            - usize::from(from == State::Resident);
        self.pinned =
            self.pinned + usize::from(to == State::Pinned) - usize::from(from == State::Pinned);
        self.evicting = self.evicting + usize::from(to == State::Evicting)
            - usize::from(from == State::Evicting);
        self.bits[s as usize] = code(to) | (flags & !STATE_MASK);
    }

    /// A resident page other than `not` and not being flushed, chosen by a rotating hand: the
    /// engine's choice when the policy has none or names an invalid one.
    pub fn fallback_victim(&mut self, not: &[u32]) -> Option<u32> {
        let n = self.bits.len();
        for _ in 0..n {
            let s = self.hand;
            self.hand = (self.hand + 1) % n;
            let ok =
                self.bits[s] == code(State::Resident) | (self.bits[s] & (REFERENCED | MODIFIED));
            if ok && !not.contains(&(s as u32)) {
                return Some(s as u32);
            }
        }
        None
    }

    /// Frames that must be freed to stay within the budget (frames being
    /// evicted already count as free).
    pub fn excess(&self) -> usize {
        (self.held - self.evicting).saturating_sub(self.capacity)
    }

    /// Pages that fit in the budget without an eviction.
    pub fn room(&self) -> usize {
        self.capacity.saturating_sub(self.held - self.evicting)
    }

    /// Zaps the PTEs of the pages whose referenced bit was cleared, one
    /// `madvise` per contiguous run (a CLOCK sweep clears long runs).
    pub fn zap_cleared(&mut self) {
        if self.zap_queue.is_empty() {
            return;
        }
        self.zap_queue.sort_unstable();
        self.zap_queue.dedup();
        let mut i = 0;
        while i < self.zap_queue.len() {
            let first = self.zap_queue[i];
            let mut n = 1;
            while i + n < self.zap_queue.len() && self.zap_queue[i + n] == first + n as u32 {
                n += 1;
            }
            let _ = sys::zap(self.app + first as usize * PAGE, n * PAGE);
            i += n;
        }
        self.zap_queue.clear();
    }

    fn page_at(slot: u32) -> Page {
        Page {
            slot,
            vpn: u64::from(slot),
        }
    }
}

impl Memory for Table {
    fn slots(&self) -> usize {
        self.bits.len()
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn resident(&self) -> usize {
        self.resident
    }
    fn is_resident(&self, slot: u32) -> bool {
        (slot as usize) < self.bits.len() && self.state(slot) == State::Resident
    }
    fn page(&self, slot: u32) -> Page {
        Table::page_at(slot)
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        (vpn < self.bits.len() as u64).then(|| Table::page_at(vpn as u32))
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.is_resident(slot) && self.flags(slot) & REFERENCED != 0
    }
    fn is_modified(&self, slot: u32) -> bool {
        self.is_resident(slot) && self.flags(slot) & MODIFIED != 0
    }
    fn clear_referenced(&mut self, slot: u32) {
        if !self.is_referenced(slot) {
            return;
        }
        // The application's PTE is zapped (in a batch, before the lock is
        // released); the frame stays in the memfd and the next access is a
        // minor fault that sets the bit again.
        let f = self.flags(slot) & !REFERENCED;
        self.set_flags(slot, f);
        self.zap_queue.push(slot);
    }
    fn request_frames(&mut self, _count: usize) -> usize {
        // No global frame manager yet: the budget is fixed at map time.
        0
    }
    fn release_frames(&mut self, _count: usize) -> usize {
        0
    }
    fn flush(&mut self, slot: u32) -> bool {
        if !self.is_resident(slot) {
            return false;
        }
        if self.flags(slot) & MODIFIED != 0 {
            self.flush_queue.push(slot);
        }
        true
    }
}
