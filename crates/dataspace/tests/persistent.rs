//! The persistent manager: named dataspaces kept in a directory, reopened
//! by name by another manager instance (as a new process would), written
//! incrementally, with bad names and damaged files refused by errors
//! naming them; a test per operation.

mod common;

use std::os::unix::fs::MetadataExt;

use common::{read, write, Layer};
use pagepilot_dataspace::{
    Access, AnonymousManager, CopyError, CreateError, DataspaceId, DeleteError, IdentifyError,
    Manager, OpenError, PersistentManager, TransferError, PAGE,
};

fn name(n: &str) -> DataspaceId {
    DataspaceId::Name(n.into())
}

#[test]
fn test_created_dataspace_is_reopened_by_name_by_a_new_manager_with_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path().join("ds"));
    let id = pm.create_named("foo", 8 * PAGE as u64).unwrap();
    assert_eq!(id, name("foo"));
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    assert!(store.persistent());
    write(store.as_ref(), 5, 2, 0xc3);
    pm.close(&id, store).unwrap();
    drop(pm);

    let again = PersistentManager::new(dir.path().join("ds"));
    assert_eq!(again.names().unwrap(), vec!["foo".to_string()]);
    let store = again.open(&name("foo"), Access::ReadOnly, None).unwrap();
    let (got, bytes) = read(store.as_ref(), 0, 8);
    assert_eq!(got, 8);
    for (p, page) in bytes.chunks(PAGE).enumerate() {
        let want = if (5..7).contains(&p) { 0xc3 } else { 0 };
        assert!(page.iter().all(|&b| b == want), "page {p}");
    }
}

#[test]
fn test_only_the_pages_written_take_space_in_the_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let len = 1u64 << 30;
    let id = pm.create_named("big", len).unwrap();
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1000, 2, 7);
    write(store.as_ref(), 200_000, 1, 9);
    pm.close(&id, store).unwrap();
    let meta = std::fs::metadata(dir.path().join("big.pages")).unwrap();
    assert_eq!(meta.len(), len);
    assert!(
        meta.blocks() * 512 <= 256 * 1024,
        "{} bytes allocated",
        meta.blocks() * 512
    );
    let store = pm.open(&id, Access::ReadOnly, None).unwrap();
    assert_eq!(read(store.as_ref(), 1001, 1).1[0], 7);
    assert_eq!(read(store.as_ref(), 200_000, 1).1[PAGE - 1], 9);
    assert!(read(store.as_ref(), 500, 1).1.iter().all(|&b| b == 0));
}

#[test]
fn test_identify_gives_the_length_and_an_unknown_name_is_no_such() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let id = pm.create_named("x", 3 * PAGE as u64 + 5).unwrap();
    let who = pm.identify(&id).unwrap();
    assert_eq!((who.len, who.manager), (3 * PAGE as u64 + 5, "persistent"));
    assert!(who.inode.is_some());
    let e = pm.identify(&name("y")).unwrap_err();
    assert!(matches!(e, IdentifyError::NoSuch(_)), "{e}");
    let e = pm.identify(&DataspaceId::Anonymous(1)).unwrap_err();
    assert!(matches!(e, IdentifyError::NoSuch(_)), "{e}");
}

#[test]
fn test_create_refuses_a_taken_name_zero_bytes_and_no_name() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    pm.create_named("a", PAGE as u64).unwrap();
    let e = pm.create_named("a", PAGE as u64).unwrap_err();
    assert!(
        matches!(&e, CreateError::Exists(p) if p.ends_with("a.meta")),
        "{e}"
    );
    assert!(matches!(
        pm.create_named("b", 0),
        Err(CreateError::Empty { .. })
    ));
    assert!(matches!(
        pm.create(None, 1),
        Err(CreateError::BadName { .. })
    ));
    // Through the trait, the name is given as a path of one component.
    let id = pm
        .create(Some(std::path::Path::new("c")), PAGE as u64)
        .unwrap();
    assert_eq!(id, name("c"));
}

#[test]
fn test_bad_names_are_refused_by_every_operation_naming_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let long = "n".repeat(pagepilot_dataspace::MAX_NAME + 1);
    for bad in ["a/b", "..", ".", "", ".hidden", &long] {
        let e = pm.create_named(bad, PAGE as u64).unwrap_err();
        assert!(matches!(e, CreateError::InvalidName(_)), "{bad:?}: {e}");
        assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        let e = pm.open(&name(bad), Access::ReadWrite, None).unwrap_err();
        assert!(matches!(e, OpenError::InvalidName(_)), "{bad:?}: {e}");
        let e = pm.identify(&name(bad)).unwrap_err();
        assert!(matches!(e, IdentifyError::InvalidName(_)), "{bad:?}: {e}");
        let e = pm.delete(&name(bad)).unwrap_err();
        assert!(matches!(e, DeleteError::InvalidName(_)), "{bad:?}: {e}");
    }
    // Nothing was made outside the directory, nor in it.
    assert!(!dir.path().join("a").exists());
    assert!(pm.names().unwrap().is_empty());
}

