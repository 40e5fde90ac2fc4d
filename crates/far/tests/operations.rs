//! The far manager's operations, each on a real redis-server of the
//! test's own: create, identify, open, close, delete, transfer, and the
//! refusals (bad names and lengths, a taken name, a missing or short
//! dataspace, an open one deleted, a foreign store closed, an unreachable
//! server, a page of the wrong size); `interrogate` predicts exactly which
//! operations answer `Unsupported`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use pagepilot_dataspace::{
    Access, AnonymousManager, CloseError, CreateError, DataspaceId, DeleteError, FileManager,
    Flavour, Lower, Manager, MaybeUnsupported, OpenError, Operation, PageStore, TransferError,
    Unsupported,
};
use pagepilot_far::{RedisConfig, RedisManager};
use pagepilot_pager::policy::chain;
use redis::Commands;

const SECOND: Duration = Duration::from_secs(1);

fn name(n: &str) -> Option<&Path> {
    Some(Path::new(n))
}

#[test]
fn test_create_stores_metadata_and_identify_says_the_length() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let id = far.create(name("alpha"), 10 * 4096 + 5).unwrap();
    assert_eq!(id, DataspaceId::Name("alpha".into()));
    let who = far.identify(&id).unwrap();
    assert_eq!(
        (who.manager, who.len, who.inode),
        ("redis", 10 * 4096 + 5, None)
    );
    let meta: String = server.raw().get("pp:{alpha}:meta").unwrap();
    assert_eq!(meta, "pagepilot-far 2 len=40965 window=64");
    // Another manager on the same server sees it.
    assert_eq!(server.manager(SECOND).identify(&id).unwrap().len, 40965);
    let missing = DataspaceId::Name("beta".into());
    assert!(matches!(
        far.identify(&missing),
        Err(pagepilot_dataspace::IdentifyError::NoSuch(_))
    ));
    let other_kind = DataspaceId::Anonymous(3);
    assert!(matches!(
        far.identify(&other_kind),
        Err(pagepilot_dataspace::IdentifyError::NoSuch(_))
    ));
}

#[test]
fn test_create_refuses_taken_bad_and_missing_names_and_empty_or_absurd_lengths() {
    let server = Server::start();
    let far = server.manager(SECOND);
    far.create(name("taken"), 4096).unwrap();
    assert!(
        matches!(far.create(name("taken"), 4096), Err(CreateError::Exists(p)) if p == Path::new("taken"))
    );
    for bad in ["a{b}", "a:b", "with space", "", &"x".repeat(200)] {
        let e = far.create(name(bad), 4096).unwrap_err();
        let msg = chain(&e).to_string();
        assert!(msg.contains("bad far dataspace name"), "{bad:?}: {msg}");
    }
    assert!(matches!(
        far.create(None, 4096),
        Err(CreateError::BadName { .. })
    ));
    assert!(matches!(
        far.create(name("empty"), 0),
        Err(CreateError::Empty { .. })
    ));
    let e = far.create(name("huge"), 1 << 50).unwrap_err();
    assert!(chain(&e).to_string().contains("more than the most"), "{e}");
    // Nothing but the one dataspace's metadata was stored.
    let keys: Vec<String> = server.raw().keys("*").unwrap();
    assert_eq!(keys, vec!["pp:{taken}:meta".to_string()]);
}

#[test]
fn test_open_serves_pages_and_refuses_missing_and_short_dataspaces() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let id = far.create(name("pages"), 8 * 4096).unwrap();
    let store = far.open(&id, Access::ReadWrite, Some(8 * 4096)).unwrap();
    assert_eq!(store.size(), 8 * 4096);
    assert!(store.persistent());
    let data = random_pages(8, 3);
    write(store.as_ref(), 0, &data).unwrap();
    assert_eq!(read(store.as_ref(), 0, 8).unwrap(), data);
    let missing = DataspaceId::Name("nothing".into());
    assert!(matches!(
        far.open(&missing, Access::ReadWrite, None),
        Err(OpenError::NoSuch(_))
    ));
    assert!(matches!(
        far.open(&id, Access::ReadWrite, Some(9 * 4096)),
        Err(OpenError::Short {
            actual: 32768,
            expected: 36864,
            ..
        })
    ));
    // Many opens at once see the same pages.
    let second = far.open(&id, Access::ReadOnly, None).unwrap();
    assert_eq!(read(second.as_ref(), 0, 8).unwrap(), data);
    far.close(&id, second).unwrap();
    far.close(&id, store).unwrap();
}

