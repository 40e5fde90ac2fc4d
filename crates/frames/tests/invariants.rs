//! Whatever holders ask, in any order, the frame manager never loses or
//! invents a frame: the frames held and the free ones sum to the pool, and
//! every holder keeps its minimum once the frames owed to it came back.

use pagepilot_frames::{FrameManager, HolderId, ManualClock};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Register(usize),
    Unregister(u32),
    Request(u32, usize),
    Release(u32, usize),
    GiveBack(u32, usize),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..40).prop_map(Op::Register),
        (0u32..6).prop_map(Op::Unregister),
        (0u32..6, 0usize..200).prop_map(|(h, n)| Op::Request(h, n)),
        (0u32..6, 0usize..50).prop_map(|(h, n)| Op::Release(h, n)),
        (0u32..6, 0usize..50).prop_map(|(h, n)| Op::GiveBack(h, n)),
        (0u64..3_000).prop_map(Op::Tick),
    ]
}

proptest! {
    #[test]
    fn test_frames_held_and_free_always_sum_to_the_pool(
        total in 1usize..200,
        burst in 0usize..200,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let clock = ManualClock::at(0);
        let mut p = FrameManager::new(total, &clock)
            .unwrap()
            .with_partition_burst(burst)
            .with_deadline_ns(1_000);
        let mut ids: Vec<HolderId> = Vec::new();
        for op in ops {
            let pick = |k: u32| ids.get(k as usize).copied().unwrap_or(HolderId(k));
            // Refusals (unknown holders, minimums that do not fit) are fine;
            // the sums must hold either way.
            match op {
                Op::Register(min) => {
                    if let Ok((id, _)) = p.register(min) {
                        ids.push(id);
                    }
                }
                Op::Unregister(k) => { let _ = p.unregister(pick(k)); }
                Op::Request(k, n) => { let _ = p.request(pick(k), n); }
                Op::Release(k, n) => { let _ = p.release(pick(k), n); }
                Op::GiveBack(k, n) => { let _ = p.returned(pick(k), n); }
                Op::Tick(ns) => {
                    clock.advance(ns);
                    let _ = p.overdue();
                }
            }
            let held: usize = ids.iter().filter_map(|&id| p.stats(id).ok()).map(|s| s.held).sum();
            prop_assert_eq!(held + p.free(), total);
            let mins: usize = ids.iter().filter_map(|&id| p.stats(id).ok()).map(|s| s.min).sum();
            prop_assert!(mins <= total);
        }
    }
}
