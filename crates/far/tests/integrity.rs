//! A pager region on far memory under concurrency: two threads doing a
//! million random reads and writes over a region four times its budget,
//! checked against a shadow copy, the dataspace holding exactly the shadow
//! after unmap; the same with a primary of the cluster SIGKILLed mid-run
//! (its replica promoted), write-backs waiting for a replica; and without a replica, a dead server reported:
//! flush fails and the pages stay dirty in memory (written once the server
//! is back), a fault on a page not in memory gets SIGBUS.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hammer::*;
use common::*;
use pagepilot_dataspace::{Access, DataspaceId, Manager};
use pagepilot_far::{RedisConfig, RedisManager};
use pagepilot_pager::{Attachment, Backing, FlushError, Region, RegionOptions};

const PAGES: usize = 1024;
const LEN: usize = PAGES * 4096;

/// A far dataspace of `PAGES` random pages: its id and contents.
fn seeded(far: &RedisManager, tag: &str) -> (DataspaceId, Vec<u8>) {
    let id = far.create(Some(unique(tag).as_ref()), LEN as u64).unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let data = random_pages(PAGES, 17);
    write(store.as_ref(), 0, &data).unwrap();
    far.close(&id, store).unwrap();
    (id, data)
}

fn region(far: &Arc<RedisManager>, id: &DataspaceId, budget: usize) -> Region {
    let backing = Backing::Dataspaces(vec![Attachment::whole(far.clone(), id.clone())]);
    Region::map(RegionOptions::new(backing, budget, "clock")).unwrap()
}

/// The dataspace's bytes, read through a store of its own.
fn contents(far: &RedisManager, id: &DataspaceId, pages: usize) -> Vec<u8> {
    let store = far.open(id, Access::ReadOnly, None).unwrap();
    let back = read(store.as_ref(), 0, pages).unwrap();
    far.close(id, store).unwrap();
    back
}

/// Hammers a region of `id` under a quarter of its size with `ops` random
/// accesses while `beside` runs; asserts no read disagreed and that after
/// unmap the dataspace holds the shadow.
fn hammer_far(
    far: &Arc<RedisManager>,
    id: &DataspaceId,
    data: &[u8],
    ops: usize,
    beside: impl FnOnce(&AtomicBool) + Send,
) {
    let shadow = shadow_of(data);
    let region = region(far, id, LEN / 4);
    let done = AtomicBool::new(false);
    let bad = std::thread::scope(|s| {
        s.spawn(|| beside(&done));
        let bad = hammer(region.as_ptr(), LEN, &shadow, 2, ops);
        done.store(true, Ordering::SeqCst);
        bad
    });
    let stats = region.stats();
    println!("{}", region.stats_json());
    assert_eq!(
        bad, 0,
        "reads that disagreed with the shadow copy: {stats:?}"
    );
    assert!(stats.evictions > 500 && stats.writebacks > 100, "{stats:?}");
    region.unmap().unwrap();
    let back = contents(far, id, PAGES);
    assert_eq!(
        diff(&back, &image(&shadow, data)),
        0,
        "bytes of the dataspace differing from the shadow"
    );
}

#[test]
fn test_cluster_region_two_threads_million_ops_match_shadow_and_dataspace() {
    let far = Arc::new(cluster_manager());
    let (id, data) = seeded(&far, "integrity");
    let t = Instant::now();
    hammer_far(&far, &id, &data, 1_000_000, |_| {});
    println!(
        "{:?}, {} round trips, {} retries",
        t.elapsed(),
        far.round_trips(),
        far.retries()
    );
    far.delete(&id).unwrap();
}

