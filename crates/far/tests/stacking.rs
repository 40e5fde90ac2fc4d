//! Stacking over far memory (SawMill, Figure 5): a dataspace on the Redis
//! Cluster transferred to the compressed manager, which keeps pages
//! compressed in memory under a budget of its own and evicts to far
//! memory; a region over the stack hammered against a shadow copy, far
//! memory holding exactly the shadow after unmap. And the stack's limits:
//! handing it back to the far manager is a cycle.

mod common;

use std::sync::Arc;

use common::hammer::*;
use common::*;
use pagepilot_dataspace::{
    Access, CompressedManager, DataspaceId, LazyCopyManager, Manager, TransferError,
};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

const PAGES: usize = 1024;
const LEN: usize = PAGES * 4096;

#[test]
fn test_compressed_over_far_memory_hammered_ends_with_far_memory_equal_to_the_shadow() {
    let far = Arc::new(cluster_manager());
    let on_far = far
        .create(Some(unique("stacked").as_ref()), LEN as u64)
        .unwrap();
    let data = random_pages(PAGES, 29);
    let store = far.open(&on_far, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 0, &data).unwrap();
    far.close(&on_far, store).unwrap();

    // Region budget a quarter of the data; the compressed tier an eighth
    // (random pages do not compress: the tier holds them raw).
    let compressed = Arc::new(CompressedManager::new(LEN / 8));
    let id = far.transfer(&on_far, compressed.as_ref()).unwrap();
    assert_eq!(
        compressed.stack(&id).unwrap(),
        vec![far.key(), compressed.key()],
        "compressed over far memory"
    );
    let round_trips = far.round_trips();
    let shadow = shadow_of(&data);
    let backing = Backing::Dataspaces(vec![Attachment::whole(compressed.clone(), id.clone())]);
    let region = Region::map(RegionOptions::new(backing, LEN / 4, "clock")).unwrap();
    let bad = hammer(region.as_ptr(), LEN, &shadow, 2, 200_000);
    assert_eq!(bad, 0, "reads that disagreed with the shadow copy");
    let stats = compressed.stats(&id).unwrap();
    assert!(
        stats.evictions_to_lower > 0 && stats.reads_from_tier > 0,
        "{stats:?}"
    );
    assert!(far.round_trips() > round_trips, "far memory was used");
    region.unmap().unwrap();

    // Unmapping synced the tier down: far memory holds the shadow. (The
    // dataspace is the compressed manager's now; read far memory directly
    // by a manager of its own on the same cluster.)
    let name = match &on_far {
        DataspaceId::Name(n) => n.clone(),
        other => panic!("{other:?}"),
    };
    let reader = cluster_manager();
    let direct = DataspaceId::Name(name);
    let store = reader.open(&direct, Access::ReadOnly, None).unwrap();
    let back = read(store.as_ref(), 0, PAGES).unwrap();
    reader.close(&direct, store).unwrap();
    assert_eq!(
        diff(&back, &image(&shadow, &data)),
        0,
        "far memory differs from the shadow"
    );
    compressed.delete(&id).unwrap();
    reader.delete(&direct).unwrap();
}

#[test]
fn test_far_memory_under_compression_and_a_lazy_copy_refuses_to_go_back_to_far_memory() {
    let far = Arc::new(cluster_manager());
    let on_far = far
        .create(Some(unique("cycle").as_ref()), 4 * 4096)
        .unwrap();
    let compressed = CompressedManager::new(1 << 20);
    let dir = tempfile::tempdir().unwrap();
    let lazy = LazyCopyManager::new(dir.path());
    let id = far.transfer(&on_far, &compressed).unwrap();
    let id = compressed.transfer(&id, &lazy).unwrap();
    match lazy.transfer(&id, far.as_ref()) {
        Err(TransferError::Unsupported(u)) => assert_eq!(u.manager, far.name()),
        Err(TransferError::Cycle { to, .. }) => assert_eq!(to, far.key()),
        other => panic!("{other:?}"),
    }
    match lazy.transfer(&id, &compressed) {
        Err(TransferError::Cycle { to, stack, .. }) => {
            assert_eq!(to, compressed.key());
            assert_eq!(stack, vec![far.key(), compressed.key(), lazy.key()]);
        }
        other => panic!("{other:?}"),
    }
}
