//! Unit tests of the policy port (`policy_port.rs`).

use super::*;
use crate::frame_table::{State, REFERENCED};
use pagepilot_policy::Memory;

/// A policy that records what it is told, and names `victim`.
#[derive(Default)]
struct Recorder {
    told: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    victim: Option<Page>,
}

impl Policy for Recorder {
    fn name(&self) -> String {
        "recorder".into()
    }
    fn on_fault(&mut self, fault: Fault, _: &mut dyn Memory) {
        let mut told = self.told.lock().unwrap();
        told.push(format!("fault {} at {}", fault.page.vpn, fault.time));
    }
    fn victim(&mut self, incoming: Page, _: &mut dyn Memory) -> Option<Page> {
        self.told
            .lock()
            .unwrap()
            .push(format!("victim for {}", incoming.vpn));
        self.victim
    }
    fn on_evict(&mut self, page: Page, _: &mut dyn Memory) {
        self.told
            .lock()
            .unwrap()
            .push(format!("evict {}", page.vpn));
    }
    fn on_forget(&mut self, page: Page) {
        self.told
            .lock()
            .unwrap()
            .push(format!("forget {}", page.vpn));
    }
}

#[test]
fn test_the_policy_forgets_pages_the_table_stopped_remembering_before_any_other_call() {
    let recorder = Recorder::default();
    let told = recorder.told.clone();
    let mut port = PolicyPort::new(Box::new(recorder));
    // One frame: evicted pages beyond the history bound are forgotten.
    let mut t = FrameTable::new(100, 1);
    for q in 0..4 {
        t.fill_zero(q, REFERENCED);
        t.begin_eviction(q);
        t.finish_eviction(q, true);
    }
    assert!(t.has_forgotten());
    port.fault(&mut t, 50, FaultKind::Missing, false);
    let told = told.lock().unwrap().clone();
    assert_eq!(told, vec!["forget 0", "forget 1", "fault 50 at 1"]);
    assert!(!t.has_forgotten());
}

#[test]
fn test_the_clock_advances_with_each_fault_told_and_nothing_else() {
    let recorder = Recorder::default();
    let told = recorder.told.clone();
    let mut port = PolicyPort::new(Box::new(recorder));
    let mut t = FrameTable::new(100, 4);
    t.fill_zero(1, REFERENCED);
    port.fault(&mut t, 1, FaultKind::Missing, false);
    let _ = port.victim(&mut t, 2);
    port.forget_page(&mut t, 1);
    port.fault(&mut t, 2, FaultKind::Minor, true);
    let told = told.lock().unwrap().clone();
    assert_eq!(
        told,
        vec!["fault 1 at 1", "victim for 2", "evict 1", "fault 2 at 2"]
    );
    assert_eq!(
        t.state(1),
        State::Resident,
        "the port changes no page state"
    );
}
