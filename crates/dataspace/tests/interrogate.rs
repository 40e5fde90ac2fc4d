//! `interrogate` predicts what each manager does: every operation it does
//! not list answers `Unsupported`, every one it lists does not, and the
//! flavours it offers are the accesses `open` takes (and the kind of store
//! it hands out: persistent, anonymous, pinned, compressed).

mod common;

use std::path::{Path, PathBuf};

use pagepilot_dataspace::{
    Access, AnonymousManager, CompressedManager, DataspaceId, FileManager, Flavour,
    LazyCopyManager, Manager, MaybeUnsupported, Operation, PersistentManager, PinnedManager,
    Unsupported,
};

/// A manager under test, and how to get a fresh dataspace of its.
struct Subject {
    m: Box<dyn Manager>,
    /// Where a stacked manager's dataspaces come from (it creates none).
    source: Option<AnonymousManager>,
    dir: PathBuf,
}

impl Subject {
    /// The name `create` and `copy` take for `n`.
    fn name(&self, n: &str) -> Option<PathBuf> {
        match self.m.name() {
            FileManager::NAME => Some(self.dir.join(n)),
            PersistentManager::NAME => Some(n.into()),
            _ => None,
        }
    }

    /// A fresh dataspace of 4 pages.
    fn fresh(&self) -> DataspaceId {
        match &self.source {
            Some(anon) => {
                let id = anon.create(None, 4 * 4096).unwrap();
                anon.transfer(&id, self.m.as_ref()).unwrap()
            }
            None => self.m.create(self.name("ds").as_deref(), 4 * 4096).unwrap(),
        }
    }
}

