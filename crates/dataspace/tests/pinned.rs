//! The pinned manager (SawMill, Figure 6): a dataspace moved to it is
//! served pinned with its contents; its quota refuses what it cannot take
//! before the dataspace leaves its manager; moving a dataspace out unpins
//! it and gives the quota back; a test per operation.

mod common;

use common::{read, write, Layer};
use pagepilot_dataspace::{
    Access, AnonymousManager, CreateError, DataspaceId, DeleteError, Flavour, Manager, OpenError,
    Operation, PinnedManager, TransferError, PAGE,
};

/// An anonymous dataspace of `pages` pages, page `i` filled with `i + 1`.
fn numbered(anon: &AnonymousManager, pages: usize) -> DataspaceId {
    let id = anon.create(None, (pages * PAGE) as u64).unwrap();
    let store = anon.open(&id, Access::ReadWrite, None).unwrap();
    for p in 0..pages {
        write(store.as_ref(), p, 1, p as u8 + 1);
    }
    anon.close(&id, store).unwrap();
    id
}

#[test]
fn test_transferred_dataspace_is_served_pinned_with_its_contents() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(16 * PAGE as u64);
    let id = numbered(&anon, 4);
    let on_pinned = anon.transfer(&id, &pinned).unwrap();
    assert_eq!(
        pinned.stack(&on_pinned).unwrap(),
        vec![anon.key(), pinned.key()]
    );
    assert_eq!(pinned.identify(&on_pinned).unwrap().len, 4 * PAGE as u64);
    assert_eq!(pinned.pinned_bytes(), 4 * PAGE as u64);
    let store = pinned.open(&on_pinned, Access::ReadWrite, None).unwrap();
    assert!(store.pinned());
    assert_eq!(read(store.as_ref(), 2, 1).1[0], 3);
    write(store.as_ref(), 0, 1, 0xee);
    pinned.close(&on_pinned, store).unwrap();
    let store = pinned.open(&on_pinned, Access::ReadWrite, None).unwrap();
    assert_eq!(read(store.as_ref(), 0, 1).1[0], 0xee, "kept across close");
    // The anonymous manager no longer serves it.
    assert!(anon.open(&id, Access::ReadWrite, None).is_err());
}

#[test]
fn test_transfer_beyond_the_quota_is_refused_and_the_dataspace_stays_with_its_manager() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(6 * PAGE as u64);
    let small = numbered(&anon, 4);
    let big = numbered(&anon, 3);
    pinned_ok(anon.transfer(&small, &pinned));
    let e = anon.transfer(&big, &pinned).unwrap_err();
    match &e {
        TransferError::Quota {
            asked, left, quota, ..
        } => {
            assert_eq!((*asked, *left, *quota), (3 * 4096, 2 * 4096, 6 * 4096));
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("12288 bytes asked") && msg.contains("8192 of its quota of 24576"),
        "{msg}"
    );
    // Nothing lost: the refused dataspace is still the anonymous manager's.
    let store = anon.open(&big, Access::ReadWrite, None).unwrap();
    assert_eq!(read(store.as_ref(), 2, 1).1[0], 3);
    anon.close(&big, store).unwrap();
    assert_eq!(pinned.pinned_bytes(), 4 * PAGE as u64);
}

fn pinned_ok(r: Result<DataspaceId, TransferError>) -> DataspaceId {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn test_quota_counts_whole_pages() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(PAGE as u64);
    let a = anon.create(None, 10).unwrap();
    let b = anon.create(None, 10).unwrap();
    pinned_ok(anon.transfer(&a, &pinned));
    assert_eq!(pinned.pinned_bytes(), PAGE as u64);
    assert!(matches!(
        anon.transfer(&b, &pinned),
        Err(TransferError::Quota { .. })
    ));
}

#[test]
fn test_transferring_out_unpins_and_gives_the_quota_back() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(4 * PAGE as u64);
    let id = numbered(&anon, 4);
    let on_pinned = pinned_ok(anon.transfer(&id, &pinned));
    let layer = Layer::new();
    let out = pinned.transfer(&on_pinned, &layer).unwrap();
    assert_eq!(pinned.pinned_bytes(), 0);
    assert!(
        pinned.identify(&on_pinned).is_err(),
        "no longer the pinned manager's"
    );
    // Unpinned, the same pages; the pinned manager left the stack.
    let store = layer.open(&out, Access::ReadWrite, None).unwrap();
    assert!(!store.pinned());
    assert_eq!(read(store.as_ref(), 3, 1).1[0], 4);
    assert_eq!(layer.stack(&out).unwrap(), vec![anon.key(), layer.key()]);
    drop(store);
    // Another anonymous manager (SawMill's swappable one) takes it too.
    let other = AnonymousManager::new(dir.path());
    let id2 = numbered(&anon, 4);
    let p2 = pinned_ok(anon.transfer(&id2, &pinned));
    let back = pinned.transfer(&p2, &other).unwrap();
    let store = other.open(&back, Access::ReadWrite, None).unwrap();
    assert!(!store.pinned());
    assert_eq!(read(store.as_ref(), 1, 1).1[0], 2);
    assert_eq!(pinned.pinned_bytes(), 0);
}

