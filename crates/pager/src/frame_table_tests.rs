//! Unit tests of the frame table (`resident.rs`).

use super::*;
use pagepilot_policy::Memory;

/// Evicts pages `0..n` in turn through a table of `frames` frames.
fn cycle(table: &mut FrameTable, n: u32) {
    for s in 0..n {
        table.set(s, State::Resident, 0);
        table.set(s, State::Absent, 0);
        table.set_evicted_at(s, u64::from(s) + 1);
    }
}

#[test]
fn test_slots_follow_the_budget_and_forgotten_pages_are_told_in_eviction_order() {
    let frames = 4;
    let mut t = FrameTable::new(1 << 31, frames);
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
    let mut t = FrameTable::new(1 << 20, 2);
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
fn mirrored(pages: usize) -> FrameTable {
    let mut t = FrameTable::new(pages, 4);
    t.dirty = Some(crate::dirty::DirtyMirror::create(pages).unwrap().1);
    t
}

fn bit(t: &FrameTable, s: u32) -> bool {
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
    assert_eq!((t.usable(), t.capacity(), t.min_budget()), (2, 2, 3));
    t.set(3, State::Resident, REFERENCED | MODIFIED);
    assert!(bit(&t, 3));
    assert_eq!(t.fallback_victim(&[]), Some(3));
}

#[test]
fn test_begin_load_makes_absent_pages_loading_and_holds_their_frames() {
    let mut t = FrameTable::new(100, 8);
    t.begin_load(10, 3);
    assert!((10..13).all(|q| t.state(q) == State::Loading));
    assert_eq!((t.held(), t.frames_in_use(), t.room()), (3, 3, 5));
    assert!(!t.take_wake(), "entering a transition wakes nobody");
}

#[test]
fn test_complete_load_makes_a_page_resident_with_its_flags_and_wakes_waiters() {
    let mut t = FrameTable::new(100, 8);
    t.begin_load(4, 1);
    t.complete_load(4, REFERENCED | MODIFIED);
    assert_eq!(t.state(4), State::Resident);
    assert_eq!(t.flags(4), REFERENCED | MODIFIED);
    assert_eq!(Memory::resident(&t), 1);
    assert!(t.take_wake(), "a page left Loading");
    assert!(!t.take_wake(), "the wake-up is taken once");
}

#[test]
fn test_abort_load_frees_the_frames_and_wakes_waiters() {
    let mut t = FrameTable::new(100, 8);
    t.begin_load(0, 4);
    t.abort_load(0, 4);
    assert!((0..4).all(|q| t.state(q) == State::Absent));
    assert_eq!((t.held(), t.room()), (0, 8));
    assert!(t.take_wake());
}

#[test]
fn test_fill_zero_makes_an_absent_page_resident_without_a_transition() {
    let mut t = FrameTable::new(100, 8);
    t.fill_zero(9, REFERENCED);
    assert_eq!(t.state(9), State::Resident);
    assert_eq!(t.held(), 1);
    assert!(
        !t.take_wake(),
        "nobody can wait for a page never in transition"
    );
}

#[test]
fn test_begin_eviction_keeps_the_flags_and_says_whether_to_write_back() {
    let mut t = FrameTable::new(100, 2);
    t.fill_zero(1, REFERENCED | MODIFIED);
    t.fill_zero(2, REFERENCED);
    t.fill_zero(3, REFERENCED);
    assert_eq!(t.excess(), 1);
    assert!(t.begin_eviction(1), "a modified victim is written back");
    assert!(!t.begin_eviction(2), "a clean one is not");
    assert_eq!(t.flags(1), REFERENCED | MODIFIED);
    assert_eq!(t.state(1), State::Evicting);
    // Frames being evicted count as free already.
    assert_eq!((t.excess(), t.frames_in_use(), t.held()), (0, 1, 3));
}

#[test]
fn test_finish_eviction_frees_a_written_page_and_keeps_a_failed_one_dirty() {
    let mut t = mirrored(100);
    t.fill_zero(1, REFERENCED | MODIFIED);
    t.fill_zero(2, REFERENCED | MODIFIED);
    t.begin_eviction(1);
    t.begin_eviction(2);
    assert_eq!(t.finish_eviction(1, true), REFERENCED | MODIFIED);
    assert_eq!(t.state(1), State::Absent);
    assert!(!bit(&t, 1), "written back: clean");
    t.finish_eviction(2, false);
    assert_eq!((t.state(2), t.flags(2)), (State::Unwritten, MODIFIED));
    assert!(bit(&t, 2), "its write-back failed: still dirty");
    assert_eq!((t.unwritten(), t.held()), (1, 1));
    assert!(t.take_wake());
}

#[test]
fn test_begin_rewrite_moves_an_unwritten_page_to_evicting_until_written() {
    let mut t = FrameTable::new(100, 4);
    t.fill_zero(5, MODIFIED);
    t.begin_eviction(5);
    t.finish_eviction(5, false);
    t.begin_rewrite(5);
    assert_eq!((t.state(5), t.unwritten()), (State::Evicting, 0));
    t.finish_eviction(5, true);
    assert_eq!((t.state(5), t.held()), (State::Absent, 0));
}

#[test]
fn test_pin_takes_a_page_out_of_the_policys_view_and_unpin_gives_it_back() {
    let mut t = FrameTable::new(100, 4);
    t.begin_load(6, 1);
    t.complete_load(6, PENDING | PROBE);
    assert_eq!(t.pin(6), PENDING | PROBE);
    assert_eq!((t.state(6), t.flags(6)), (State::Locked, REFERENCED));
    assert_eq!((t.pinned(), Memory::resident(&t), t.usable()), (1, 0, 3));
    assert_eq!(t.fallback_victim(&[]), None, "a pinned page is no victim");
    t.unpin(6);
    assert_eq!((t.state(6), t.pinned()), (State::Resident, 0));
    assert_eq!(t.fallback_victim(&[]), Some(6));
}

#[test]
fn test_the_budget_grows_waking_waiters_and_never_shrinks_below_the_pins_and_a_frame() {
    let mut t = FrameTable::new(100, 4);
    assert!(!t.grow_budget_to(3), "growing never shrinks");
    assert!(!t.take_wake());
    assert!(t.grow_budget_to(6));
    assert!(t.take_wake(), "waiters on frames are woken");
    t.grow_budget_by(2);
    assert_eq!(t.budget(), 8);
    t.fill_zero(0, REFERENCED);
    t.pin(0);
    t.fill_zero(1, REFERENCED);
    t.pin(1);
    assert_eq!((t.min_budget(), t.spare_budget()), (3, 5));
    assert_eq!(t.shrink_budget(100), 5, "only the spare frames are taken");
    assert_eq!(t.budget(), 3);
    assert_eq!(t.set_budget(1), 3);
    assert_eq!(t.budget(), 3, "set no lower than the pins and a frame");
}

#[test]
fn test_frames_granted_by_the_source_through_the_policy_grow_the_budget() {
    let mut t = FrameTable::new(100, 4);
    // No source: the budget is fixed at map time.
    assert_eq!(t.request_frames(4), 0);
    assert_eq!(t.release_frames(2), 0);
    assert_eq!(t.budget(), 4);
}

#[test]
fn test_cleared_referenced_bits_are_handed_out_in_contiguous_runs_once() {
    let mut t = FrameTable::new(100, 16);
    for q in [3, 4, 5, 9, 10, 20] {
        t.fill_zero(q, REFERENCED);
    }
    for q in [10, 4, 20, 3, 9, 5, 4] {
        let slot = t.page_view(q).slot;
        t.clear_referenced(slot);
    }
    let mut runs = Vec::new();
    t.drain_cleared(|first, n| runs.push((first, n)));
    assert_eq!(runs, vec![(3, 3), (9, 2), (20, 1)]);
    t.drain_cleared(|first, n| runs.push((first, n)));
    assert_eq!(runs.len(), 3, "each run is handed out once");
    assert_eq!(t.flags(4), 0);
}

#[test]
fn test_flush_requests_of_the_policy_are_taken_once_and_only_for_dirty_pages() {
    let mut t = FrameTable::new(100, 4);
    t.fill_zero(1, REFERENCED | MODIFIED);
    t.fill_zero(2, REFERENCED);
    assert!(t.flush(t.page_view(1).slot));
    assert!(
        t.flush(t.page_view(2).slot),
        "a clean resident page: nothing to do"
    );
    assert!(!t.flush(t.page_view(3).slot), "not resident");
    assert_eq!(t.take_flush_requests(), Some(vec![1]));
    assert_eq!(t.take_flush_requests(), None);
}
