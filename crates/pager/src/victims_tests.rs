//! Unit tests of victim choice (`victims.rs`), over a frame table and a
//! scripted policy: no userfaultfd.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use pagepilot_policy::{Fault, Memory, Page, Policy};

use crate::around::ReadAround;
use crate::frame_table::{FrameTable, State, PENDING, REFERENCED};
use crate::policy_port::PolicyPort;
use crate::readahead::ReadAhead;
use crate::region_state::{RegionState, RECENT_FAULTS};
use crate::stats::Counters;

/// A policy that names the page (by number) its script says, and gives
/// back the pages the script lists when asked to reclaim.
#[derive(Default, Clone)]
struct Script {
    victim: Arc<Mutex<Option<u64>>>,
    reclaim: Arc<Mutex<Vec<u64>>>,
    evicted: Arc<Mutex<Vec<u64>>>,
}

impl Policy for Script {
    fn name(&self) -> String {
        "script".into()
    }
    fn on_fault(&mut self, _: Fault, _: &mut dyn Memory) {}
    fn victim(&mut self, _: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.victim.lock().unwrap().and_then(|vpn| mem.page_of(vpn))
    }
    fn on_evict(&mut self, page: Page, _: &mut dyn Memory) {
        self.evicted.lock().unwrap().push(page.vpn);
    }
    fn reclaim(&mut self, _: usize, mem: &mut dyn Memory) -> Vec<Page> {
        let pages = self.reclaim.lock().unwrap().clone();
        pages.iter().filter_map(|&vpn| mem.page_of(vpn)).collect()
    }
}

/// A region of 100 pages, `budget` frames, pages `resident` resident.
fn region(budget: usize, resident: &[u32], script: &Script) -> RegionState {
    let mut table = FrameTable::new(100, budget);
    for &q in resident {
        table.fill_zero(q, REFERENCED);
    }
    RegionState {
        table,
        policy: PolicyPort::new(Box::new(script.clone())),
        readahead: ReadAhead::new(ReadAround::new(32, 128)),
        recent_faults: [u32::MAX; RECENT_FAULTS],
        prefetch: Default::default(),
        readers: None,
        evictions: None,
    }
}

#[test]
fn test_the_policys_victim_is_taken_and_the_policy_told() {
    let script = Script::default();
    *script.victim.lock().unwrap() = Some(2);
    let mut g = region(3, &[1, 2, 3], &script);
    let stats = Counters::default();
    assert_eq!(g.take_victim(9, 0, &stats), Some((2, false)));
    assert_eq!(g.table.state(2), State::Evicting);
    assert_eq!(*script.evicted.lock().unwrap(), vec![2]);
    assert_eq!(stats.overruled.load(Relaxed), 0);
}

#[test]
fn test_a_victim_that_is_not_a_resident_page_is_overruled() {
    let script = Script::default();
    let stats = Counters::default();
    // The incoming page itself, a page read ahead not handed over, none.
    for named in [Some(9), Some(3), None] {
        *script.victim.lock().unwrap() = named;
        let mut g = region(3, &[1, 2], &script);
        g.table.begin_load(3, 1);
        g.table.complete_load(3, PENDING);
        g.table.begin_load(9, 1);
        let (v, _) = g.take_victim(9, 0, &stats).expect("a fallback victim");
        assert!(v == 1 || v == 2, "named {named:?}: took {v}");
    }
    assert_eq!(stats.overruled.load(Relaxed), 3);
}

#[test]
fn test_two_pages_evicting_each_other_in_turn_are_kept_apart() {
    let script = Script::default();
    // The policy names the page the last fault brought in, for a page
    // evicted one eviction ago: another page goes instead.
    *script.victim.lock().unwrap() = Some(5);
    let mut g = region(3, &[4, 5, 6], &script);
    g.recent_faults[0] = 5;
    g.table.fill_zero(7, REFERENCED);
    g.table.begin_eviction(7);
    g.table.finish_eviction(7, true);
    g.table.set_evicted_at(7, 10);
    let stats = Counters::default();
    let (v, _) = g.take_victim(7, 11, &stats).unwrap();
    assert_ne!(v, 5);
    assert_eq!(stats.refaults_guarded.load(Relaxed), 1);
    // Long ago: the policy's choice stands.
    let mut g = region(3, &[4, 5, 6], &script);
    g.recent_faults[0] = 5;
    assert_eq!(
        g.take_victim(7, 10 + RECENT_FAULTS as u64, &stats)
            .unwrap()
            .0,
        5
    );
}

#[test]
fn test_victims_are_chosen_for_the_excess_and_a_shortfall_is_counted() {
    let script = Script::default();
    let mut g = region(4, &[0, 1, 2, 3], &script);
    g.table.begin_load(10, 3);
    let stats = Counters::default();
    let victims = g.choose_victims(10, 0, &stats);
    assert_eq!(victims.len(), 3);
    assert_eq!(g.table.excess(), 0);
    // Pinned pages are no victims: nothing left to take.
    let mut g = region(2, &[0, 1], &script);
    g.table.pin(0);
    g.table.pin(1);
    g.table.begin_load(10, 1);
    assert!(g.choose_victims(10, 0, &stats).is_empty());
    assert_eq!(stats.over_budget.load(Relaxed), 1);
}

#[test]
fn test_reclaimed_pages_that_are_not_takeable_are_overruled() {
    let script = Script::default();
    *script.reclaim.lock().unwrap() = vec![1, 50, 2];
    let mut g = region(3, &[1, 2, 3], &script);
    let stats = Counters::default();
    let got = g.take_reclaimed(3, &stats);
    assert_eq!(got, vec![(1, false), (2, false)]);
    assert_eq!(
        stats.overruled.load(Relaxed),
        0,
        "page 50 has no slot: the policy named nothing"
    );
    *script.reclaim.lock().unwrap() = vec![3, 1];
    let got = g.take_reclaimed(2, &stats);
    assert_eq!(got, vec![(3, false)]);
    assert_eq!(
        stats.overruled.load(Relaxed),
        1,
        "page 1 is evicting already"
    );
}
