//! Durability at failover: windows of a far dataspace written back (each
//! write acknowledged), then the primary that holds them SIGKILLed at once
//! and its replica promoted. A dataspace made with a replica wait loses
//! none of them; one without may lose the last ones, which the replica had
//! not received yet (counted and printed: the loss window, measured in
//! docs/far-memory.md). The cluster is 1 ms away, as over a network, so
//! that replication takes the time it would there.

mod common;

use std::time::Duration;

use common::*;
use pagepilot_dataspace::{Access, DataspaceId, Manager};
use pagepilot_far::{RedisConfig, RedisManager};

const WINDOW: usize = 64;
const WINDOWS: usize = 24;

/// Writes every window of a new dataspace held by one primary, kills that
/// primary right after the last write is acknowledged, and reads them back
/// once its replica took over: (windows written, windows that came back
/// different).
fn acknowledged_then_killed(waited: bool) -> (usize, usize) {
    let cluster = Cluster::start_with_rtt(1, Duration::from_millis(1));
    let far = RedisManager::new(RedisConfig::cluster(&cluster.seeds)).unwrap();
    let name = unique(if waited { "waited" } else { "unwaited" });
    let len = (WINDOWS * WINDOW * 4096) as u64;
    let id = if waited {
        far.create_with_replica_wait(&name, len, 1, Duration::from_millis(500))
            .unwrap()
    } else {
        far.create(Some(name.as_ref()), len).unwrap()
    };
    let victim = cluster.primary_of(&far.page_key(&name, 0));
    let held: Vec<usize> = (0..WINDOWS)
        .filter(|w| cluster.primary_of(&far.page_key(&name, w * WINDOW)) == victim)
        .collect();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let data = |w: usize| random_pages(WINDOW, 1000 + w as u64);
    for &w in &held {
        write(store.as_ref(), w * WINDOW, &data(w)).unwrap();
    }
    cluster.kill(victim);
    let lost = held
        .iter()
        .filter(|&&w| read(store.as_ref(), w * WINDOW, WINDOW).unwrap() != data(w))
        .count();
    assert_ne!(
        cluster.primary_of(&far.page_key(&name, 0)),
        victim,
        "the replica was not promoted"
    );
    far.close(&id, store).unwrap();
    let DataspaceId::Name(_) = id else {
        unreachable!()
    };
    (held.len(), lost)
}

#[test]
fn test_write_backs_waited_for_a_replica_all_survive_their_primary_killed_right_after() {
    let (written, lost) = acknowledged_then_killed(true);
    println!("replica wait: {lost} of {written} acknowledged windows lost");
    assert!(written > 0, "no window on the first window's primary");
    assert_eq!(lost, 0, "acknowledged write-backs lost at failover");
    let (written, lost) = acknowledged_then_killed(false);
    // Measured, not asserted: how many acknowledged windows the replica
    // lacked when its primary died (docs/far-memory.md).
    println!("no replica wait: {lost} of {written} acknowledged windows lost");
}
