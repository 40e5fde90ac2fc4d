//! The anonymous manager, operation by operation, with swap files in a temp dir.

mod common;

use common::{read, write};
use pagepilot_dataspace::{
    Access, AnonymousManager, CloseError, CreateError, DataspaceId, DeleteError, Flavour,
    IdentifyError, Manager, MaybeUnsupported, NoSuch, OpenError, Operation, PAGE,
};

const LEN: u64 = 8 * PAGE as u64;

#[test]
fn test_anon_create_gives_distinct_ids_that_identify_with_their_length() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let a = m.create(None, LEN).unwrap();
    let b = m.create(None, 2 * LEN).unwrap();
    assert_ne!(a, b);
    assert_eq!(m.identify(&a).unwrap().len, LEN);
    let who = m.identify(&b).unwrap();
    assert_eq!(
        (who.len, who.manager, who.inode),
        (2 * LEN, "anonymous", None)
    );
    // Unnamed: nothing left in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn test_anon_create_refusals_name_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let e = AnonymousManager::new(&missing)
        .create(None, LEN)
        .unwrap_err();
    assert!(
        matches!(&e, CreateError::Io { path, .. } if *path == missing),
        "{e}"
    );
    assert!(e.to_string().contains("no-such-dir"), "{e}");
    let m = AnonymousManager::new(dir.path());
    let e = m.create(None, 0).unwrap_err();
    assert!(matches!(e, CreateError::Empty { .. }), "{e}");
    let e = m.create(Some(&dir.path().join("x")), LEN).unwrap_err();
    assert!(matches!(e, CreateError::BadName { .. }), "{e}");
}

#[test]
fn test_anon_open_reads_zero_pages_until_written() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let id = m.create(None, LEN).unwrap();
    let s = m.open(&id, Access::ReadWrite, Some(LEN)).unwrap();
    assert!(!s.persistent() && !s.has_data(3) && s.file().is_none());
    assert_eq!(s.size(), LEN);
    write(s.as_ref(), 3, 2, 0x5a);
    assert!(s.has_data(3) && s.has_data(4) && !s.has_data(5));
    let (got, bytes) = read(s.as_ref(), 2, 4);
    assert_eq!(got, 4);
    assert!(bytes[..PAGE].iter().all(|&b| b == 0));
    assert!(bytes[PAGE..3 * PAGE].iter().all(|&b| b == 0x5a));
    assert!(bytes[3 * PAGE..].iter().all(|&b| b == 0));
    m.close(&id, s).unwrap();
}

#[test]
fn test_anon_close_keeps_the_contents_for_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let id = m.create(None, LEN).unwrap();
    let s = m.open(&id, Access::ReadWrite, None).unwrap();
    write(s.as_ref(), 7, 1, 9);
    m.close(&id, s).unwrap();
    let s = m.open(&id, Access::ReadWrite, None).unwrap();
    assert!(s.has_data(7));
    assert!(read(s.as_ref(), 7, 1).1.iter().all(|&b| b == 9));
}

#[test]
fn test_anon_open_refusals_busy_short_read_only_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let id = m.create(None, LEN).unwrap();
    let e = m.open(&id, Access::ReadWrite, Some(LEN + 1)).unwrap_err();
    assert!(
        matches!(&e, OpenError::Short { actual, expected, .. } if *actual == LEN && *expected == LEN + 1),
        "{e}"
    );
    let e = m.open(&id, Access::ReadOnly, None).unwrap_err();
    let u = e.unsupported().expect("read-only is not offered");
    assert_eq!(
        (u.operation, u.flavour),
        (Operation::Open, Some(Flavour::ReadOnly))
    );
    let _s = m.open(&id, Access::ReadWrite, None).unwrap();
    let e = m.open(&id, Access::ReadWrite, None).unwrap_err();
    assert!(matches!(&e, OpenError::Busy(x) if *x == id), "{e}");
    let e = m
        .open(&DataspaceId::Anonymous(99), Access::ReadWrite, None)
        .unwrap_err();
    assert!(matches!(e, OpenError::NoSuch(NoSuch { .. })), "{e}");
    let path = DataspaceId::Path(dir.path().join("f"));
    assert!(matches!(
        m.identify(&path),
        Err(IdentifyError::NoSuch(NoSuch { .. }))
    ));
}

#[test]
fn test_anon_delete_of_an_open_dataspace_is_refused_until_closed() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let id = m.create(None, LEN).unwrap();
    let s = m.open(&id, Access::ReadWrite, None).unwrap();
    let e = m.delete(&id).unwrap_err();
    assert!(matches!(&e, DeleteError::Open(x) if *x == id), "{e}");
    assert!(e.to_string().contains("open"), "{e}");
    m.close(&id, s).unwrap();
    m.delete(&id).unwrap();
    let e = m.delete(&id).unwrap_err();
    assert!(matches!(e, DeleteError::NoSuch(NoSuch { .. })), "{e}");
    assert!(m.open(&id, Access::ReadWrite, None).is_err());
}

#[test]
fn test_anon_store_dropped_without_close_takes_its_dataspace() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let id = m.create(None, LEN).unwrap();
    drop(m.open(&id, Access::ReadWrite, None).unwrap());
    assert!(matches!(
        m.identify(&id),
        Err(IdentifyError::NoSuch(NoSuch { .. }))
    ));
}

#[test]
fn test_anon_close_refuses_a_store_of_another_dataspace() {
    let dir = tempfile::tempdir().unwrap();
    let m = AnonymousManager::new(dir.path());
    let (a, b) = (m.create(None, LEN).unwrap(), m.create(None, LEN).unwrap());
    let sa = m.open(&a, Access::ReadWrite, None).unwrap();
    let _sb = m.open(&b, Access::ReadWrite, None).unwrap();
    let e = m.close(&b, sa).unwrap_err();
    assert!(
        matches!(&e, CloseError::Foreign { id, .. } if *id == b),
        "{e}"
    );
    // `a` went back to its own entry, closed: it opens again.
    m.open(&a, Access::ReadWrite, None).unwrap();
}
