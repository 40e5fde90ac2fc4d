//! Unit tests of the frame table (`resident.rs`).

use super::*;
use pagepilot_policy::Memory;

/// Evicts pages `0..n` in turn through a table of `frames` frames.
fn cycle(table: &mut Table, n: u32) {
    for s in 0..n {
        table.set(s, State::Resident, 0);
        table.set(s, State::Absent, 0);
        table.set_evicted_at(s, u64::from(s) + 1);
    }
}

#[test]
fn test_slots_follow_the_budget_and_forgotten_pages_are_told_in_eviction_order() {
    let frames = 4;
    let mut t = Table::new(1 << 31, frames, 0);
    cycle(&mut t, 100);
    let bound = frames * HISTORY_PER_FRAME;
    // Only the last `bound` evicted pages are remembered, in as many slots.
    assert!(t.slots() <= bound + 1, "{} slots", t.slots());
    assert_eq!(t.evicted_at(99), 100);
    assert_eq!(t.evicted_at(99 - bound as u32), 0);
    let told: Vec<u64> = t.forgotten.iter().map(|p| p.vpn).collect();
    assert_eq!(told, (0..100 - bound as u64).collect::<Vec<_>>());
    // A forgotten page's slot names another page now.
    let last = t.forgotten.last().unwrap();
    assert_ne!(t.page(last.slot).vpn, last.vpn);
}

#[test]
fn test_a_page_back_in_memory_keeps_its_slot_past_the_history_bound() {
    let mut t = Table::new(1 << 20, 2, 0);
    t.set(7, State::Resident, REFERENCED);
    t.set(7, State::Absent, 0);
    let slot = t.page_view(7).slot;
    t.set(7, State::Resident, REFERENCED);
    cycle(&mut t, 5);
    assert_eq!(t.page_view(7).slot, slot);
    assert!(t.is_referenced(slot));
    assert!(t.forgotten.iter().all(|p| p.vpn != 7));
    assert_eq!(t.held_pages(), vec![7]);
}

/// A table of `pages` pages with a dirty map.
fn mirrored(pages: usize) -> Table {
    let mut t = Table::new(pages, 4, 0);
    t.dirty = Some(crate::dirty::DirtyMirror::create(pages).unwrap().1);
    t
}

fn bit(t: &Table, s: u32) -> bool {
    t.dirty.as_ref().unwrap().is_set(s)
}

#[test]
fn test_the_dirty_bit_is_set_with_modified_and_kept_through_eviction_until_absent() {
    let mut t = mirrored(100);
    t.set(7, State::Loading, 0);
    t.set(7, State::Resident, REFERENCED);
    assert!(!bit(&t, 7), "a page read in is clean");
    t.set_flags(7, REFERENCED | MODIFIED);
    assert!(
        bit(&t, 7),
        "set with MODIFIED, before the write is let through"
    );
    t.set(7, State::Evicting, REFERENCED | MODIFIED);
    assert!(bit(&t, 7), "kept while the eviction writes the page back");
    t.set(7, State::Unwritten, MODIFIED);
    assert!(bit(&t, 7), "kept when the write-back failed");
    t.set(7, State::Evicting, MODIFIED);
    t.set(7, State::Absent, 0);
    assert!(!bit(&t, 7), "cleared once written back and punched");
}

#[test]
fn test_the_dirty_bit_stays_set_while_a_flush_writes_the_page() {
    let mut t = mirrored(100);
    t.set(70, State::Resident, REFERENCED | MODIFIED);
    assert!(bit(&t, 70));
    t.set_flags(70, REFERENCED | FLUSHING);
    assert!(
        bit(&t, 70),
        "MODIFIED cleared for the flush: the bit is not"
    );
    t.set_flags(70, REFERENCED | FLUSHING | MODIFIED);
    t.set_flags(70, REFERENCED | MODIFIED);
    assert!(bit(&t, 70), "written again during the flush: still dirty");
    t.set_flags(70, REFERENCED | FLUSHING);
    t.set_flags(70, REFERENCED);
    assert!(!bit(&t, 70), "cleared once the flush wrote it");
}

#[test]
fn test_pinned_pages_keep_their_dirty_bit_and_count_apart_from_unwritten_ones() {
    let mut t = mirrored(100);
    t.set(3, State::Resident, REFERENCED | MODIFIED);
    t.set(3, State::Locked, REFERENCED | MODIFIED);
    t.set(4, State::Resident, REFERENCED);
    t.set(4, State::Locked, REFERENCED);
    t.set(5, State::Unwritten, MODIFIED);
    assert_eq!((t.locked, t.unwritten, t.resident, t.held), (2, 1, 0, 3));
    assert!(bit(&t, 3) && !bit(&t, 4) && bit(&t, 5));
    // Pinned pages are no victims, and the policy has the frames they leave.
    assert_eq!(t.fallback_victim(&[]), None);
    assert_eq!((t.usable(), t.capacity(), t.min_capacity()), (2, 2, 3));
    t.set(3, State::Resident, REFERENCED | MODIFIED);
    assert!(bit(&t, 3));
    assert_eq!(t.fallback_victim(&[]), Some(3));
}