#[test]
fn test_a_read_only_open_refuses_writes_and_leaves_the_pages() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let id = far.create(name("ro"), 2 * 4096).unwrap();
    let store = far.open(&id, Access::ReadOnly, None).unwrap();
    let e = write(store.as_ref(), 0, &random_pages(1, 1)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(e.to_string().contains("\"ro\" is open read-only"), "{e}");
    assert_eq!(read(store.as_ref(), 0, 2).unwrap(), vec![0; 2 * 4096]);
    far.close(&id, store).unwrap();
}

#[test]
fn test_close_takes_back_its_store_and_refuses_another_ones() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let a = far.create(name("a"), 4096).unwrap();
    let b = far.create(name("b"), 4096).unwrap();
    let store = far.open(&a, Access::ReadWrite, None).unwrap();
    assert!(matches!(
        far.close(&b, store),
        Err(CloseError::Foreign { .. })
    ));
    // A store of another manager of the same server is not this one's.
    let other = server.manager(SECOND);
    let theirs = other.open(&a, Access::ReadWrite, None).unwrap();
    assert!(matches!(
        far.close(&a, theirs),
        Err(CloseError::Foreign { .. })
    ));
    // Nor is an anonymous store.
    let anon = AnonymousManager::new(std::env::temp_dir());
    let n = anon.create(None, 4096).unwrap();
    let s = anon.open(&n, Access::ReadWrite, None).unwrap();
    assert!(matches!(far.close(&a, s), Err(CloseError::Foreign { .. })));
    let store = far.open(&a, Access::ReadWrite, None).unwrap();
    far.close(&a, store).unwrap();
}

#[test]
fn test_delete_removes_every_page_and_the_metadata_and_refuses_an_open_dataspace() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let id = far.create(name("gone"), 200 * 4096).unwrap();
    let keep = far.create(name("kept"), 4096).unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 0, &random_pages(200, 5)).unwrap();
    let ks = far.open(&keep, Access::ReadWrite, None).unwrap();
    write(ks.as_ref(), 0, &random_pages(1, 6)).unwrap();
    far.close(&keep, ks).unwrap();
    let mut raw = server.raw();
    let size: usize = redis::cmd("DBSIZE").query(&mut raw).unwrap();
    // The pages, two metadata keys and two bitmaps of written windows.
    assert_eq!(size, 200 + 1 + 2 + 2);
    assert!(matches!(far.delete(&id), Err(DeleteError::Open(_))));
    far.close(&id, store).unwrap();
    far.delete(&id).unwrap();
    let mut keys: Vec<String> = raw.keys("*").unwrap();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "pp:{kept:0}:0".to_string(),
            "pp:{kept}:meta".to_string(),
            "pp:{kept}:written".to_string()
        ]
    );
    assert!(matches!(far.delete(&id), Err(DeleteError::NoSuch(_))));
    assert!(matches!(
        far.identify(&id),
        Err(pagepilot_dataspace::IdentifyError::NoSuch(_))
    ));
    // The name can be used again, and its pages start as zero.
    let again = far.create(name("gone"), 4096).unwrap();
    let s = far.open(&again, Access::ReadWrite, None).unwrap();
    assert_eq!(read(s.as_ref(), 0, 1).unwrap(), vec![0; 4096]);
}

#[test]
fn test_transfer_hands_the_dataspace_to_a_stacked_manager_and_refuses_others() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let id = far.create(name("moved"), 4 * 4096).unwrap();
    let s = far.open(&id, Access::ReadWrite, None).unwrap();
    let data = random_pages(4, 9);
    write(s.as_ref(), 0, &data).unwrap();
    far.close(&id, s).unwrap();
    // A manager that does not stack: Unsupported, naming the flavour.
    let e = far.transfer(&id, &FileManager).unwrap_err();
    assert_eq!(
        e.unsupported().and_then(|u| u.flavour),
        Some(Flavour::Stacked),
        "{e}"
    );
    // One that does: it serves the same pages from then on.
    let layer = Keep::default();
    let new = far.transfer(&id, &layer).unwrap();
    assert_eq!(new, DataspaceId::Anonymous(0));
    let held = layer.0.lock().unwrap();
    let lower = held.as_ref().unwrap();
    assert_eq!(lower.id, id);
    assert_eq!(lower.stack, vec![far.key()]);
    assert_eq!(read(lower.store.as_ref(), 0, 4).unwrap(), data);
    // It is open (held by the layer): not deleted under it.
    assert!(matches!(far.delete(&id), Err(DeleteError::Open(_))));
    let missing = DataspaceId::Name("missing".into());
    assert!(matches!(
        far.transfer(&missing, &layer),
        Err(TransferError::NoSuch(_))
    ));
}

