//! Fresh pages are free: a far dataspace records in the cluster which
//! windows were ever written, so a fault on a page of a window never
//! written is served as zeros with no round trip, in this process and in
//! any process that opens the dataspace after another wrote to it.

mod common;

use std::process::Command;
use std::sync::Arc;

use common::*;
use pagepilot_dataspace::{Access, DataspaceId, Manager};
use pagepilot_far::RedisManager;
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

const WINDOW: usize = 64;
const PAGES: usize = 4 * WINDOW;
/// The first page of the last window, the one the child writes (the
/// pager's zero clusters of a write stream are written back whole: a
/// stream written from window 1 on would mark window 2 written too).
const LAST: usize = PAGES - WINDOW;

/// The variable naming the dataspace the child writes the last window of.
const CHILD_NAME: &str = "PAGEPILOT_FAR_CHILD_NAME";

fn region(far: &Arc<RedisManager>, id: &DataspaceId) -> Region {
    let backing = Backing::Dataspaces(vec![Attachment::whole(far.clone(), id.clone())]);
    Region::map(RegionOptions::new(backing, PAGES * 4096, "clock")).unwrap()
}

/// Run by `test_a_process_opening_after_another_wrote_...` as its child:
/// writes the last window of the dataspace named in the environment
/// through a region of its own, flushed as it is unmapped.
#[test]
#[ignore = "the child of test_a_process_opening_after_another_wrote_reads_only_the_written_window, run by it"]
fn child_writes_the_last_window_through_a_region() {
    let name = std::env::var(CHILD_NAME).expect("run by the parent test");
    let far = Arc::new(cluster_manager());
    let id = DataspaceId::Name(name);
    let r = region(&far, &id);
    let data = random_pages(WINDOW, 21);
    // SAFETY: the last window lies inside the mapped region; nobody else
    // touches it.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), r.as_ptr().add(LAST * 4096), data.len())
    };
    r.unmap().unwrap();
}

#[test]
fn test_a_process_opening_after_another_wrote_reads_only_the_written_window() {
    let far = Arc::new(cluster_manager());
    let name = unique("fresh");
    let id = far
        .create(Some(name.as_ref()), (PAGES * 4096) as u64)
        .unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_writes_the_last_window_through_a_region",
            "--test-threads",
            "1",
        ])
        .env(CHILD_NAME, &name)
        // The same cluster, not one of the child's own.
        .env("PAGEPILOT_REDIS_CLUSTER", shared_cluster().join(","))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the child writing the last window: {status}"
    );

    let r = region(&far, &id);
    let base = r.as_ptr();
    // SAFETY: every offset read lies inside the mapped region.
    let byte = |page: usize| unsafe { base.add(page * 4096 + 7).read_volatile() };
    let before = far.round_trips();
    let data = random_pages(WINDOW, 21);
    let same = (0..WINDOW).all(|i| byte(LAST + i) == data[i * 4096 + 7]);
    assert!(same, "the child's window reads back as it wrote it");
    assert!(
        far.round_trips() - before >= 1,
        "the written window is read from the cluster"
    );
    // The others, with whatever read-ahead and read-around the defaults
    // choose: no page of them is asked of the cluster.
    let before = far.round_trips();
    let zeros = (0..LAST).all(|p| byte(p) == 0);
    assert!(zeros, "pages never written read as zero");
    assert_eq!(
        far.round_trips() - before,
        0,
        "three windows never written, read with no round trip"
    );
    let stats = r.stats();
    assert_eq!(stats.bytes_read, (WINDOW * 4096) as u64, "{stats:?}");
    r.unmap().unwrap();
    far.delete(&id).unwrap();
}

#[test]
fn test_a_window_is_marked_written_once_and_the_mark_goes_with_the_dataspace() {
    let far = cluster_manager();
    let name = unique("mark");
    let id = far
        .create(Some(name.as_ref()), (PAGES * 4096) as u64)
        .unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    assert!(!store.has_data(0) && !store.has_data(PAGES - 1));
    let trips = |f: &dyn Fn()| {
        let before = far.round_trips();
        f();
        far.round_trips() - before
    };
    let page = random_pages(1, 3);
    assert_eq!(trips(&|| write(store.as_ref(), 70, &page).unwrap()), 2);
    assert!(store.has_data(64) && store.has_data(127) && !store.has_data(128));
    assert_eq!(trips(&|| write(store.as_ref(), 71, &page).unwrap()), 1);
    assert_eq!(
        trips(&|| assert!(read(store.as_ref(), 0, 64).unwrap().iter().all(|&b| b == 0))),
        0
    );
    far.close(&id, store).unwrap();
    // Deleted, and made again under the same name: nothing written.
    far.delete(&id).unwrap();
    let id = far
        .create(Some(name.as_ref()), (PAGES * 4096) as u64)
        .unwrap();
    let store = far.open(&id, Access::ReadOnly, None).unwrap();
    assert!(
        !store.has_data(70),
        "the old mark went with the old dataspace"
    );
    far.close(&id, store).unwrap();
    far.delete(&id).unwrap();
}

#[test]
fn test_a_dataspace_made_before_windows_were_recorded_asks_for_every_page() {
    let server = Server::start();
    let far = server.manager(std::time::Duration::from_secs(1));
    let mut raw = server.raw();
    let page = random_pages(1, 9);
    let _: () = redis::Commands::set(
        &mut raw,
        "pp:{old}:meta",
        "pagepilot-far 1 len=8192 window=64",
    )
    .unwrap();
    let _: () = redis::Commands::set(&mut raw, "pp:{old:0}:1", &page[..]).unwrap();
    let id = DataspaceId::Name("old".into());
    let store = far.open(&id, Access::ReadOnly, None).unwrap();
    assert!(store.has_data(0) && store.has_data(1));
    let before = far.round_trips();
    let back = read(store.as_ref(), 0, 2).unwrap();
    assert_eq!(far.round_trips() - before, 1);
    assert!(back[..4096].iter().all(|&b| b == 0) && back[4096..] == page[..]);
    far.close(&id, store).unwrap();
}