#[test]
fn test_a_damaged_header_or_data_file_is_reported_corrupt_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let meta = dir.path().join("h.meta");
    let data = dir.path().join("h.pages");
    let corrupt = |what: &str| {
        let e = pm.open(&name("h"), Access::ReadWrite, None).unwrap_err();
        assert!(matches!(e, OpenError::Corrupt(_)), "{what}: {e}");
        let e2 = pm.identify(&name("h")).unwrap_err();
        assert!(matches!(e2, IdentifyError::Corrupt(_)), "{what}: {e2}");
        e.to_string()
    };
    pm.create_named("h", 4 * PAGE as u64).unwrap();
    let good = std::fs::read(&meta).unwrap();

    std::fs::write(&meta, &good[..10]).unwrap();
    let e = corrupt("truncated");
    assert!(
        e.contains(&meta.display().to_string()) && e.contains("10 bytes"),
        "{e}"
    );

    let mut bad = good.clone();
    bad[0] = b'X';
    std::fs::write(&meta, &bad).unwrap();
    assert!(corrupt("magic").contains("bad magic"));

    let mut bad = good.clone();
    bad[17] ^= 1;
    std::fs::write(&meta, &bad).unwrap();
    assert!(corrupt("length").contains("checksum"));

    std::fs::write(&meta, &good).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(PAGE as u64)
        .unwrap();
    let e = corrupt("short data");
    assert!(e.contains(&data.display().to_string()), "{e}");
    assert!(e.contains(&format!("{} bytes", PAGE)), "{e}");

    std::fs::remove_file(&data).unwrap();
    assert!(corrupt("no data").contains("missing"));
    // A damaged dataspace can still be deleted.
    pm.delete(&name("h")).unwrap();
    assert!(!meta.exists());
}

#[test]
fn test_a_second_read_write_open_is_busy_until_the_first_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let other = PersistentManager::new(dir.path());
    let id = pm.create_named("b", PAGE as u64).unwrap();
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    let e = other.open(&id, Access::ReadWrite, None).unwrap_err();
    assert!(matches!(&e, OpenError::Busy(x) if *x == id), "{e}");
    assert!(matches!(
        other.open(&id, Access::ReadOnly, None),
        Err(OpenError::Busy(_))
    ));
    pm.close(&id, store).unwrap();
    // Readers share.
    let r1 = other.open(&id, Access::ReadOnly, None).unwrap();
    let r2 = pm.open(&id, Access::ReadOnly, None).unwrap();
    assert!(matches!(
        pm.open(&id, Access::ReadWrite, None),
        Err(OpenError::Busy(_))
    ));
    drop((r1, r2));
    let e = pm
        .open(&id, Access::ReadWrite, Some(2 * PAGE as u64))
        .unwrap_err();
    assert!(matches!(e, OpenError::Short { .. }), "{e}");
}

#[test]
fn test_close_refuses_a_store_of_another_dataspace() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let a = pm.create_named("a", PAGE as u64).unwrap();
    let b = pm.create_named("b", PAGE as u64).unwrap();
    let store = pm.open(&a, Access::ReadWrite, None).unwrap();
    assert!(pm.close(&b, store).is_err());
    let anon = AnonymousManager::new(dir.path());
    let n = anon.create(None, PAGE as u64).unwrap();
    let foreign = anon.open(&n, Access::ReadWrite, None).unwrap();
    assert!(pm.close(&a, foreign).is_err());
}

#[test]
fn test_delete_removes_both_files_and_refuses_an_open_dataspace() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let id = pm.create_named("d", PAGE as u64).unwrap();
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    assert!(matches!(pm.delete(&id), Err(DeleteError::Open(_))));
    pm.close(&id, store).unwrap();
    pm.delete(&id).unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file left"
    );
    assert!(matches!(pm.delete(&id), Err(DeleteError::NoSuch(_))));
    // The name is free again.
    pm.create_named("d", PAGE as u64).unwrap();
}

