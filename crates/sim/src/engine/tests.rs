//! The batched engine against the reference-by-reference one.

use super::*;
use pagepilot_policy::registry::{self, Setup};

/// Loops, a sweep and scattered pages, a third of them writes.
fn mixed_trace_with_writes() -> Trace {
    let mut t = Trace::new();
    let mut x = 11u64;
    for i in 0..6000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let page = match (i / 700) % 3 {
            0 => i % 90,
            1 => i % 400,
            _ => (x >> 40) % 150,
        };
        t.push(page, matches!((x >> 20) % 3, 0));
    }
    t
}

#[test]
fn test_run_trace_counts_exactly_what_access_by_access_counts() {
    let trace = mixed_trace_with_writes();
    assert!(trace.has_writes());
    for name in registry::available() {
        for frames in [7, 60, 200] {
            let setup = Setup {
                slots: trace.distinct(),
                frames,
                future: Some(&trace.refs),
            };
            let build = || registry::build(name, &setup).unwrap();
            let mut one = Machine::new(&trace, build(), frames, 0);
            for (i, &slot) in trace.refs.iter().enumerate() {
                one.access(slot, trace.is_write(i), i as u64);
            }
            let mut batched = Machine::new(&trace, build(), frames, 0);
            batched.run_trace(&trace);
            assert_eq!(batched.finish(), one.finish(), "{name} at {frames}");
        }
    }
}
