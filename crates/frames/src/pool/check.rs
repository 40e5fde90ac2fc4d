//! The manager against the reference model (the implementation it
//! replaced, walking every holder and order): the same outputs, stats and
//! free frames after every step of random sequences; and the new queries
//! (`asked_of`, `next_deadline_ns`, `held`, `short_of_minimum`,
//! `force_overdue`) against what the model's pending list says.

use proptest::prelude::*;

use super::model::Model;
use super::*;
use crate::ManualClock;

#[derive(Debug, Clone)]
enum Op {
    Register(usize),
    Unregister(u8),
    Request(u8, usize),
    Release(u8, usize),
    Returned(u8, usize),
    Balance,
    Overdue,
    ForceOverdue,
    Advance(u64),
    /// The clock set back: deadlines no longer grow with age.
    SetBack(u64),
    Burst(usize),
    /// A new deadline, for orders asked from now on: shorter ones make a
    /// holder's newer orders due before its older ones.
    Deadline(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..24).prop_map(Op::Register),
        1 => any::<u8>().prop_map(Op::Unregister),
        6 => (any::<u8>(), 0usize..40).prop_map(|(k, n)| Op::Request(k, n)),
        2 => (any::<u8>(), 0usize..20).prop_map(|(k, n)| Op::Release(k, n)),
        4 => (any::<u8>(), 0usize..20).prop_map(|(k, n)| Op::Returned(k, n)),
        1 => Just(Op::Balance),
        1 => Just(Op::Overdue),
        1 => Just(Op::ForceOverdue),
        2 => (0u64..2_000).prop_map(Op::Advance),
        1 => (0u64..2_000).prop_map(Op::SetBack),
        1 => (0usize..60).prop_map(Op::Burst),
        1 => (0u64..3_000).prop_map(Op::Deadline),
    ]
}

/// Frames the model's pending list asks of `id`.
fn model_asked(r: &Model<&ManualClock>, id: HolderId) -> usize {
    r.pending()
        .iter()
        .filter(|o| o.holder == id)
        .map(|o| o.frames)
        .sum()
}

