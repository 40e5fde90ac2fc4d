//! The frame table of a region: the Cache Kernel's cached mappings with
//! their referenced and modified bits, the page states and the budget. It
//! alone changes them, through its transitions (begin a load, complete it,
//! abort it, take a victim, finish an eviction, pin, unpin, grow or shrink
//! the budget), and it makes no system call: the region's lock
//! (`crate::lock`) zaps the PTEs it queues and wakes the threads its
//! transitions release, when the lock is let go. The policy sees it through
//! [`Memory`] (`frame_table_memory.rs`).

use std::collections::{HashMap, VecDeque};

use pagepilot_policy::hash::BuildVpnHasher;
use pagepilot_policy::Page;

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
    /// until a flush writes it.
    Unwritten,
    /// Pinned by the application (`Region::pin`, the Cache Kernel's locked
    /// mappings): in memory, held outside the policy, never a victim of any
    /// path until unpinned. Dirty tracking and flushes work as for a
    /// resident page.
    Locked,
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

/// A slot naming no page.
const NO_PAGE: u32 = u32::MAX;

/// The frame table. Lives under the region's lock, next to the policy.
///
/// Its size follows the budget, not the region: a page has an entry (a
/// slot) while it holds a frame and for a while after its eviction, so that
/// a policy's history of it (ghost lists) and the refault checks still find
/// it. The pages remembered after their eviction are bounded by
/// [`HISTORY_PER_FRAME`] times the budget; then the oldest one's slot is
/// reused, and the policy told to forget it ([`FrameTable::take_forgotten`]).
///
/// Rules it keeps: the counts (`held`, `resident`, `unwritten`, `locked`,
/// `evicting`) always match the states; the dirty map follows the MODIFIED
/// and FLUSHING flags; the budget never drops below the pinned pages and
/// one frame ([`FrameTable::min_budget`]); every transition out of Loading
/// or Evicting, and every budget growth, asks for a wake-up
/// ([`FrameTable::take_wake`]).
pub struct FrameTable {
    /// Page -> its slot, for every page held or remembered.
    slot_of: HashMap<u32, u32, BuildVpnHasher>,
    /// Per slot: its page (`NO_PAGE`: free).
    page_in: Vec<u32>,
    /// Per slot: state and flags.
    bits: Vec<u8>,
    /// Per slot: the region's eviction sequence number of the page's last
    /// eviction (0: never).
    evicted_at: Vec<u64>,
    /// Per slot: the number of its latest entry in `history`.
    remembered_as: Vec<u64>,
    /// Slots of absent pages, oldest eviction first, with their entry's number.
    history: VecDeque<(u32, u64)>,
    entries: u64,
    /// Free slots.
    free: Vec<u32>,
    /// Pages whose slots were freed: the policy must forget them before it
    /// is called again (`crate::policy_port`).
    forgotten: Vec<Page>,
    pages: usize,
    /// Pages in state Resident (what the policy sees as resident).
    resident: usize,
    /// Frames holding data: every state but Absent.
    held: usize,
    /// Pages whose write-back failed (`State::Unwritten`).
    unwritten: usize,
    /// Pages pinned by the application (`State::Locked`).
    locked: usize,
    /// Pages being evicted (their frames are about to be freed).
    evicting: usize,
    /// The budget in frames.
    budget: usize,
    hand: usize,
    /// Pages the policy asked to flush ([`Memory::flush`]); taken by a handler.
    flush_queue: Vec<u32>,
    /// Where the budget is drawn from, if anywhere (a pool, the daemon):
    /// `Request`/`Release` go there.
    source: Option<crate::source::Source>,
    /// Pages whose referenced bit was cleared and whose PTE is still to be
    /// zapped, in contiguous runs, before the lock is released
    /// ([`FrameTable::drain_cleared`]).
    zap_queue: Vec<u32>,
    /// A page left a transition state or the budget grew: the threads
    /// waiting on the region are to be woken.
    wake: bool,
    /// The dirty map shared with the daemon (writable file regions), kept
    /// in step with the MODIFIED and FLUSHING flags (`crate::dirty`).
    dirty: Option<crate::dirty::DirtyMirror>,
}

/// Evicted pages remembered per frame of the budget: ARC's and CAR's
/// ghosts are at most one budget, S3-FIFO's and 2Q's less.
pub const HISTORY_PER_FRAME: usize = 2;

