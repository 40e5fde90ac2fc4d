//! The frame manager's behaviour, as specified before its rewrite (these
//! tests are unchanged from then).

use super::*;
use crate::ManualClock;

fn pool(total: usize, burst: usize) -> FrameManager<ManualClock> {
    FrameManager::new(total, ManualClock::at(0))
        .unwrap()
        .with_partition_burst(burst)
        .with_deadline_ns(1_000)
}

#[test]
fn test_a_minimum_that_does_not_fit_beside_the_others_is_refused_at_the_boundary() {
    let mut p = pool(100, 100);
    p.register(60).unwrap();
    assert!(p.register(40).is_ok());
    assert_eq!(
        p.register(1).unwrap_err(),
        FrameError::MinDoesNotFit {
            asked: 1,
            total: 100,
            reserved: 100
        }
    );
    assert_eq!(
        FrameManager::new(0, ManualClock::at(0)).unwrap_err(),
        FrameError::EmptyPool
    );
}

#[test]
fn test_holders_that_come_and_go_leave_nothing_behind_and_ids_are_not_reused() {
    let mut m = pool(100, 50);
    let (first, _) = m.register(10).unwrap();
    for _ in 0..10_000 {
        let (id, _) = m.register(5).unwrap();
        assert_eq!(m.unregister(id).unwrap(), 5);
    }
    assert_eq!(m.holders.len(), 1, "only the live holder is kept");
    assert_eq!(m.free(), 90);
    // A newcomer gets a fresh id, after the first in FAFR order.
    let (late, _) = m.register(10).unwrap();
    assert!(late > first && late.0 >= 10_001, "{late:?}");
    m.request(first, 40).unwrap();
    let (granted, orders) = m.request(late, 40).unwrap();
    assert_eq!(granted, 40);
    assert_eq!(orders.first().map(|r| r.holder), Some(first), "{orders:?}");
}

#[test]
fn test_a_request_beyond_the_free_frames_is_granted_partially() {
    let mut p = pool(100, 100);
    let (a, _) = p.register(10).unwrap();
    assert_eq!(p.request(a, 200).unwrap().0, 90);
    assert_eq!(p.free(), 0);
    assert_eq!(p.request(a, 5).unwrap().0, 0);
    let s = p.stats(a).unwrap();
    assert_eq!((s.held, s.requested, s.granted), (100, 205, 90));
}

#[test]
fn test_passing_partition_burst_reclaims_the_excess_first_allocated_first() {
    let mut p = pool(100, 20);
    let (a, _) = p.register(10).unwrap();
    let (b, _) = p.register(10).unwrap();
    assert!(p.request(a, 15).unwrap().1.is_empty());
    // 15 + 15 above minimums > 20: 10 asked back, A's first (it came first).
    let (granted, orders) = p.request(b, 15).unwrap();
    assert_eq!(granted, 15);
    let asked: Vec<(HolderId, usize)> = orders.iter().map(|r| (r.holder, r.frames)).collect();
    assert_eq!(asked, vec![(a, 10)]);
    // Once A gives them back, nothing more is asked.
    p.returned(a, 10).unwrap();
    assert!(p.pending().is_empty() && p.balance().is_empty());
    assert_eq!(p.stats(a).unwrap().reclaimed, 10);
}

#[test]
fn test_fafr_takes_from_each_holder_in_registration_order_down_to_its_minimum() {
    let mut p = pool(100, 0);
    let (a, _) = p.register(5).unwrap();
    let (b, _) = p.register(5).unwrap();
    let (c, _) = p.register(5).unwrap();
    // Each request is balanced at once (burst 0), so grow with burst off first.
    p.burst = 100;
    for id in [a, b, c] {
        p.request(id, 10).unwrap();
    }
    p.burst = 15;
    let orders = p.balance();
    let asked: Vec<(HolderId, usize)> = orders.iter().map(|r| (r.holder, r.frames)).collect();
    assert_eq!(asked, vec![(a, 10), (b, 5)]);
    assert_eq!(p.balance(), Vec::new(), "asked once");
}

#[test]
fn test_a_holder_missing_its_deadline_is_reclaimed_by_force_and_reported() {
    let clock = ManualClock::at(0);
    let mut p = FrameManager::new(100, clock)
        .unwrap()
        .with_partition_burst(0)
        .with_deadline_ns(1_000);
    let (a, _) = p.register(10).unwrap();
    let (_, orders) = p.request(a, 30).unwrap();
    assert_eq!(orders[0].frames, 30);
    p.returned(a, 12).unwrap();
    assert!(p.overdue().is_empty(), "before the deadline");
    p.clock.advance(1_000);
    let forced = p.overdue();
    assert_eq!(forced.len(), 1);
    assert_eq!((forced[0].holder, forced[0].frames), (a, 18));
    let s = p.stats(a).unwrap();
    assert_eq!(
        (s.held, s.reclaimed, s.forced, s.forced_incidents),
        (10, 12, 18, 1)
    );
    assert_eq!(p.free(), 90);
}

#[test]
fn test_a_newcomer_short_of_its_minimum_gets_frames_as_the_others_give_them_back() {
    let mut p = pool(100, 100);
    let (a, _) = p.register(10).unwrap();
    p.request(a, 80).unwrap();
    let (b, orders) = p.register(30).unwrap();
    assert_eq!(p.stats(b).unwrap().held, 10);
    assert_eq!(orders.iter().map(|r| r.frames).sum::<usize>(), 20);
    p.returned(a, 20).unwrap();
    assert_eq!(p.stats(b).unwrap().held, 30);
    assert_eq!(p.unregister(a).unwrap(), 70);
    assert_eq!(p.free(), 70);
    assert_eq!(p.stats(a).unwrap_err(), FrameError::UnknownHolder(a));
}