/// Every manager, each in a directory of its own under `dir`.
fn subjects(dir: &Path) -> Vec<Subject> {
    let sub = |n: &str| {
        let d = dir.join(n);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    vec![
        Subject {
            m: Box::new(FileManager),
            source: None,
            dir: sub("file"),
        },
        Subject {
            m: Box::new(AnonymousManager::new(sub("anon"))),
            source: None,
            dir: sub("anon"),
        },
        Subject {
            m: Box::new(PersistentManager::new(sub("persistent"))),
            source: None,
            dir: sub("persistent"),
        },
        Subject {
            m: Box::new(PinnedManager::new(1 << 20)),
            source: Some(AnonymousManager::new(sub("pinned"))),
            dir: sub("pinned"),
        },
        Subject {
            m: Box::new(CompressedManager::with_dir(4096, sub("compressed"))),
            source: None,
            dir: sub("compressed"),
        },
        Subject {
            m: Box::new(LazyCopyManager::new(sub("lazy"))),
            source: Some(AnonymousManager::new(sub("lazy"))),
            dir: sub("lazy"),
        },
    ]
}

/// Every manager.
fn managers(dir: &Path) -> Vec<Box<dyn Manager>> {
    subjects(dir).into_iter().map(|s| s.m).collect()
}

/// Performs `op` on a fresh dataspace of `s`'s with valid input; returns
/// the `Unsupported` answer if it gave one, panics on any other error.
fn answer(s: &Subject, op: Operation) -> Option<Unsupported> {
    let (m, id) = (s.m.as_ref(), s.fresh());
    fn verdict<T, E: MaybeUnsupported + std::fmt::Debug>(r: Result<T, E>) -> Option<Unsupported> {
        match r {
            Ok(_) => None,
            Err(e) => Some(e.unsupported().cloned().unwrap_or_else(|| panic!("{e:?}"))),
        }
    }
    let other = common::Layer::new();
    match op {
        Operation::Identify => verdict(m.identify(&id)),
        Operation::Open => verdict(m.open(&id, Access::ReadWrite, None)),
        Operation::Close => verdict(
            m.open(&id, Access::ReadWrite, None)
                .map(|st| m.close(&id, st))
                .unwrap(),
        ),
        Operation::Interrogate => {
            m.interrogate();
            None
        }
        Operation::Create => verdict(m.create(s.name("new").as_deref(), 4096)),
        Operation::Delete => verdict(m.delete(&id)),
        Operation::Share => verdict(m.share(&id, Access::ReadOnly)),
        Operation::Copy => verdict(m.copy(&id, s.name("copy").as_deref())),
        Operation::Transfer => verdict(m.transfer(&id, &other)),
    }
}

#[test]
fn test_interrogate_predicts_which_operations_answer_unsupported() {
    for op in Operation::ALL {
        let dir = tempfile::tempdir().unwrap();
        for s in subjects(dir.path()) {
            let caps = s.m.interrogate();
            let got = answer(&s, op);
            if caps.supports(op) {
                assert_eq!(got, None, "{} {op}", s.m.name());
            } else {
                let u = got.unwrap_or_else(|| panic!("{} {op} answered", s.m.name()));
                assert_eq!((u.manager, u.operation), (s.m.name(), op));
            }
        }
    }
}

#[test]
fn test_every_manager_supports_the_operations_sawmill_requires() {
    let dir = tempfile::tempdir().unwrap();
    for s in subjects(dir.path()) {
        for op in [
            Operation::Identify,
            Operation::Open,
            Operation::Close,
            Operation::Interrogate,
        ] {
            assert!(s.m.interrogate().supports(op), "{} {op}", s.m.name());
        }
    }
}

#[test]
fn test_interrogate_flavours_match_the_accesses_open_takes() {
    let dir = tempfile::tempdir().unwrap();
    for s in subjects(dir.path()) {
        let m = s.m.as_ref();
        let caps = m.interrogate();
        let id = s.fresh();
        for access in [Access::ReadOnly, Access::ReadWrite] {
            match m.open(&id, access, None) {
                Ok(st) => {
                    assert!(caps.offers(access.flavour()), "{} {access:?}", m.name());
                    m.close(&id, st).unwrap();
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
        let store = m.open(&id, Access::ReadWrite, None).unwrap();
        if caps.offers(Flavour::Persistent) {
            assert!(store.persistent(), "{}", m.name());
        }
        if caps.offers(Flavour::Anonymous) {
            assert!(!store.persistent(), "{}: its own swap file", m.name());
        }
        assert!(!(caps.offers(Flavour::Persistent) && caps.offers(Flavour::Anonymous)));
        assert_eq!(store.pinned(), caps.offers(Flavour::Pinned), "{}", m.name());
        m.close(&id, store).unwrap();
        // Those that take transferred dataspaces do.
        if caps.offers(Flavour::Stacked) {
            let anon = AnonymousManager::new(&s.dir);
            let id = anon.create(None, 4096).unwrap();
            anon.transfer(&id, m)
                .unwrap_or_else(|e| panic!("{}: {e}", m.name()));
        }
        m.delete(&id).unwrap();
        assert!(m.identify(&id).is_err());
    }
}

#[test]
fn test_stacked_flavour_is_offered_exactly_by_the_managers_that_take_transfers() {
    let dir = tempfile::tempdir().unwrap();
    for m in managers(dir.path()) {
        let file = FileManager
            .create(Some(&dir.path().join("t")), 4096)
            .unwrap();
        let taken = FileManager.transfer(&file, m.as_ref());
        assert_eq!(
            taken.is_ok(),
            m.interrogate().offers(Flavour::Stacked),
            "{}",
            m.name()
        );
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
    assert!(!LazyCopyManager::new(dir.path())
        .interrogate()
        .offers(Flavour::Compressed));
    let id = cm.create(None, 4 * 4096).unwrap();
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    common::write(store.as_ref(), 0, 4, 0x5c);
    let s = cm.stats(&id).unwrap();
    assert!(s.pages == 4 && s.compressed_bytes < 4 * 4096 / 8, "{s:?}");
    cm.close(&id, store).unwrap();
}
