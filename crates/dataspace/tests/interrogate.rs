//! `interrogate` predicts what each manager does: every operation it does
//! not list answers `Unsupported`, every one it lists does not, and the
//! flavours it offers are the accesses `open` takes.

mod common;

use pagepilot_dataspace::{
    Access, AnonymousManager, FileManager, Flavour, Manager, MaybeUnsupported, Operation,
    Unsupported,
};

/// Performs `op` on a fresh dataspace of `m`'s with valid input; returns
/// the `Unsupported` answer if it gave one, panics on any other error.
fn answer(m: &dyn Manager, op: Operation, dir: &std::path::Path) -> Option<Unsupported> {
    let file = |name: &str| (m.name() == FileManager::NAME).then(|| dir.join(name));
    let id = m.create(file("ds").as_deref(), 4 * 4096).unwrap();
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
    vec![Box::new(FileManager), Box::new(AnonymousManager::new(dir))]
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
        let path = dir.path().join("ds");
        let name = (m.name() == FileManager::NAME).then_some(path.as_path());
        let id = m.create(name, 4096).unwrap();
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
        let persistent = caps.offers(Flavour::Persistent);
        assert_eq!(persistent, !caps.offers(Flavour::Anonymous), "{}", m.name());
        let store = m.open(&id, Access::ReadWrite, None).unwrap();
        assert_eq!(store.persistent(), persistent, "{}", m.name());
        m.close(&id, store).unwrap();
        m.delete(&id).unwrap();
        assert!(m.identify(&id).is_err());
    }
}
