//! What the manager costs, counted rather than timed: the holders and
//! orders it looks at (`Steps`) must grow with the requests and orders, not
//! with requests times holders. The walk it replaced visited every holder
//! per reclamation and scanned every order per holder visited: the first
//! test's load made it look at some 10^10 entries (41 s of a daemon's loop).

use super::*;
use crate::ManualClock;

const HOLDERS: usize = 1_280;
const REQUESTS: usize = 5_460;

/// Holders and orders looked at so far.
fn steps<C: Clock>(p: &FrameManager<C>) -> u64 {
    p.steps.0
}

#[test]
fn test_one_frame_requests_against_many_small_holders_look_at_each_holder_a_bounded_number_of_times(
) {
    // 1,280 holders of one frame above their minimum, then 5,460 one-frame
    // requests, each passing partition_burst by one frame: FAFR asks the
    // small holders one by one, then the requester itself. Half the small
    // holders answer at once, the others are forced at their deadline, as
    // a daemon's loop would, asking for the next deadline and who is short
    // on every turn.
    let total = 2 * HOLDERS + 1 + REQUESTS;
    let mut p = FrameManager::new(total, ManualClock::at(0))
        .unwrap()
        .with_partition_burst(usize::MAX)
        .with_deadline_ns(1_000);
    let small: Vec<HolderId> = (0..HOLDERS)
        .map(|_| {
            let (id, _) = p.register(1).unwrap();
            assert_eq!(p.request(id, 1).unwrap().0, 1);
            id
        })
        .collect();
    let (big, _) = p.register(1).unwrap();
    p.set_partition_burst(HOLDERS);
    let start = steps(&p);
    let mut orders = 0;
    for i in 0..REQUESTS {
        let (granted, asked) = p.request(big, 1).unwrap();
        assert_eq!((granted, asked.len()), (1, 1), "request {i}");
        assert_eq!(asked[0].frames, 1);
        let expected = small.get(i).copied().unwrap_or(big);
        assert_eq!(asked[0].holder, expected, "FAFR order, request {i}");
        orders += asked.len();
        assert_eq!(p.next_deadline_ns(), Some(asked[0].deadline_ns));
        if i % 2 == 0 && asked[0].holder != big {
            p.returned(asked[0].holder, 1).unwrap();
        }
        if i % 100 == 99 {
            p.clock.advance(1_000);
            p.force_overdue();
        }
        assert_eq!(p.short_of_minimum().count(), 0);
    }
    let looked = steps(&p) - start;
    // One holder visited per order made, each order answered or forced
    // once: a small multiple of the requests. The old walk: requests times
    // holders, 7 million holder visits before counting the order scans.
    let bound = 4 * (REQUESTS + HOLDERS) as u64;
    assert_eq!(orders, REQUESTS);
    assert!(
        looked <= bound,
        "{looked} holders and orders looked at, bound {bound}"
    );
    assert!(p.holders.len() == HOLDERS + 1);
    p.holders.check();
}

#[test]
fn test_frames_coming_back_one_by_one_settle_owed_holders_without_walking_the_rest() {
    // A pool held whole by one holder; 1,280 newcomers each owed one frame;
    // frames come back one at a time, each settling the next newcomer.
    let mut p = FrameManager::new(HOLDERS * 2, ManualClock::at(0))
        .unwrap()
        .with_partition_burst(usize::MAX)
        .with_deadline_ns(1_000);
    let (a, _) = p.register(HOLDERS).unwrap();
    p.request(a, HOLDERS).unwrap();
    assert_eq!(p.free(), 0);
    let owed: Vec<HolderId> = (0..HOLDERS).map(|_| p.register(1).unwrap().0).collect();
    // A newcomer asks back only what the orders pending do not cover: the
    // first asked one frame; a balance asks the rest, one order.
    assert_eq!(p.asked_of(a), 1);
    p.set_partition_burst(0);
    assert_eq!(p.balance().len(), 1);
    assert_eq!(p.asked_of(a), HOLDERS);
    let start = steps(&p);
    for (i, &id) in owed.iter().enumerate() {
        assert_eq!(p.short_of_minimum().next(), Some((id, 0)));
        p.returned(a, 1).unwrap();
        assert_eq!(p.stats(id).unwrap().held, 1, "newcomer {i} settled");
    }
    let looked = steps(&p) - start;
    // Per frame back: at most two orders looked at, one holder settled.
    let bound = 4 * HOLDERS as u64;
    assert!(looked <= bound, "{looked} looked at, bound {bound}");
    assert_eq!(
        (p.free(), p.asked_of(a), p.next_deadline_ns()),
        (0, 0, None)
    );
}

#[test]
fn test_holders_leaving_with_orders_pending_cost_their_own_orders_only() {
    let mut p = FrameManager::new(4 * HOLDERS, ManualClock::at(0))
        .unwrap()
        .with_partition_burst(0)
        .with_deadline_ns(1_000);
    let ids: Vec<HolderId> = (0..HOLDERS)
        .map(|_| {
            let (id, _) = p.register(1).unwrap();
            p.request(id, 2).unwrap();
            id
        })
        .collect();
    assert_eq!(p.pending().len(), HOLDERS);
    let start = steps(&p);
    for id in ids {
        assert_eq!(p.unregister(id).unwrap(), 3);
    }
    let looked = steps(&p) - start;
    assert!(looked <= 2 * HOLDERS as u64, "{looked} looked at");
    assert_eq!((p.next_deadline_ns(), p.free()), (None, 4 * HOLDERS));
}

#[test]
fn test_a_holder_answering_many_orders_a_frame_at_a_time_looks_at_each_order_once() {
    let mut p = FrameManager::new(REQUESTS, ManualClock::at(0))
        .unwrap()
        .with_partition_burst(0)
        .with_deadline_ns(1_000);
    let (a, _) = p.register(0).unwrap();
    for _ in 0..REQUESTS {
        assert_eq!(p.request(a, 1).unwrap().1.len(), 1);
    }
    assert_eq!(p.asked_of(a), REQUESTS);
    let start = steps(&p);
    for _ in 0..REQUESTS {
        p.returned(a, 1).unwrap();
    }
    let looked = steps(&p) - start;
    assert!(looked <= 2 * REQUESTS as u64, "{looked} looked at");
    assert_eq!((p.asked_of(a), p.next_deadline_ns()), (0, None));
}