impl FrameTable {
    /// A table of `pages` absent pages and a budget of `budget` frames.
    pub fn new(pages: usize, budget: usize) -> Self {
        FrameTable {
            slot_of: HashMap::default(),
            page_in: Vec::new(),
            bits: Vec::new(),
            evicted_at: Vec::new(),
            remembered_as: Vec::new(),
            history: VecDeque::new(),
            entries: 0,
            free: Vec::new(),
            forgotten: Vec::new(),
            pages,
            resident: 0,
            held: 0,
            unwritten: 0,
            locked: 0,
            evicting: 0,
            budget,
            hand: 0,
            wake: false,
            flush_queue: Vec::new(),
            zap_queue: Vec::new(),
            source: None,
            dirty: None,
        }
    }

    /// The slot of page `s`, if it has one.
    fn slot(&self, s: u32) -> Option<usize> {
        self.slot_of.get(&s).map(|&k| k as usize)
    }

    /// A slot for page `s`, given now if it has none.
    fn slot_for(&mut self, s: u32) -> usize {
        if let Some(k) = self.slot(s) {
            return k;
        }
        let k = match self.free.pop() {
            Some(k) => k as usize,
            None => {
                self.page_in.push(NO_PAGE);
                self.bits.push(0);
                self.evicted_at.push(0);
                self.remembered_as.push(0);
                self.page_in.len() - 1
            }
        };
        self.page_in[k] = s;
        self.slot_of.insert(s, k as u32);
        k
    }

    /// Remembers absent slot `k` after its page's eviction; frees the
    /// oldest remembered slots beyond the history's bound.
    fn remember(&mut self, k: usize) {
        self.entries += 1;
        self.remembered_as[k] = self.entries;
        self.history.push_back((k as u32, self.entries));
        let bound = self.budget.max(1) * HISTORY_PER_FRAME;
        while self.history.len() > bound {
            let Some((old, entry)) = self.history.pop_front() else {
                break;
            };
            let old = old as usize;
            // A page that came back since, or was evicted again later, keeps its slot.
            if self.remembered_as[old] == entry && self.bits[old] & STATE_MASK == 0 {
                self.free_slot(old);
            }
        }
    }

    fn free_slot(&mut self, k: usize) {
        let page = self.page_in[k];
        self.slot_of.remove(&page);
        self.page_in[k] = NO_PAGE;
        self.bits[k] = 0;
        self.evicted_at[k] = 0;
        self.free.push(k as u32);
        self.forgotten.push(Page {
            slot: k as u32,
            vpn: u64::from(page),
        });
    }

    /// The eviction sequence number of page `s`'s last eviction (0: never,
    /// or too long ago to be remembered).
    pub fn evicted_at(&self, s: u32) -> u64 {
        self.slot(s).map_or(0, |k| self.evicted_at[k])
    }

    /// Records page `s`'s eviction as number `seq`.
    pub fn set_evicted_at(&mut self, s: u32, seq: u64) {
        if let Some(k) = self.slot(s) {
            self.evicted_at[k] = seq;
        }
    }

    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// The state of page `s`.
    pub fn state(&self, s: u32) -> State {
        match self.slot(s).map_or(0, |k| self.bits[k] & STATE_MASK) {
            0 => State::Absent,
            1 => State::Loading,
            2 => State::Resident,
            3 => State::Evicting,
            4 => State::Unwritten,
            _ => State::Locked,
        }
    }

    /// The flag bits of page `s`.
    pub fn flags(&self, s: u32) -> u8 {
        self.slot(s).map_or(0, |k| self.bits[k] & !STATE_MASK)
    }

    /// Sets the flag bits of page `s` (which holds a frame). Setting
    /// MODIFIED sets the page's bit in the dirty map before the caller lets
    /// the application write (`crate::dirty`).
    pub fn set_flags(&mut self, s: u32, flags: u8) {
        if let Some(k) = self.slot(s) {
            let old = self.bits[k];
            let new = (old & STATE_MASK) | (flags & !STATE_MASK);
            self.bits[k] = new;
            if let Some(d) = &self.dirty {
                d.mirror(s, crate::dirty::is_dirty(old), crate::dirty::is_dirty(new));
            }
        }
    }