#[test]
fn test_copy_makes_a_new_name_with_the_same_bytes_independent_of_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let id = pm.create_named("orig", 4 * PAGE as u64).unwrap();
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1, 2, 0x42);
    pm.close(&id, store).unwrap();
    let copy = pm.copy(&id, Some("dup".as_ref())).unwrap();
    assert_eq!(copy, name("dup"));
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1, 1, 0x99);
    pm.close(&id, store).unwrap();
    let dup = pm.open(&copy, Access::ReadOnly, None).unwrap();
    let (_, bytes) = read(dup.as_ref(), 0, 4);
    assert!(bytes[..PAGE].iter().all(|&b| b == 0));
    assert!(
        bytes[PAGE..3 * PAGE].iter().all(|&b| b == 0x42),
        "the copy kept the old bytes"
    );
    let e = pm.copy(&id, Some("dup".as_ref())).unwrap_err();
    assert!(
        matches!(e, CopyError::Create(CreateError::Exists(_))),
        "{e}"
    );
    let e = pm.copy(&id, Some("../x".as_ref())).unwrap_err();
    assert!(e.to_string().contains("\"../x\""), "{e}");
}

#[test]
fn test_share_gives_a_descriptor_of_the_pages() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let id = pm.create_named("s", 2 * PAGE as u64).unwrap();
    let store = pm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1, 1, 0x17);
    pm.close(&id, store).unwrap();
    let share = pm.share(&id, Access::ReadOnly).unwrap();
    let mut b = [0u8; 1];
    share.handle.read_exact_at(&mut b, PAGE as u64 + 3).unwrap();
    assert_eq!(b[0], 0x17);
}

#[test]
fn test_transfer_to_an_anonymous_manager_keeps_what_is_written_under_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path().join("p"));
    let anon = AnonymousManager::new(dir.path());
    let id = pm.create_named("foo", 16 * PAGE as u64).unwrap();
    let on_anon = pm.transfer(&id, &anon).unwrap();
    assert_eq!(anon.stack(&on_anon).unwrap(), vec![pm.key(), anon.key()]);
    // The anonymous manager serves it now: not the persistent one.
    let e = pm.open(&id, Access::ReadWrite, None).unwrap_err();
    assert!(matches!(e, OpenError::Busy(_)), "{e}");
    let store = anon.open(&on_anon, Access::ReadWrite, None).unwrap();
    assert!(
        read(store.as_ref(), 0, 16).1.iter().all(|&b| b == 0),
        "zero-filled"
    );
    write(store.as_ref(), 3, 4, 0x3c);
    store.sync().unwrap();
    anon.close(&on_anon, store).unwrap();
    // Reopened as anonymous memory: the same pages.
    let store = anon.open(&on_anon, Access::ReadWrite, None).unwrap();
    assert_eq!(read(store.as_ref(), 4, 1).1[0], 0x3c);
    anon.close(&on_anon, store).unwrap();
    // Given up by the anonymous manager, back under its name.
    anon.delete(&on_anon).unwrap();
    let again = PersistentManager::new(dir.path().join("p"));
    let store = again.open(&id, Access::ReadOnly, None).unwrap();
    let (_, bytes) = read(store.as_ref(), 0, 16);
    for (p, page) in bytes.chunks(PAGE).enumerate() {
        let want = if (3..7).contains(&p) { 0x3c } else { 0 };
        assert!(page.iter().all(|&b| b == want), "page {p}");
    }
}

#[test]
fn test_transfer_to_a_layer_and_on_keeps_the_stack_bottom_first() {
    let dir = tempfile::tempdir().unwrap();
    let pm = PersistentManager::new(dir.path());
    let layer = Layer::new();
    let anon = AnonymousManager::new(dir.path());
    let id = pm.create_named("s", PAGE as u64).unwrap();
    let on_layer = pm.transfer(&id, &layer).unwrap();
    let on_anon = layer.transfer(&on_layer, &anon).unwrap();
    assert_eq!(
        anon.stack(&on_anon).unwrap(),
        vec![pm.key(), layer.key(), anon.key()]
    );
    let e = anon.transfer(&on_anon, &layer).unwrap_err();
    assert!(matches!(e, TransferError::Cycle { .. }), "{e}");
}

#[test]
fn test_default_dir_follows_pagepilot_home_then_home() {
    // The one test that reads these variables.
    std::env::set_var("PAGEPILOT_HOME", "/tmp/pp-home");
    assert_eq!(
        PersistentManager::default_dir().unwrap(),
        std::path::Path::new("/tmp/pp-home/dataspaces")
    );
    std::env::remove_var("PAGEPILOT_HOME");
    std::env::remove_var("XDG_DATA_HOME");
    std::env::set_var("HOME", "/tmp/h");
    assert_eq!(
        PersistentManager::at_default().unwrap().dir(),
        std::path::Path::new("/tmp/h/.local/share/pagepilot/dataspaces")
    );
}
