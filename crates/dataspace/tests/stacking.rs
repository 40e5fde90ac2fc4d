//! Stacking by `transfer`: a dataspace handed to a manager that takes it
//! keeps its contents and is served by the new manager; a stack deeper
//! than `MAX_STACK_DEPTH` and a cycle are refused with errors naming them.

mod common;

use common::{read, write, Layer};
use pagepilot_dataspace::{
    Access, AnonymousManager, DataspaceId, FileManager, Flavour, Manager, Operation, TransferError,
    MAX_STACK_DEPTH,
};

#[test]
fn test_transferred_dataspace_keeps_its_contents_under_the_new_manager() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let id = anon.create(None, 8 * 4096).unwrap();
    let store = anon.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 3, 2, 0x5a);
    anon.close(&id, store).unwrap();

    let layer = Layer::new();
    let moved = anon.transfer(&id, &layer).unwrap();
    let store = layer.open(&moved, Access::ReadWrite, None).unwrap();
    let (got, bytes) = read(store.as_ref(), 3, 2);
    assert_eq!(got, 2);
    assert!(bytes.iter().all(|&b| b == 0x5a));
    assert_eq!(
        layer.stack(&moved).unwrap(),
        vec![anon.key(), layer.key()],
        "bottom first"
    );
    // The anonymous manager no longer serves it.
    assert!(anon.open(&id, Access::ReadWrite, None).is_err());
}

#[test]
fn test_stack_of_max_depth_is_built_and_one_more_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base");
    common::numbered_file(&path, 4);
    let layers: Vec<Layer> = (0..MAX_STACK_DEPTH).map(|_| Layer::new()).collect();
    let mut id = DataspaceId::Path(path);
    let mut from: &dyn Manager = &FileManager;
    for layer in &layers[..MAX_STACK_DEPTH - 1] {
        id = from.transfer(&id, layer).unwrap();
        from = layer;
    }
    assert_eq!(from.stack(&id).unwrap().len(), MAX_STACK_DEPTH);
    let store = from.open(&id, Access::ReadOnly, None).unwrap();
    assert_eq!(
        read(store.as_ref(), 2, 1).1[0],
        3,
        "page 2 of the file, 8 managers up"
    );

    let err = from
        .transfer(&id, &layers[MAX_STACK_DEPTH - 1])
        .unwrap_err();
    assert!(
        matches!(err, TransferError::TooDeep { depth, .. } if depth == MAX_STACK_DEPTH + 1),
        "{err:?}"
    );
    assert!(err.to_string().contains("at most 8"), "{err}");
}

#[test]
fn test_transfer_back_to_a_manager_in_the_stack_is_refused_as_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let (a, b) = (Layer::new(), Layer::new());
    let id = anon.create(None, 4096).unwrap();
    let on_a = anon.transfer(&id, &a).unwrap();
    let on_b = a.transfer(&on_a, &b).unwrap();
    let err = b.transfer(&on_b, &a).unwrap_err();
    match &err {
        TransferError::Cycle { to, stack, .. } => {
            assert_eq!(*to, a.key());
            assert_eq!(stack, &vec![anon.key(), a.key(), b.key()]);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("already stacked"), "{err}");
}

#[test]
fn test_transfer_to_a_manager_that_takes_no_dataspaces_is_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let other = FileManager;
    assert!(!other.interrogate().offers(Flavour::Stacked));
    let id = anon.create(None, 4096).unwrap();
    match anon.transfer(&id, &other).unwrap_err() {
        TransferError::Unsupported(u) => {
            assert_eq!((u.manager, u.operation), ("file", Operation::Transfer));
            assert_eq!(u.flavour, Some(Flavour::Stacked));
        }
        e => panic!("{e:?}"),
    }
    // Nothing moved: the dataspace is still the anonymous manager's.
    assert!(anon.open(&id, Access::ReadWrite, None).is_ok());
}

#[test]
fn test_compressed_over_lazy_copy_over_compressed_is_refused_as_a_cycle() {
    use pagepilot_dataspace::{CompressedManager, LazyCopyManager};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base");
    common::numbered_file(&path, 4);
    let cm = CompressedManager::with_dir(4096, dir.path());
    let lc = LazyCopyManager::new(dir.path());
    let on_cm = FileManager.transfer(&DataspaceId::Path(path), &cm).unwrap();
    let on_lc = cm.transfer(&on_cm, &lc).unwrap();
    let err = lc.transfer(&on_lc, &cm).unwrap_err();
    match &err {
        TransferError::Cycle { to, stack, .. } => {
            assert_eq!(*to, cm.key());
            assert_eq!(stack, &vec![FileManager.key(), cm.key(), lc.key()]);
        }
        other => panic!("{other:?}"),
    }
    // Refused before anything moved: the copy is still the lazy-copy manager's.
    let store = lc.open(&on_lc, Access::ReadOnly, None).unwrap();
    assert_eq!(read(store.as_ref(), 3, 1).1[0], 4);
}

#[test]
fn test_stack_of_alternating_compressed_and_lazy_copy_managers_stops_at_max_depth() {
    use pagepilot_dataspace::{CompressedManager, LazyCopyManager};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base");
    common::numbered_file(&path, 4);
    let before = std::fs::read(&path).unwrap();
    let managers: Vec<Box<dyn Manager>> = (0..MAX_STACK_DEPTH)
        .map(|i| -> Box<dyn Manager> {
            if i % 2 == 0 {
                Box::new(CompressedManager::with_dir(4096, dir.path()))
            } else {
                Box::new(LazyCopyManager::new(dir.path()))
            }
        })
        .collect();
    let mut id = DataspaceId::Path(path.clone());
    let mut from: &dyn Manager = &FileManager;
    for m in &managers[..MAX_STACK_DEPTH - 1] {
        id = from.transfer(&id, m.as_ref()).unwrap();
        from = m.as_ref();
    }
    assert_eq!(from.stack(&id).unwrap().len(), MAX_STACK_DEPTH);
    let err = from
        .transfer(&id, managers[MAX_STACK_DEPTH - 1].as_ref())
        .unwrap_err();
    assert!(
        matches!(err, TransferError::TooDeep { depth, .. } if depth == MAX_STACK_DEPTH + 1),
        "{err:?}"
    );
    // The top reads the file through every layer; its writes, synced down
    // through the compressed layers, stop at the lowest lazy copy.
    let store = from.open(&id, Access::ReadWrite, None).unwrap();
    assert_eq!(read(store.as_ref(), 2, 1).1[0], 3);
    write(store.as_ref(), 0, 4, 0x7e);
    from.close(&id, store).unwrap();
    let store = from.open(&id, Access::ReadOnly, None).unwrap();
    assert!(read(store.as_ref(), 0, 4).1.iter().all(|&b| b == 0x7e));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file under the lazy copies is never written"
    );
}