    /// Moves page `s` to `to` with `flags`, keeping the counts and the
    /// dirty map: a page's bit follows its MODIFIED and FLUSHING flags, and
    /// clears when it becomes Absent (its write-back and punch are done).
    /// Entering Evicting must keep those two flags (the bit stays as it is
    /// while the eviction writes the page back). Only the transitions below
    /// call it.
    fn set(&mut self, s: u32, to: State, flags: u8) {
        let from = self.state(s);
        if from == State::Absent && to == State::Absent {
            return;
        }
        if matches!(from, State::Loading | State::Evicting) {
            self.wake = true;
        }
        let count =
            |n: &mut usize, x: State| *n = *n + usize::from(to == x) - usize::from(from == x);
        let held = |x: State| x != State::Absent;
        self.held = self.held + usize::from(held(to)) - usize::from(held(from));
        count(&mut self.resident, State::Resident);
        count(&mut self.unwritten, State::Unwritten);
        count(&mut self.locked, State::Locked);
        count(&mut self.evicting, State::Evicting);
        let k = self.slot_for(s);
        let old = self.bits[k];
        if to == State::Absent {
            self.bits[k] = 0;
            self.remember(k);
        } else {
            self.bits[k] = code(to) | (flags & !STATE_MASK);
        }
        debug_assert!(
            to != State::Evicting
                || crate::dirty::is_dirty(old) == crate::dirty::is_dirty(self.bits[k]),
            "page {s} entered Evicting with other dirty flags"
        );
        if let Some(d) = &self.dirty {
            d.mirror(
                s,
                crate::dirty::is_dirty(old),
                crate::dirty::is_dirty(self.bits[k]),
            );
        }
    }

    /// Absent pages `first..first + n` start being read in: they are
    /// `Loading`, their frames reserved, and a fault on them waits.
    pub fn begin_load(&mut self, first: u32, n: usize) {
        for q in first..first + n as u32 {
            debug_assert_eq!(self.state(q), State::Absent, "page {q} loaded twice");
            self.set(q, State::Loading, 0);
        }
    }

    /// Page `q`'s read completed: it is `Resident` with `flags` (PENDING
    /// for a prefetched window not handed to the policy yet).
    pub fn complete_load(&mut self, q: u32, flags: u8) {
        debug_assert_eq!(self.state(q), State::Loading, "page {q} was not loading");
        self.set(q, State::Resident, flags);
    }

    /// Pages `first..first + n` were not read (the read failed, or they lie
    /// beyond the file's end): they are `Absent` again, their frames free.
    pub fn abort_load(&mut self, first: u32, n: usize) {
        for q in first..first + n as u32 {
            debug_assert_eq!(self.state(q), State::Loading, "page {q} was not loading");
            self.set(q, State::Absent, 0);
        }
    }

    /// Absent page `q` is filled with zeros and mapped under the lock, with
    /// no transition state: nothing is read and its frame was free.
    pub fn fill_zero(&mut self, q: u32, flags: u8) {
        debug_assert_eq!(self.state(q), State::Absent, "page {q} was not absent");
        self.set(q, State::Resident, flags);
    }

    /// Resident page `s` becomes a victim: `Evicting`, keeping its flags
    /// (and its dirty bit while it is written back). Returns whether it is
    /// dirty (must be written back).
    pub fn begin_eviction(&mut self, s: u32) -> bool {
        debug_assert_eq!(self.state(s), State::Resident, "victim {s} not resident");
        let flags = self.flags(s);
        self.set(s, State::Evicting, flags);
        flags & MODIFIED != 0
    }

    /// A page whose write-back failed (`Unwritten`) is written again: it is
    /// `Evicting` meanwhile, freed by [`FrameTable::finish_eviction`].
    pub fn begin_rewrite(&mut self, s: u32) {
        debug_assert_eq!(self.state(s), State::Unwritten, "page {s} not unwritten");
        let flags = self.flags(s);
        self.set(s, State::Evicting, flags);
    }

    /// Ends page `s`'s eviction: written back (or clean) and punched, it is
    /// `Absent` (its dirty bit clears); its write-back failed, it is
    /// `Unwritten`, dirty, held outside the policy until a flush writes it.
    /// Returns its flags as a victim.
    pub fn finish_eviction(&mut self, s: u32, written: bool) -> u8 {
        debug_assert_eq!(self.state(s), State::Evicting, "page {s} not evicting");
        let flags = self.flags(s);
        if written {
            self.set(s, State::Absent, 0);
        } else {
            self.set(s, State::Unwritten, MODIFIED);
        }
        flags
    }

    /// Pins page `s` (`Resident` or `Unwritten`): `Locked`, referenced,
    /// keeping its MODIFIED and FLUSHING flags. Returns its flags before.
    pub fn pin(&mut self, s: u32) -> u8 {
        debug_assert!(matches!(self.state(s), State::Resident | State::Unwritten));
        let f = self.flags(s);
        self.set(s, State::Locked, (f & !(PENDING | PROBE)) | REFERENCED);
        f
    }

    /// Unpins page `s`: `Resident` again with its flags.
    pub fn unpin(&mut self, s: u32) {
        debug_assert_eq!(self.state(s), State::Locked, "page {s} not pinned");
        let f = self.flags(s);
        self.set(s, State::Resident, f);
    }

