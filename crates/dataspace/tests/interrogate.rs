//! `interrogate` predicts what each manager does (file, anonymous,
//! compressed, lazy copy): every operation it does not list answers
//! `Unsupported`, every one it lists does not, and the flavours it offers
//! are the accesses `open` takes.

mod common;

use pagepilot_dataspace::{
    Access, AnonymousManager, CompressedManager, DataspaceId, FileManager, Flavour,
    LazyCopyManager, Manager, MaybeUnsupported, Operation, Unsupported,
};

/// A fresh dataspace of `m`'s, `name`d in `dir` where it is a file: made by
/// `create`, or for a manager that cannot create (the lazy-copy manager)
/// a file transferred to it.
fn fresh(m: &dyn Manager, dir: &std::path::Path, name: &str, len: u64) -> DataspaceId {
    let path = dir.join(name);
    if m.name() == FileManager::NAME {
        return m.create(Some(&path), len).unwrap();
    }
    if m.interrogate().supports(Operation::Create) {
        return m.create(None, len).unwrap();
    }
    let _ = std::fs::remove_file(&path);
    let file = FileManager.create(Some(&path), len).unwrap();
    FileManager.transfer(&file, m).unwrap()
}

/// Performs `op` on a fresh dataspace of `m`'s with valid input; returns
/// the `Unsupported` answer if it gave one, panics on any other error.
fn answer(m: &dyn Manager, op: Operation, dir: &std::path::Path) -> Option<Unsupported> {
    let file = |name: &str| (m.name() == FileManager::NAME).then(|| dir.join(name));
    let id = fresh(m, dir, "ds", 4 * 4096);
    fn verdict<T, E: MaybeUnsupported + std::fmt::Debug>(r: Result<T, E>) -> Option<Unsupported> {
        match r {
            Ok(_) => None,
            Err(e) => Some(e.unsupported().cloned().unwrap_or_else(|| panic!("{e:?}"))),
        }
    }
    let other = common::Layer::new();
    let u = match op {
        Operation::Identify => verdict(m.identify(&id)),
        Operation::Open => verdict(m.open(&id, Access::ReadWrite, None)),
        Operation::Close => verdict(
            m.open(&id, Access::ReadWrite, None)
                .map(|s| m.close(&id, s))
                .unwrap(),
        ),
        Operation::Interrogate => {
            m.interrogate();
            None
        }
        Operation::Create => verdict(m.create(file("new").as_deref(), 4096)),
        Operation::Delete => verdict(m.delete(&id)),
        Operation::Share => verdict(m.share(&id, Access::ReadOnly)),
        Operation::Copy => verdict(m.copy(&id, file("copy").as_deref())),
        Operation::Transfer => verdict(m.transfer(&id, &other)),
    };
    for name in ["ds", "new", "copy"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    u
}

fn managers(dir: &std::path::Path) -> Vec<Box<dyn Manager>> {
    vec![
        Box::new(FileManager),
        Box::new(AnonymousManager::new(dir)),
        Box::new(CompressedManager::with_dir(4096, dir)),
        Box::new(LazyCopyManager::new(dir)),
    ]
}

#[test]
fn test_interrogate_predicts_which_operations_answer_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    for m in managers(dir.path()) {
        let caps = m.interrogate();
        for op in Operation::ALL {
            let got = answer(m.as_ref(), op, dir.path());
            if caps.supports(op) {
                assert_eq!(got, None, "{} {op}", m.name());
            } else {
                let u = got.unwrap_or_else(|| panic!("{} {op} answered", m.name()));
                assert_eq!((u.manager, u.operation), (m.name(), op));
            }
        }
    }
}

#[test]
fn test_every_manager_supports_the_operations_sawmill_requires() {
    let dir = tempfile::tempdir().unwrap();
    for m in managers(dir.path()) {
        for op in [
            Operation::Identify,
            Operation::Open,
            Operation::Close,
            Operation::Interrogate,
        ] {
            assert!(m.interrogate().supports(op), "{} {op}", m.name());
        }
    }
}

#[test]
fn test_interrogate_flavours_match_the_accesses_open_takes() {
    let dir = tempfile::tempdir().unwrap();
    for m in managers(dir.path()) {
        let caps = m.interrogate();
        let id = fresh(m.as_ref(), dir.path(), "ds", 4096);
        for access in [Access::ReadOnly, Access::ReadWrite] {
            match m.open(&id, access, None) {
                Ok(s) => {
                    assert!(caps.offers(access.flavour()), "{} {access:?}", m.name());
                    m.close(&id, s).unwrap();
                }
                Err(e) => {
                    assert!(
                        !caps.offers(access.flavour()),
                        "{} {access:?}: {e}",
                        m.name()
                    );
                    let u = e.unsupported().expect("Unsupported");
                    assert_eq!(u.flavour, Some(access.flavour()));
                }
            }
        }
        // Persistent or Anonymous, never both; a stacked manager offering
        // neither keeps its lower dataspace's persistence.
        let persistent = caps.offers(Flavour::Persistent);
        let anonymous = caps.offers(Flavour::Anonymous);
        assert!(!(persistent && anonymous), "{}", m.name());
        assert!(persistent || anonymous || caps.offers(Flavour::Stacked), "{}", m.name());
        let store = m.open(&id, Access::ReadWrite, None).unwrap();
        if persistent || anonymous {
            assert_eq!(store.persistent(), persistent, "{}", m.name());
        }
        m.close(&id, store).unwrap();
        m.delete(&id).unwrap();
        assert!(m.identify(&id).is_err());
        let _ = std::fs::remove_file(dir.path().join("ds"));
    }
}

#[test]
fn test_stacked_flavour_is_offered_exactly_by_the_managers_that_take_transfers() {
    let dir = tempfile::tempdir().unwrap();
    for m in managers(dir.path()) {
        let file = FileManager.create(Some(&dir.path().join("t")), 4096).unwrap();
        let taken = FileManager.transfer(&file, m.as_ref());
        assert_eq!(taken.is_ok(), m.interrogate().offers(Flavour::Stacked), "{}", m.name());
        if let Ok(id) = taken {
            let mut stack = m.stack(&id).unwrap();
            assert_eq!(stack.pop(), Some(m.key()), "{}", m.name());
            assert_eq!(stack, vec![FileManager.key()], "{}", m.name());
        }
        std::fs::remove_file(dir.path().join("t")).unwrap();
    }
}

#[test]
fn test_compressed_flavour_means_pages_are_held_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(1 << 20, dir.path());
    assert!(cm.interrogate().offers(Flavour::Compressed));
    assert!(!LazyCopyManager::new(dir.path()).interrogate().offers(Flavour::Compressed));
    let id = cm.create(None, 4 * 4096).unwrap();
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    common::write(store.as_ref(), 0, 4, 0x5c);
    let s = cm.stats(&id).unwrap();
    assert!(s.pages == 4 && s.compressed_bytes < 4 * 4096 / 8, "{s:?}");
    cm.close(&id, store).unwrap();
}