/// Write-backs wait for a replica (`WAIT 1`): each primary has two, so the
/// promoted one still has a replica to wait for. Without the wait, a
/// write-back the primary acknowledged but had not yet sent to its replica
/// is lost at the failover, and reads of it disagree with the shadow.
#[test]
fn test_cluster_region_waiting_for_a_replica_survives_a_primary_killed_mid_run() {
    let cluster = Cluster::start(2);
    let config =
        RedisConfig::cluster(&cluster.seeds).with_replica_wait(1, Duration::from_millis(500));
    let far = Arc::new(RedisManager::new(config).unwrap());
    let (id, data) = seeded(&far, "failover");
    let DataspaceId::Name(name) = &id else {
        unreachable!()
    };
    // The primary of the dataspace's first window.
    let victim = cluster.primary_of(&far.page_key(name, 0));
    let killed_mid_run = AtomicBool::new(false);
    let start = far.round_trips();
    hammer_far(&far, &id, &data, 600_000, |done| {
        while !done.load(Ordering::SeqCst) {
            if far.round_trips() > start + 500 {
                cluster.kill(victim);
                killed_mid_run.store(!done.load(Ordering::SeqCst), Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    assert!(
        killed_mid_run.load(Ordering::SeqCst),
        "the primary was not killed while the threads ran"
    );
    assert!(far.retries() > 0, "no request met the dead primary");
    assert_ne!(
        cluster.primary_of(&far.page_key(name, 0)),
        victim,
        "its replica was not promoted"
    );
    println!(
        "{} round trips, {} retries",
        far.round_trips(),
        far.retries()
    );
}

#[test]
fn test_without_a_replica_a_dead_server_fails_flush_and_keeps_the_pages_dirty() {
    let mut server = Server::start();
    let port = server.port;
    let far = Arc::new(server.manager(Duration::from_millis(300)));
    let id = far.create(Some("dirty".as_ref()), 64 * 4096).unwrap();
    // The whole dataspace fits the budget: nothing is written back before the flush.
    let region = region(&far, &id, 64 * 4096);
    let data = random_pages(64, 23);
    // SAFETY: the region is mapped for 64 pages and only this thread touches it.
    let mem = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), 64 * 4096) };
    mem.copy_from_slice(&data);
    server.kill();
    let t = Instant::now();
    let e = region.flush().unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    match &e {
        FlushError::WriteBack { pages } => assert_eq!(pages.len(), 64, "{e}"),
        other => panic!("{other}"),
    }
    assert!(
        mem == &data[..],
        "the region's memory must still hold the data"
    );
    // The server is back (empty: no persistence): the same flush writes them all.
    let _server = Server::start_on(port);
    region.flush().unwrap();
    far.create(Some("dirty".as_ref()), 64 * 4096).unwrap();
    assert!(
        contents(&far, &id, 64) == data,
        "the pages that failed were written at the next flush"
    );
    region.unmap().unwrap();
}

#[test]
fn test_without_a_replica_a_fault_the_dead_server_cannot_serve_gets_sigbus() {
    const TEST: &str = "test_without_a_replica_a_fault_the_dead_server_cannot_serve_gets_sigbus";
    let out = in_child_process(TEST, Duration::from_secs(30), || {
        let mut server = Server::start();
        let far = Arc::new(server.manager(Duration::from_millis(300)));
        let id = far.create(Some("gone".as_ref()), 64 * 4096).unwrap();
        // Page 40 holds data (a page never written would read as zero
        // without asking the server).
        let store = far.open(&id, Access::ReadWrite, None).unwrap();
        write(store.as_ref(), 40, &random_pages(1, 40)).unwrap();
        far.close(&id, store).unwrap();
        let region = region(&far, &id, 8 * 4096);
        // SAFETY: page 0 of the mapped region.
        let first = unsafe { region.as_ptr().read_volatile() };
        println!("page 0 read: {first}");
        server.kill();
        // SAFETY: page 40 of the mapped region, not in memory: its read fails.
        let v = unsafe { region.as_ptr().add(40 * 4096).read_volatile() };
        println!("page 40 read: {v}");
    });
    assert!(out.stdout.contains("page 0 read: 0"), "{out:?}");
    assert!(
        !out.stdout.contains("page 40 read"),
        "a page the server could not serve was read: {out:?}"
    );
    assert_eq!(out.signal(), Some(libc::SIGBUS), "{out:?}");
}