#[test]
fn test_moving_back_to_the_manager_it_came_from_unpins_and_keeps_the_pages() {
    // SawMill, Figure 6: anonymous -> pinned is pinning, pinned ->
    // anonymous unpinning.
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(4 * PAGE as u64);
    let id = numbered(&anon, 2);
    let on_pinned = pinned_ok(anon.transfer(&id, &pinned));
    let back = pinned.transfer(&on_pinned, &anon).unwrap();
    assert_eq!(pinned.pinned_bytes(), 0);
    assert_eq!(
        anon.stack(&back).unwrap(),
        vec![anon.key()],
        "its own again"
    );
    let store = anon.open(&back, Access::ReadWrite, None).unwrap();
    assert!(!store.pinned());
    assert_eq!(read(store.as_ref(), 1, 1).1[0], 2);
    anon.close(&back, store).unwrap();
    // And pinned again: the round trip can repeat.
    let again = pinned_ok(anon.transfer(&back, &pinned));
    assert_eq!(pinned.pinned_bytes(), 2 * PAGE as u64);
    assert!(pinned
        .open(&again, Access::ReadWrite, None)
        .unwrap()
        .pinned());
}

#[test]
fn test_handing_back_to_a_manager_further_down_is_refused_as_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(4 * PAGE as u64);
    let layer = common::Layer::new();
    let id = numbered(&anon, 1);
    let on_layer = anon.transfer(&id, &layer).unwrap();
    let on_pinned = pinned_ok(layer.transfer(&on_layer, &pinned));
    // Below the pinned one: the layer, then the anonymous manager.
    let e = pinned.transfer(&on_pinned, &anon).unwrap_err();
    assert!(matches!(e, TransferError::Cycle { .. }), "{e}");
    assert!(pinned.pinned_bytes() > 0, "still pinned");
    assert!(pinned.open(&on_pinned, Access::ReadWrite, None).is_ok());
}

#[test]
fn test_open_is_exclusive_read_write_and_delete_releases_the_quota() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(8 * PAGE as u64);
    let id = pinned_ok(anon.transfer(&numbered(&anon, 2), &pinned));
    let store = pinned.open(&id, Access::ReadWrite, None).unwrap();
    assert!(matches!(
        pinned.open(&id, Access::ReadWrite, None),
        Err(OpenError::Busy(_))
    ));
    assert!(matches!(pinned.delete(&id), Err(DeleteError::Open(_))));
    assert!(matches!(
        pinned.transfer(&id, &Layer::new()),
        Err(TransferError::Open { .. })
    ));
    pinned.close(&id, store).unwrap();
    let e = pinned.open(&id, Access::ReadOnly, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the pinned manager does not support Open ReadOnly"
    );
    let e = pinned
        .open(&id, Access::ReadWrite, Some(3 * PAGE as u64))
        .unwrap_err();
    assert!(matches!(e, OpenError::Short { .. }), "{e}");
    pinned.delete(&id).unwrap();
    assert_eq!(pinned.pinned_bytes(), 0);
    assert!(matches!(pinned.delete(&id), Err(DeleteError::NoSuch(_))));
}

#[test]
fn test_a_store_dropped_open_takes_its_dataspace_and_its_quota() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let pinned = PinnedManager::new(8 * PAGE as u64);
    let id = pinned_ok(anon.transfer(&numbered(&anon, 2), &pinned));
    drop(pinned.open(&id, Access::ReadWrite, None).unwrap());
    assert_eq!(pinned.pinned_bytes(), 0);
    assert!(pinned.identify(&id).is_err());
}

#[test]
fn test_create_share_and_copy_are_unsupported_and_flavours_say_pinned() {
    let pinned = PinnedManager::new(PAGE as u64);
    let caps = pinned.interrogate();
    assert!(caps.offers(Flavour::Pinned) && caps.offers(Flavour::Stacked));
    let e = pinned.create(None, PAGE as u64).unwrap_err();
    assert!(matches!(e, CreateError::Unsupported(u) if u.operation == Operation::Create));
    for op in [Operation::Create, Operation::Share, Operation::Copy] {
        assert!(!caps.supports(op), "{op}");
    }
}