/// A stacked manager that keeps the one dataspace handed to it.
#[derive(Default)]
struct Keep(std::sync::Mutex<Option<Lower>>);

impl Manager for Keep {
    fn name(&self) -> &'static str {
        "keep"
    }
    fn key(&self) -> pagepilot_dataspace::ManagerKey {
        pagepilot_dataspace::ManagerKey {
            name: "keep",
            instance: u64::MAX,
        }
    }
    fn interrogate(&self) -> pagepilot_dataspace::Capabilities {
        pagepilot_dataspace::Capabilities {
            operations: &[Operation::Transfer],
            flavours: &[Flavour::Stacked],
        }
    }
    fn receive(&self, lower: Lower) -> Result<DataspaceId, TransferError> {
        *self.0.lock().unwrap() = Some(lower);
        Ok(DataspaceId::Anonymous(0))
    }
    fn identify(
        &self,
        _: &DataspaceId,
    ) -> Result<pagepilot_dataspace::Identity, pagepilot_dataspace::IdentifyError> {
        Err(unsupported(Operation::Identify).into())
    }
    fn open(
        &self,
        _: &DataspaceId,
        _: Access,
        _: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        Err(unsupported(Operation::Open).into())
    }
    fn close(&self, _: &DataspaceId, _: Box<dyn PageStore>) -> Result<(), CloseError> {
        Err(unsupported(Operation::Close).into())
    }
    fn create(&self, _: Option<&Path>, _: u64) -> Result<DataspaceId, CreateError> {
        Err(unsupported(Operation::Create).into())
    }
    fn delete(&self, _: &DataspaceId) -> Result<(), DeleteError> {
        Err(unsupported(Operation::Delete).into())
    }
    fn share(
        &self,
        _: &DataspaceId,
        _: Access,
    ) -> Result<pagepilot_dataspace::Share, pagepilot_dataspace::ShareError> {
        Err(unsupported(Operation::Share).into())
    }
    fn copy(
        &self,
        _: &DataspaceId,
        _: Option<&Path>,
    ) -> Result<DataspaceId, pagepilot_dataspace::CopyError> {
        Err(unsupported(Operation::Copy).into())
    }
    fn transfer(&self, _: &DataspaceId, _: &dyn Manager) -> Result<DataspaceId, TransferError> {
        Err(unsupported(Operation::Transfer).into())
    }
}

fn unsupported(operation: Operation) -> Unsupported {
    Unsupported {
        manager: "keep",
        operation,
        flavour: None,
    }
}

/// Performs `op` on a fresh dataspace with valid input: the `Unsupported`
/// answer if it gave one; panics on any other error.
fn answer(far: &RedisManager, op: Operation, n: usize) -> Option<Unsupported> {
    let ds = format!("ds{n}");
    let id = far.create(name(&ds), 4 * 4096).unwrap();
    fn verdict<T, E: MaybeUnsupported + std::fmt::Debug>(r: Result<T, E>) -> Option<Unsupported> {
        match r {
            Ok(_) => None,
            Err(e) => Some(e.unsupported().cloned().unwrap_or_else(|| panic!("{e:?}"))),
        }
    }
    let layer = Keep::default();
    match op {
        Operation::Identify => verdict(far.identify(&id)),
        Operation::Open => verdict(far.open(&id, Access::ReadWrite, None)),
        Operation::Close => verdict(
            far.open(&id, Access::ReadWrite, None)
                .map(|s| far.close(&id, s))
                .unwrap(),
        ),
        Operation::Interrogate => {
            far.interrogate();
            None
        }
        Operation::Create => verdict(far.create(name(&format!("new{n}")), 4096)),
        Operation::Delete => verdict(far.delete(&id)),
        Operation::Share => verdict(far.share(&id, Access::ReadOnly)),
        Operation::Copy => verdict(far.copy(&id, name(&format!("copy{n}")))),
        Operation::Transfer => verdict(far.transfer(&id, &layer)),
    }
}

