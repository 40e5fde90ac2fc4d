//! Pages through the far manager's store, on one server and on the shared
//! Redis Cluster: written and read back byte for byte, never-written pages
//! zero, a window one round trip (one MGET), a run of writes one MSET per
//! window, the naive mode one round trip per page, several threads at once.

mod common;

use std::time::Duration;

use common::*;
use pagepilot_dataspace::{Access, Manager, PageStore};
use pagepilot_far::{Batching, RedisConfig, RedisManager};

fn round_trip_bytes(far: &RedisManager, name: &str) {
    // 300 pages and 100 bytes: a partial last page, several windows.
    let len = 300 * 4096 + 100;
    let id = far.create(Some(name.as_ref()), len).unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let data = random_pages(301, 11);
    write(store.as_ref(), 0, &data).unwrap();
    let back = read(store.as_ref(), 0, 301).unwrap();
    assert!(back[..len as usize] == data[..len as usize], "pages differ");
    assert!(
        back[len as usize..].iter().all(|&b| b == 0),
        "bytes beyond the end must read as zero"
    );
    // Unaligned runs, overwritten and read again, in a store opened anew.
    let patch = random_pages(70, 12);
    write(store.as_ref(), 33, &patch).unwrap();
    far.close(&id, store).unwrap();
    let store = far.open(&id, Access::ReadOnly, None).unwrap();
    assert!(read(store.as_ref(), 33, 70).unwrap() == patch);
    assert!(read(store.as_ref(), 0, 33).unwrap() == data[..33 * 4096]);
    // Reads past the end stop there.
    assert_eq!(read(store.as_ref(), 299, 10).unwrap().len(), 2 * 4096);
    assert_eq!(read(store.as_ref(), 301, 1).unwrap().len(), 0);
    far.close(&id, store).unwrap();
    far.delete(&id).unwrap();
}

#[test]
fn test_pages_written_read_back_byte_for_byte_on_one_server() {
    let server = Server::start();
    round_trip_bytes(&server.manager(Duration::from_secs(1)), "bytes");
}

#[test]
fn test_pages_written_read_back_byte_for_byte_on_the_cluster() {
    round_trip_bytes(&cluster_manager(), &unique("bytes"));
}

#[test]
fn test_pages_never_written_read_as_zero() {
    let far = cluster_manager();
    let id = far
        .create(Some(unique("zero").as_ref()), 200 * 4096)
        .unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 100, &random_pages(1, 4)).unwrap();
    let back = read(store.as_ref(), 0, 200).unwrap();
    assert!(back[..100 * 4096]
        .iter()
        .chain(&back[101 * 4096..])
        .all(|&b| b == 0));
    far.close(&id, store).unwrap();
    far.delete(&id).unwrap();
}

#[test]
fn test_a_window_is_read_and_written_in_one_round_trip_on_the_cluster() {
    let far = cluster_manager();
    let id = far
        .create(Some(unique("window").as_ref()), 256 * 4096)
        .unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let trips = |f: &dyn Fn()| {
        let before = far.round_trips();
        f();
        far.round_trips() - before
    };
    let data = random_pages(64, 5);
    assert_eq!(
        trips(&|| write(store.as_ref(), 64, &data).unwrap()),
        2,
        "a window first written: marked written, then one MSET"
    );
    assert_eq!(
        trips(&|| write(store.as_ref(), 64, &data).unwrap()),
        1,
        "64 aligned pages: one MSET"
    );
    assert_eq!(
        trips(&|| assert!(read(store.as_ref(), 64, 64).unwrap() == data)),
        1,
        "one MGET"
    );
    let rest = random_pages(256, 7);
    write(store.as_ref(), 0, &rest[..64 * 4096]).unwrap();
    write(store.as_ref(), 128, &rest[128 * 4096..]).unwrap();
    assert_eq!(
        trips(&|| drop(read(store.as_ref(), 0, 256).unwrap())),
        4,
        "four windows, four nodes' MGETs"
    );
    assert_eq!(
        trips(&|| drop(read(store.as_ref(), 60, 8).unwrap())),
        2,
        "straddling two windows"
    );
    assert_eq!(far.retries(), 0);
    far.close(&id, store).unwrap();
    far.delete(&id).unwrap();
}

#[test]
fn test_one_server_reads_every_window_of_a_call_in_one_pipeline() {
    let server = Server::start();
    let far = server.manager(Duration::from_secs(1));
    let id = far.create(Some("pipe".as_ref()), 256 * 4096).unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let data = random_pages(256, 6);
    let before = far.round_trips();
    write(store.as_ref(), 0, &data).unwrap();
    assert!(read(store.as_ref(), 0, 256).unwrap() == data);
    // The four windows marked written in one request, then one pipeline
    // each way.
    assert_eq!(far.round_trips() - before, 3);
}

#[test]
fn test_the_naive_mode_costs_a_round_trip_per_page_and_reads_the_same_pages() {
    let seeds = shared_cluster();
    let batched = cluster_manager();
    let naive =
        RedisManager::new(RedisConfig::cluster(&seeds).with_batching(Batching::PerPage)).unwrap();
    let id = batched
        .create(Some(unique("naive").as_ref()), 100 * 4096)
        .unwrap();
    let data = random_pages(100, 8);
    let s = batched.open(&id, Access::ReadWrite, None).unwrap();
    write(s.as_ref(), 0, &data).unwrap();
    let n = naive.open(&id, Access::ReadWrite, None).unwrap();
    let before = naive.round_trips();
    assert!(read(n.as_ref(), 0, 100).unwrap() == data);
    assert_eq!(naive.round_trips() - before, 100);
    let before = naive.round_trips();
    write(n.as_ref(), 10, &data[..5 * 4096]).unwrap();
    assert_eq!(naive.round_trips() - before, 5);
    assert!(read(s.as_ref(), 10, 5).unwrap() == data[..5 * 4096]);
    batched.close(&id, s).unwrap();
    naive.close(&id, n).unwrap();
    batched.delete(&id).unwrap();
}

#[test]
fn test_threads_share_the_pool_and_each_sees_its_own_pages() {
    // Two connections for eight threads: they wait for one, never mix replies.
    let far =
        RedisManager::new(RedisConfig::cluster(&shared_cluster()).with_connections(2)).unwrap();
    let id = far
        .create(Some(unique("threads").as_ref()), 8 * 128 * 4096)
        .unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let store: &dyn PageStore = store.as_ref();
            s.spawn(move || {
                let data = random_pages(128, t as u64 + 20);
                for _ in 0..5 {
                    write(store, t * 128, &data).unwrap();
                    assert!(read(store, t * 128, 128).unwrap() == data, "thread {t}");
                }
            });
        }
    });
    far.close(&id, store).unwrap();
    far.delete(&id).unwrap();
}
