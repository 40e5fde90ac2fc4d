//! The exact policies as they were before their recency became stamps
//! ([`crate::stamp::StampList`]), kept as test oracles: the new ones must
//! choose the same victims on every trace.

mod list_arc;
mod list_lru;

use super::testbed::Testbed;
use super::{Arc, ExactLru};
use crate::ReferencePolicy;
use list_arc::ListArc;
use list_lru::ListLru;
use proptest::prelude::*;

/// Victims and fault count of `refs` through `p`, one reference at a time.
fn one_by_one<P: ReferencePolicy>(
    mut p: P,
    refs: &[u32],
    slots: usize,
    frames: usize,
) -> (Vec<u32>, u64) {
    let mut bed = Testbed::new(slots, frames);
    bed.run_reference(&mut p, refs);
    (bed.evicted, bed.faults)
}

/// As [`one_by_one`], with runs of hits handed over in one
/// [`ReferencePolicy::on_hits`] call, as the simulator does.
fn batched<P: ReferencePolicy>(
    mut p: P,
    refs: &[u32],
    slots: usize,
    frames: usize,
) -> (Vec<u32>, u64) {
    let mut bed = Testbed::new(slots, frames);
    let vpns: Vec<u64> = (0..slots as u64).collect();
    let mut i = 0;
    while i < refs.len() {
        let run = i;
        while i < refs.len() && bed.holds(refs[i]) {
            i += 1;
        }
        if i > run {
            p.on_hits(&refs[run..i], run as u64, &vpns);
        }
        if i < refs.len() {
            bed.access_reference(&mut p, refs[i], i as u64);
            i += 1;
        }
    }
    (bed.evicted, bed.faults)
}

/// A reference string with locality: mostly a hot set, some scans.
fn trace() -> impl Strategy<Value = (Vec<u32>, usize)> {
    (1usize..24).prop_flat_map(|frames| {
        let refs = proptest::collection::vec(
            prop_oneof![
                4 => 0u32..(frames as u32 + 4),
                1 => 0u32..64,
            ],
            0..600,
        );
        (refs, Just(frames))
    })
}

proptest! {
    /// The stamped LRU evicts the pages the linked-list LRU evicts, in the
    /// same order, whether hits come one by one or in runs.
    #[test]
    fn test_stamped_lru_evicts_as_list_lru((refs, frames) in trace()) {
        let want = one_by_one(ListLru::new(), &refs, 64, frames);
        prop_assert_eq!(&one_by_one(ExactLru::new(), &refs, 64, frames), &want);
        prop_assert_eq!(&batched(ExactLru::new(), &refs, 64, frames), &want);
    }

    /// The stamped ARC evicts the pages the linked-list ARC evicts, in the
    /// same order, whether hits come one by one or in runs.
    #[test]
    fn test_stamped_arc_evicts_as_list_arc((refs, frames) in trace()) {
        let want = one_by_one(ListArc::new(frames), &refs, 64, frames);
        prop_assert_eq!(&one_by_one(Arc::new(frames), &refs, 64, frames), &want);
        prop_assert_eq!(&batched(Arc::new(frames), &refs, 64, frames), &want);
    }
}