#[test]
fn test_interrogate_predicts_which_operations_answer_unsupported_and_the_flavours() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let caps = far.interrogate();
    for (n, op) in Operation::ALL.into_iter().enumerate() {
        let got = answer(&far, op, n);
        if caps.supports(op) {
            assert_eq!(got, None, "{op}");
        } else {
            let u = got.unwrap_or_else(|| panic!("{op} is not listed but answered"));
            assert_eq!((u.manager, u.operation), ("redis", op));
        }
    }
    assert!(!caps.supports(Operation::Share) && !caps.supports(Operation::Copy));
    // The flavours: both accesses open; the pages outlive the store
    // (Persistent) and live on another server (Far); nothing stacks on it.
    let id = far.create(name("flavours"), 4096).unwrap();
    for access in [Access::ReadOnly, Access::ReadWrite] {
        assert!(caps.offers(access.flavour()));
        let s = far.open(&id, access, None).unwrap();
        assert!(s.persistent() && caps.offers(Flavour::Persistent));
        far.close(&id, s).unwrap();
    }
    assert!(caps.offers(Flavour::Far));
    assert!(!caps.offers(Flavour::Stacked) && !caps.offers(Flavour::Anonymous));
}

#[test]
fn test_an_unreachable_server_fails_within_the_retry_time_naming_it() {
    let port = free_ports(1);
    let far = RedisManager::new(
        RedisConfig::single(format!("redis://127.0.0.1:{port}"))
            .with_retry_for(Duration::from_millis(300)),
    )
    .unwrap();
    let e = far.create(name("x"), 4096).unwrap_err();
    // What failed, then why (the Redis round trip's reason is the cause).
    let msg = chain(&e).to_string();
    // Within the retry time: its pauses (20 ms, doubling) fit at most five
    // attempts into 300 ms, however slow the machine (a count, not a time).
    let attempts: u32 = msg
        .split("failed after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no attempt count: {msg}"));
    assert!((2..=5).contains(&attempts), "{msg}");
    assert!(
        msg.contains(&format!("127.0.0.1:{port}")) && msg.contains("pp:{x}:meta"),
        "{msg}"
    );
    assert!(far.retries() > 0);
    // A cluster none of whose seeds answers: the same.
    let far = RedisManager::new(
        RedisConfig::cluster(&[format!("127.0.0.1:{port}")])
            .with_retry_for(Duration::from_millis(300)),
    )
    .unwrap();
    let e = far
        .open(&DataspaceId::Name("x".into()), Access::ReadWrite, None)
        .unwrap_err();
    assert!(
        chain(&e)
            .to_string()
            .contains(&format!("redis cluster 127.0.0.1:{port}")),
        "{e}"
    );
}

#[test]
fn test_bad_addresses_windows_and_pools_are_refused() {
    let e = RedisManager::new(RedisConfig::single("http://nowhere")).unwrap_err();
    assert!(
        e.to_string()
            .contains("bad Redis address \"http://nowhere\""),
        "{e}"
    );
    let none: [&str; 0] = [];
    assert!(RedisManager::new(RedisConfig::cluster(&none)).is_err());
    assert!(RedisManager::new(RedisConfig::single("redis://127.0.0.1:1").with_window(0)).is_err());
    assert!(
        RedisManager::new(RedisConfig::single("redis://127.0.0.1:1").with_window(4096)).is_err()
    );
    assert!(
        RedisManager::new(RedisConfig::single("redis://127.0.0.1:1").with_connections(0)).is_err()
    );
}

#[test]
fn test_a_replica_wait_is_refused_for_no_replicas_or_past_the_reply_timeout() {
    let at = || RedisConfig::single("redis://127.0.0.1:1");
    let e = RedisManager::new(at().with_replica_wait(0, Duration::from_millis(100))).unwrap_err();
    assert!(e.to_string().contains("at least one replica"), "{e}");
    let e = RedisManager::new(
        at().with_timeouts(Duration::from_secs(1), Duration::from_millis(200))
            .with_replica_wait(1, Duration::from_millis(200)),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("shorter than the reply timeout"),
        "{e}"
    );
}