/// Everything observable agrees, and the manager's totals and sets are
/// what its holders say.
fn agree(
    m: &FrameManager<&ManualClock>,
    r: &Model<&ManualClock>,
    ids: &[HolderId],
) -> Result<(), TestCaseError> {
    m.holders.check();
    prop_assert_eq!(m.free(), r.free());
    prop_assert_eq!(m.held(), m.total() - r.free());
    prop_assert_eq!(m.holders.len(), r.len());
    prop_assert_eq!(m.pending(), r.pending().to_vec());
    prop_assert_eq!(
        m.next_deadline_ns(),
        r.pending().iter().map(|o| o.deadline_ns).min()
    );
    prop_assert_eq!(m.short_of_minimum().collect::<Vec<_>>(), r.owed());
    for &id in ids {
        prop_assert_eq!(m.stats(id), r.stats(id));
        prop_assert_eq!(m.asked_of(id), model_asked(r, id));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn test_the_manager_answers_as_the_reference_model_after_every_step(
        total in 1usize..80,
        burst in 0usize..60,
        ops in proptest::collection::vec(op(), 1..160),
    ) {
        let clock = ManualClock::at(5_000);
        let mut m = FrameManager::new(total, &clock)
            .unwrap()
            .with_partition_burst(burst)
            .with_deadline_ns(1_000);
        let mut r = Model::new(total, &clock)
            .unwrap()
            .with_partition_burst(burst)
            .with_deadline_ns(1_000);
        let mut ids: Vec<HolderId> = Vec::new();
        for op in ops {
            // Holders gone stay in `ids`: both must refuse them alike. An
            // index past them names a holder never registered.
            let pick = |k: u8| {
                ids.get(usize::from(k) % (ids.len() + 1))
                    .copied()
                    .unwrap_or(HolderId(10_000 + u32::from(k)))
            };
            match op {
                Op::Register(min) => {
                    let got = m.register(min);
                    prop_assert_eq!(&got, &r.register(min));
                    if let Ok((id, _)) = got {
                        ids.push(id);
                    }
                }
                Op::Unregister(k) => prop_assert_eq!(m.unregister(pick(k)), r.unregister(pick(k))),
                Op::Request(k, n) => prop_assert_eq!(m.request(pick(k), n), r.request(pick(k), n)),
                Op::Release(k, n) => prop_assert_eq!(m.release(pick(k), n), r.release(pick(k), n)),
                Op::Returned(k, n) => prop_assert_eq!(m.returned(pick(k), n), r.returned(pick(k), n)),
                Op::Balance => prop_assert_eq!(m.balance(), r.balance()),
                Op::Overdue => prop_assert_eq!(m.overdue(), r.overdue()),
                Op::ForceOverdue => {
                    let before: Vec<u64> = ids
                        .iter()
                        .map(|&id| r.stats(id).map_or(0, |s| s.forced))
                        .collect();
                    let got = m.force_overdue();
                    let late = r.overdue();
                    prop_assert_eq!(&got.late, &late);
                    // Per holder, in the order of its first late order: what
                    // its `forced` count grew by.
                    let mut forced: Vec<(HolderId, usize)> = Vec::new();
                    for o in &late {
                        if forced.iter().all(|(h, _)| *h != o.holder) {
                            let i = ids.iter().position(|&id| id == o.holder).unwrap();
                            let after = r.stats(o.holder).map_or(0, |s| s.forced);
                            forced.push((o.holder, (after - before[i]) as usize));
                        }
                    }
                    prop_assert_eq!(got.forced, forced);
                }
                Op::Advance(ns) => clock.advance(ns),
                Op::SetBack(ns) => clock.set(clock.now_ns().saturating_sub(ns)),
                Op::Burst(b) => {
                    m.set_partition_burst(b);
                    r.set_partition_burst(b);
                }
                Op::Deadline(ns) => {
                    m.set_deadline_ns(ns);
                    r.set_deadline_ns(ns);
                }
            }
            agree(&m, &r, &ids)?;
        }
    }
}

fn pool(total: usize, burst: usize) -> FrameManager<ManualClock> {
    FrameManager::new(total, ManualClock::at(0))
        .unwrap()
        .with_partition_burst(burst)
        .with_deadline_ns(1_000)
}

#[test]
fn test_asked_of_and_next_deadline_follow_the_orders_as_they_are_answered() {
    let mut p = pool(100, 0);
    let (a, _) = p.register(10).unwrap();
    let (b, _) = p.register(10).unwrap();
    assert_eq!((p.asked_of(a), p.next_deadline_ns()), (0, None));
    p.request(a, 20).unwrap();
    p.clock.advance(500);
    p.request(b, 5).unwrap();
    assert_eq!((p.asked_of(a), p.asked_of(b)), (20, 5));
    assert_eq!(p.next_deadline_ns(), Some(1_000));
    p.returned(a, 20).unwrap();
    assert_eq!((p.asked_of(a), p.next_deadline_ns()), (0, Some(1_500)));
    assert_eq!(p.asked_of(HolderId(77)), 0, "no such holder");
    assert_eq!(p.held(), 25);
    assert_eq!(p.held() + p.free(), p.total());
}

#[test]
fn test_short_of_minimum_lists_the_holders_owed_frames_in_registration_order() {
    let mut p = pool(100, 100);
    let (a, _) = p.register(10).unwrap();
    p.request(a, 90).unwrap();
    let (b, _) = p.register(20).unwrap();
    let (c, _) = p.register(30).unwrap();
    assert_eq!(
        p.short_of_minimum().collect::<Vec<_>>(),
        vec![(b, 0), (c, 0)]
    );
    p.returned(a, 25).unwrap();
    assert_eq!(p.short_of_minimum().collect::<Vec<_>>(), vec![(c, 5)]);
    // Below its minimum by its own release: not owed, not listed.
    p.release(a, 5).unwrap();
    p.returned(a, 100).unwrap();
    assert_eq!(p.short_of_minimum().count(), 0);
    assert!(p.stats(a).unwrap().held < 10);
}

#[test]
fn test_force_overdue_reports_what_was_taken_when_a_holder_released_meanwhile() {
    let mut p = pool(100, 0);
    let (a, _) = p.register(10).unwrap();
    p.request(a, 20).unwrap();
    p.set_deadline_ns(2_000);
    p.set_partition_burst(usize::MAX);
    p.request(a, 10).unwrap();
    p.set_partition_burst(0);
    assert_eq!(p.balance().len(), 1);
    // Two orders (20 and 10 frames); it releases all but 5 frames.
    p.release(a, 35).unwrap();
    p.clock.advance(2_000);
    let got = p.force_overdue();
    assert_eq!(
        got.late.iter().map(|r| r.frames).collect::<Vec<_>>(),
        [20, 10]
    );
    assert_eq!(got.forced, vec![(a, 5)]);
    let s = p.stats(a).unwrap();
    assert_eq!((s.held, s.forced, s.forced_incidents), (0, 5, 2));
    assert_eq!((p.asked_of(a), p.next_deadline_ns()), (0, None));
}

#[test]
fn test_an_order_given_a_shorter_deadline_is_forced_before_older_ones() {
    let mut p = pool(100, 0);
    let (a, _) = p.register(0).unwrap();
    p.set_deadline_ns(5_000);
    p.request(a, 10).unwrap();
    p.set_deadline_ns(1_000);
    p.request(a, 4).unwrap();
    assert_eq!(p.next_deadline_ns(), Some(1_000));
    p.clock.advance(1_000);
    let late = p.overdue();
    assert_eq!((late.len(), late[0].frames), (1, 4));
    assert_eq!((p.asked_of(a), p.next_deadline_ns()), (10, Some(5_000)));
    // The older order is still answered first.
    p.returned(a, 10).unwrap();
    assert_eq!((p.asked_of(a), p.pending()), (0, vec![]));
}
