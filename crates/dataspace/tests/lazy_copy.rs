//! The lazy-copy manager: a copy reads its unmodified pages from the source
//! and its modified ones from its own overlay; the source is never
//! written; copies of copies freeze; a test per operation.

mod common;

use std::sync::Arc;

use common::{numbered_file, pages, read, write, Layer};
use pagepilot_dataspace::{
    Access, AnonymousManager, CloseError, CopyError, CreateError, DataspaceId, DeleteError,
    FileManager, LazyCopyManager, Manager, OpenError, PageStore, MAX_STACK_DEPTH, PAGE,
};

fn file_id(dir: &tempfile::TempDir, name: &str, n: usize) -> DataspaceId {
    let path = dir.path().join(name);
    numbered_file(&path, n);
    DataspaceId::Path(path)
}

fn path(id: &DataspaceId) -> &std::path::Path {
    match id {
        DataspaceId::Path(p) => p,
        other => panic!("{other:?}"),
    }
}

/// Byte 0 of each of pages `0..n` of `store`.
fn firsts(store: &dyn PageStore, n: usize) -> Vec<u8> {
    read(store, 0, n).1.chunks(PAGE).map(|p| p[0]).collect()
}

#[test]
fn test_copy_of_file_reads_source_until_written_and_never_writes_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 8);
    let before = std::fs::read(path(&src)).unwrap();
    let copy = lc.copy_of(Arc::new(FileManager), &src).unwrap();
    let store = lc.open(&copy, Access::ReadWrite, None).unwrap();
    assert_eq!(firsts(store.as_ref(), 8), [1, 2, 3, 4, 5, 6, 7, 8]);
    write(store.as_ref(), 2, 1, 0xc2);
    write(store.as_ref(), 5, 2, 0xc5);
    let (got, bytes) = read(store.as_ref(), 0, 8);
    assert_eq!(got, 8);
    assert_eq!(firsts(store.as_ref(), 8), [1, 2, 0xc2, 4, 5, 0xc5, 0xc5, 8]);
    assert!(
        bytes[2 * PAGE..3 * PAGE].iter().all(|&b| b == 0xc2),
        "whole pages are the copy's"
    );
    lc.close(&copy, store).unwrap();
    assert_eq!(
        std::fs::read(path(&src)).unwrap(),
        before,
        "source unchanged byte for byte"
    );
    let s = lc.stats(&copy).unwrap();
    assert_eq!(s.pages_written, 3);
    assert!(s.reads_own >= 3 && s.reads_source >= 5, "{s:?}");
}

#[test]
fn test_file_transferred_to_the_manager_becomes_the_source_of_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 4);
    let before = std::fs::read(path(&src)).unwrap();
    let copy = FileManager.transfer(&src, &lc).unwrap();
    assert_eq!(lc.stack(&copy).unwrap(), vec![FileManager.key(), lc.key()]);
    let store = lc.open(&copy, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 0, 4, 0xee);
    assert_eq!(firsts(store.as_ref(), 4), [0xee; 4]);
    store.sync().unwrap();
    lc.close(&copy, store).unwrap();
    assert_eq!(std::fs::read(path(&src)).unwrap(), before);
    // Reopened, the copy still has its pages.
    let store = lc.open(&copy, Access::ReadOnly, None).unwrap();
    assert_eq!(firsts(store.as_ref(), 4), [0xee; 4]);
}

#[test]
fn test_unwritten_pages_show_the_source_as_it_is_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 3);
    let copy = lc.copy_of(Arc::new(FileManager), &src).unwrap();
    let store = lc.open(&copy, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 0, 1, 0x10);
    let file = FileManager.open(&src, Access::ReadWrite, None).unwrap();
    write(file.as_ref(), 0, 2, 0x99);
    FileManager.close(&src, file).unwrap();
    assert_eq!(firsts(store.as_ref(), 3), [0x10, 0x99, 3]);
}

#[test]
fn test_copy_of_a_copy_freezes_it_so_neither_sees_the_others_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 4);
    let a = lc.copy_of(Arc::new(FileManager), &src).unwrap();
    let store = lc.open(&a, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1, 1, 0xa1);
    lc.close(&a, store).unwrap();
    let b = lc.copy(&a, None).unwrap();
    assert_ne!(a, b);
    let (sa, sb) = (
        lc.open(&a, Access::ReadWrite, None).unwrap(),
        lc.open(&b, Access::ReadWrite, None).unwrap(),
    );
    write(sa.as_ref(), 1, 1, 0xb1);
    write(sb.as_ref(), 2, 1, 0xc2);
    assert_eq!(firsts(sa.as_ref(), 4), [1, 0xb1, 3, 4]);
    assert_eq!(firsts(sb.as_ref(), 4), [1, 0xa1, 0xc2, 4]);
    assert_eq!(lc.stats(&b).unwrap().depth, lc.stats(&a).unwrap().depth);
    // An open copy cannot be frozen.
    assert!(matches!(
        lc.copy(&a, None),
        Err(CopyError::Busy {
            manager: "lazy-copy",
            ..
        })
    ));
    let named = lc
        .copy(&b, Some(std::path::Path::new("/tmp/x")))
        .unwrap_err();
    assert!(
        matches!(named, CopyError::Create(CreateError::BadName { .. })),
        "{named}"
    );
}