#[test]
fn test_a_write_waiting_for_a_replica_a_server_lacks_fails_naming_the_shortfall() {
    let server = Server::start();
    let config = RedisConfig::single(server.url())
        .with_retry_for(Duration::from_millis(300))
        .with_replica_wait(1, Duration::from_millis(50));
    let far = RedisManager::new(config).unwrap();
    // The metadata's write waits too: a server without replicas refuses it.
    let e = far.create(Some("waited".as_ref()), 4096).unwrap_err();
    let cause = std::error::Error::source(&e).map(ToString::to_string);
    assert!(
        cause.is_some_and(|c| c.contains("0 of 1 replica(s) acknowledged")),
        "{e:?}"
    );
    let plain = server.manager(Duration::from_millis(300));
    let id = plain.create(Some("plain".as_ref()), 4096).unwrap();
    // Written once without waiting: the window is known written, and the
    // waited write below goes straight to its page.
    let first = plain.open(&id, Access::ReadWrite, None).unwrap();
    write(first.as_ref(), 0, &[6u8; 4096]).unwrap();
    plain.close(&id, first).unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let e = write(store.as_ref(), 0, &[7u8; 4096]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("writing key"), "{e}");
    assert!(
        e.to_string().contains("0 of 1 replica(s) acknowledged"),
        "{e}"
    );
    far.close(&id, store).unwrap();
}

#[test]
fn test_a_stored_value_of_the_wrong_size_or_bad_metadata_is_an_error_naming_the_key() {
    let server = Server::start();
    let far = server.manager(SECOND);
    let id = far.create(name("bent"), 4 * 4096).unwrap();
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    // The window is written (so its pages are asked for), then page 2 bent.
    write(store.as_ref(), 0, &[0u8; 4096]).unwrap();
    let mut raw = server.raw();
    let _: () = raw.set("pp:{bent:0}:2", vec![7u8; 100]).unwrap();
    let e = read(store.as_ref(), 0, 4).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(
        e.to_string().contains("pp:{bent:0}:2") && e.to_string().contains("100 bytes"),
        "{e}"
    );
    // The other pages still read.
    assert_eq!(read(store.as_ref(), 0, 2).unwrap(), vec![0; 2 * 4096]);
    let _: () = raw
        .set("pp:{garbled}:meta", "pagepilot-far 1 len=-3 window=64")
        .unwrap();
    let e = far
        .open(
            &DataspaceId::Name("garbled".into()),
            Access::ReadWrite,
            None,
        )
        .unwrap_err();
    assert!(
        chain(&e)
            .to_string()
            .contains("pp:{garbled}:meta is not far-dataspace metadata"),
        "{e}"
    );
}

#[test]
fn test_a_dataspace_made_to_wait_for_replicas_makes_every_opener_wait() {
    let server = Server::start();
    let far = RedisManager::new(
        RedisConfig::single(server.url()).with_retry_for(Duration::from_millis(300)),
    )
    .unwrap();
    // Made here: its metadata's write waits, and a lone server has no replica.
    let e = far
        .create_with_replica_wait("durable", 4096, 1, Duration::from_millis(50))
        .unwrap_err();
    assert!(
        chain(&e)
            .to_string()
            .contains("0 of 1 replica(s) acknowledged"),
        "{e}"
    );
    assert!(far
        .create_with_replica_wait("never", 4096, 0, Duration::from_millis(50))
        .is_err());
    assert!(far
        .create_with_replica_wait("never", 4096, 1, Duration::from_secs(5))
        .is_err());
    // Recorded in the metadata (as another process would have made it): a
    // manager configured without a wait opens it and its writes wait.
    let mut raw = server.raw();
    let _: () = raw
        .set(
            "pp:{durable}:meta",
            "pagepilot-far 2 len=4096 window=64 wait=1/50",
        )
        .unwrap();
    let id = DataspaceId::Name("durable".into());
    let store = far.open(&id, Access::ReadWrite, None).unwrap();
    let e = write(store.as_ref(), 0, &[7u8; 4096]).unwrap_err();
    assert!(
        e.to_string().contains("0 of 1 replica(s) acknowledged"),
        "{e}"
    );
    far.close(&id, store).unwrap();
}