    /// Whether a transition or a budget growth asked for a wake-up since
    /// the last call (cleared).
    pub fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// The pages whose slots were freed since the last call: the policy
    /// forgets them before it is called again.
    pub fn take_forgotten(&mut self) -> std::vec::Drain<'_, Page> {
        self.forgotten.drain(..)
    }

    /// Whether the policy has pages to forget.
    pub fn has_forgotten(&self) -> bool {
        !self.forgotten.is_empty()
    }

    /// The pages the policy asked to flush since the last call, if any.
    pub fn take_flush_requests(&mut self) -> Option<Vec<u32>> {
        (!self.flush_queue.is_empty()).then(|| std::mem::take(&mut self.flush_queue))
    }

    /// Where the budget is drawn from, if anywhere.
    pub fn source(&self) -> Option<&crate::source::Source> {
        self.source.as_ref()
    }

    /// Draws the budget from `source` from now on.
    pub fn set_source(&mut self, source: Option<crate::source::Source>) {
        self.source = source;
    }

    /// Takes the budget's source away (the region is closing).
    pub fn take_source(&mut self) -> Option<crate::source::Source> {
        self.source.take()
    }

    /// Keeps `dirty` in step with the pages' flags from now on.
    pub fn set_dirty_map(&mut self, dirty: Option<crate::dirty::DirtyMirror>) {
        self.dirty = dirty;
    }

    /// The policy's view of page `s`: its slot (`u32::MAX` if it has none,
    /// a page no policy was told of).
    pub fn page_view(&self, s: u32) -> Page {
        Page {
            slot: self.slot(s).map_or(u32::MAX, |k| k as u32),
            vpn: u64::from(s),
        }
    }

    /// The page a policy's answer names, if the answer is the page its slot
    /// holds now.
    pub fn page_named(&self, p: Page) -> Option<u32> {
        let page = *self.page_in.get(p.slot as usize)?;
        (page != NO_PAGE && u64::from(page) == p.vpn).then_some(page)
    }

    /// Every page holding a frame, in ascending order.
    pub fn held_pages(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.page_in.len())
            .filter(|&k| self.bits[k] & STATE_MASK != 0)
            .map(|k| self.page_in[k])
            .collect();
        v.sort_unstable();
        v
    }

    /// A resident page other than `not` and not being flushed, chosen by a rotating hand: the
    /// engine's choice when the policy has none or names an invalid one.
    pub fn fallback_victim(&mut self, not: &[u32]) -> Option<u32> {
        let n = self.page_in.len();
        for _ in 0..n {
            let k = self.hand;
            self.hand = (self.hand + 1) % n;
            let b = self.bits[k];
            let ok = b == code(State::Resident) | (b & (REFERENCED | MODIFIED));
            if ok && !not.contains(&self.page_in[k]) {
                return Some(self.page_in[k]);
            }
        }
        None
    }

    /// Bytes the table holds: its entries, slots and queues.
    pub fn bookkeeping_bytes(&self) -> usize {
        use std::mem::size_of;
        // A hash map entry: its key, its value and one control byte.
        self.slot_of.capacity() * (2 * size_of::<u32>() + 1)
            + self.page_in.capacity() * size_of::<u32>()
            + self.bits.capacity()
            + self.evicted_at.capacity() * size_of::<u64>()
            + self.remembered_as.capacity() * size_of::<u64>()
            + self.history.capacity() * size_of::<(u32, u64)>()
            + (self.free.capacity() + self.flush_queue.capacity() + self.zap_queue.capacity())
                * size_of::<u32>()
            + self.forgotten.capacity() * size_of::<Page>()
    }

    /// Hands `zap` the pages whose referenced bit was cleared, in
    /// contiguous runs `(first, pages)` (a CLOCK sweep clears long runs):
    /// their PTEs are to be zapped before the lock is released.
    pub fn drain_cleared(&mut self, mut zap: impl FnMut(u32, usize)) {
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
            zap(first, n);
            i += n;
        }
        self.zap_queue.clear();
    }

    /// Slot `slot`'s bits, if it holds a page.
    fn slot_bits(&self, slot: u32) -> u8 {
        self.bits.get(slot as usize).copied().unwrap_or(0)
    }
}

// The policy's view of the table.
#[path = "frame_table_memory.rs"]
mod memory;

// The budget and the counts that follow from the states.
#[path = "frame_table_budget.rs"]
mod budget;

#[cfg(test)]
#[path = "frame_table_tests.rs"]
mod tests;