#[test]
fn test_copies_of_copies_stop_at_the_stack_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 1);
    let mut id = lc.copy_of(Arc::new(FileManager), &src).unwrap();
    let mut made = 0;
    let err = loop {
        match lc.copy(&id, None) {
            Ok(next) => {
                id = next;
                made += 1;
            }
            Err(e) => break e,
        }
    };
    // The file and the first copy are two layers; each copy adds one.
    assert_eq!(made, MAX_STACK_DEPTH - 2);
    assert!(
        matches!(err, CopyError::TooDeep { depth, .. } if depth == MAX_STACK_DEPTH + 1),
        "{err}"
    );
    let store = lc.open(&id, Access::ReadOnly, None).unwrap();
    assert_eq!(firsts(store.as_ref(), 1), [1], "read through every layer");
}

#[test]
fn test_copy_of_anonymous_dataspace_closes_it_back_when_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let anon: Arc<dyn Manager> = Arc::new(AnonymousManager::new(dir.path()));
    let lc = LazyCopyManager::new(dir.path());
    let id = anon.create(None, 2 * PAGE as u64).unwrap();
    let s = anon.open(&id, Access::ReadWrite, None).unwrap();
    write(s.as_ref(), 1, 1, 0x44);
    anon.close(&id, s).unwrap();
    // No read-only opens there: opened read-write, never written.
    let copy = lc.copy_of(anon.clone(), &id).unwrap();
    let store = lc.open(&copy, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1, 1, 0x55);
    assert_eq!(firsts(store.as_ref(), 2), [0, 0x55]);
    assert!(matches!(lc.delete(&copy), Err(DeleteError::Open(_))));
    lc.close(&copy, store).unwrap();
    lc.delete(&copy).unwrap();
    assert!(lc.identify(&copy).is_err());
    let s = anon.open(&id, Access::ReadWrite, None).unwrap();
    assert_eq!(
        firsts(s.as_ref(), 2),
        [0, 0x44],
        "the source is back, unchanged"
    );
}

#[test]
fn test_copy_of_a_missing_dataspace_names_its_manager() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let missing = DataspaceId::Path(dir.path().join("nope"));
    match lc.copy_of(Arc::new(FileManager), &missing) {
        Err(CopyError::NoSuch(n)) => assert_eq!(n.manager, "file"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn test_identify_open_and_close_answer_for_copies_only() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let other = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 3);
    let copy = lc.copy_of(Arc::new(FileManager), &src).unwrap();
    let theirs = other.copy_of(Arc::new(FileManager), &src).unwrap();
    let who = lc.identify(&copy).unwrap();
    assert_eq!((who.manager, who.len), ("lazy-copy", 3 * PAGE as u64));
    assert!(lc.identify(&src).is_err());
    let short = lc
        .open(&copy, Access::ReadWrite, Some(4 * PAGE as u64))
        .unwrap_err();
    assert!(matches!(short, OpenError::Short { .. }), "{short}");
    let ro = lc.open(&copy, Access::ReadOnly, None).unwrap();
    let buf = pages(1);
    // SAFETY: one aligned page of ours.
    let err = unsafe { ro.write(0, 1, buf.as_ptr().cast()) }.unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    let store = other.open(&theirs, Access::ReadWrite, None).unwrap();
    assert!(matches!(
        lc.close(&copy, store),
        Err(CloseError::Foreign {
            manager: "lazy-copy",
            ..
        })
    ));
    lc.close(&copy, ro).unwrap();
    assert!(lc.create(None, PAGE as u64).is_err(), "a copy of nothing");
}

#[test]
fn test_transfer_of_a_copy_moves_it_onwards_with_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let lc = LazyCopyManager::new(dir.path());
    let src = file_id(&dir, "src", 2);
    let copy = lc.copy_of(Arc::new(FileManager), &src).unwrap();
    let store = lc.open(&copy, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 0, 1, 0x66);
    lc.close(&copy, store).unwrap();
    let layer = Layer::new();
    let moved = lc.transfer(&copy, &layer).unwrap();
    assert_eq!(
        layer.stack(&moved).unwrap(),
        vec![FileManager.key(), lc.key(), layer.key()]
    );
    let store = layer.open(&moved, Access::ReadWrite, None).unwrap();
    assert_eq!(firsts(store.as_ref(), 2), [0x66, 2]);
    assert!(
        lc.open(&copy, Access::ReadWrite, None).is_err(),
        "no longer served here"
    );
}
