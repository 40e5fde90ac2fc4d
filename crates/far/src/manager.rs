//! The far-memory manager: named dataspaces whose pages live in Redis, on
//! one server or a Redis Cluster.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use pagepilot_dataspace::{
    Access, Capabilities, CloseError, CopyError, CreateError, DataspaceId, DeleteError, Flavour,
    IdentifyError, Identity, Manager, ManagerKey, NoSuch, OpenError, Operation, PageStore, Share,
    ShareError, TransferError, Unsupported, PAGE,
};
use redis::Value;

use crate::config::RedisConfig;
use crate::error::ConfigError;
use crate::keys::{check_name, check_window, meta_key, page_key, written_key, Meta, MAX_LEN};
use crate::link::{Link, ReplicaWait};
use crate::store::{Batching, RedisStore};
use crate::written::WrittenWindows;

/// Serves named dataspaces ([`DataspaceId::Name`]) kept in Redis: `create`
/// stores a metadata key (length, window), `open` hands out a
/// [`RedisStore`] (read-only or read-write; many opens at once), `close`
/// takes it back (writes are complete at the server already), `delete`
/// removes the pages and then the metadata (refused while open here), and
/// `transfer` hands a dataspace to a stacked manager. Share and copy are
/// not supported: there is no descriptor to pass, and a copy would move
/// every page through this process.
#[derive(Debug)]
pub struct RedisManager {
    key: ManagerKey,
    link: Arc<Link>,
    window: usize,
    batching: Batching,
    wait: Option<ReplicaWait>,
    /// Open stores' tokens, by name.
    open: Mutex<HashMap<String, Vec<Weak<()>>>>,
}

fn io_of(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

impl RedisManager {
    /// Its name.
    pub const NAME: &'static str = "redis";

    const CAPABILITIES: Capabilities = Capabilities {
        operations: &[
            Operation::Identify,
            Operation::Open,
            Operation::Close,
            Operation::Interrogate,
            Operation::Create,
            Operation::Delete,
            Operation::Transfer,
        ],
        flavours: &[
            Flavour::ReadOnly,
            Flavour::ReadWrite,
            Flavour::Persistent,
            Flavour::Far,
        ],
    };

    /// A manager connecting as `config` says (no connection is made until
    /// the first operation).
    pub fn new(config: RedisConfig) -> Result<Self, ConfigError> {
        check_window(config.window)?;
        if let Some(w) = config.wait {
            if w.replicas == 0 {
                return Err(ConfigError::NoReplicasToWaitFor);
            }
            if w.timeout >= config.timing.response {
                return Err(ConfigError::WaitBeyondResponse {
                    wait: w.timeout,
                    response: config.timing.response,
                });
            }
        }
        let link = Link::new(config.target, config.timing, config.connections)?;
        Ok(RedisManager {
            key: ManagerKey::fresh(Self::NAME),
            link: Arc::new(link),
            window: config.window,
            batching: config.batching,
            wait: config.wait,
            open: Mutex::default(),
        })
    }

    /// Requests sent so far by the manager and its stores (one round trip
    /// each).
    pub fn round_trips(&self) -> u64 {
        self.link.round_trips()
    }

    /// Requests that failed and were sent again.
    pub fn retries(&self) -> u64 {
        self.link.retries()
    }

    /// One `PING`'s round trip.
    pub fn ping(&self) -> io::Result<Duration> {
        let mut pipe = redis::pipe();
        pipe.cmd("PING");
        let t = Instant::now();
        self.link.request(&pipe, 1, None, &|| "PING".into())?;
        Ok(t.elapsed())
    }

    /// The key of page `page` of dataspace `name` created by this manager.
    pub fn page_key(&self, name: &str, page: usize) -> String {
        page_key(name, self.window, page)
    }

    /// Creates far dataspace `name` of `len` bytes whose every write, by
    /// whoever opens it (this manager, another, another process), counts
    /// as done only once `replicas` replicas of its node acknowledge it
    /// (`WAIT`, up to `timeout` per attempt; see
    /// [`RedisConfig::with_replica_wait`], which does the same for every
    /// dataspace a manager creates). The wait is recorded in the
    /// dataspace's metadata.
    pub fn create_with_replica_wait(
        &self,
        name: &str,
        len: u64,
        replicas: u32,
        timeout: Duration,
    ) -> Result<DataspaceId, CreateError> {
        let refused = |e: ConfigError| CreateError::Io {
            path: PathBuf::from(name),
            source: io_of(e),
        };
        if replicas == 0 {
            return Err(refused(ConfigError::NoReplicasToWaitFor));
        }
        if timeout >= self.link.timing().response {
            return Err(refused(ConfigError::WaitBeyondResponse {
                wait: timeout,
                response: self.link.timing().response,
            }));
        }
        let wait = ReplicaWait { replicas, timeout };
        self.create_waited(Some(Path::new(name)), len, Some(wait))
    }

    /// `create` with `wait` recorded in the dataspace's metadata.
    fn create_waited(
        &self,
        name: Option<&Path>,
        len: u64,
        wait: Option<ReplicaWait>,
    ) -> Result<DataspaceId, CreateError> {
        let Some(path) = name else {
            return Err(CreateError::BadName {
                manager: Self::NAME,
                why: "far dataspaces need a name",
            });
        };
        let name = path.to_str().ok_or(CreateError::BadName {
            manager: Self::NAME,
            why: "the name is not UTF-8",
        })?;
        let io = |source| CreateError::Io {
            path: path.to_owned(),
            source,
        };
        check_name(name).map_err(|e| io(io_of(e)))?;
        if len == 0 {
            return Err(CreateError::Empty {
                manager: Self::NAME,
            });
        }
        if len > MAX_LEN {
            return Err(io(io_of(format!(
                "far dataspace {name:?}: {len} bytes is more than the most, {MAX_LEN}"
            ))));
        }
        let meta = Meta {
            len,
            window: self.window,
            tracks_written: true,
            wait,
        };
        let key = meta_key(name);
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(&key).arg(meta.encode()).arg("NX");
        let what = || format!("creating {key} (far dataspace {name:?})");
        let v = self.link.request(&pipe, 1, None, &what).map_err(io)?;
        if v[0] != Value::Okay {
            // NX and the key exists.
            return Err(CreateError::Exists(path.to_owned()));
        }
        if wait.is_some() {
            // The same value again, now waited for: unlike `NX`, a retry
            // of it (too few replicas yet) answers as the first attempt.
            let mut pipe = redis::pipe();
            pipe.cmd("SET").arg(&key).arg(meta.encode());
            self.link.request(&pipe, 1, wait, &what).map_err(io)?;
        }
        Ok(DataspaceId::Name(name.to_owned()))
    }

    /// The name of a far id, or `no_such(id)`.
    fn name_of<E>(id: &DataspaceId, no_such: impl FnOnce() -> E) -> Result<&str, E> {
        match id {
            DataspaceId::Name(n) if check_name(n).is_ok() => Ok(n),
            _ => Err(no_such()),
        }
    }

    fn no_such(id: &DataspaceId) -> NoSuch {
        NoSuch {
            manager: Self::NAME,
            id: id.clone(),
        }
    }

    fn unsupported(operation: Operation, flavour: Option<Flavour>) -> Unsupported {
        Unsupported {
            manager: Self::NAME,
            operation,
            flavour,
        }
    }

    /// The metadata of `name` (`None`: no such dataspace).
    fn meta(&self, name: &str) -> io::Result<Option<Meta>> {
        let key = meta_key(name);
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(&key);
        let what = || format!("reading {key} (far dataspace {name:?})");
        let v = self.link.request(&pipe, 1, None, &what)?;
        self.decode_meta(name, &v[0])
    }

    /// The metadata of `name` and, if it records them, its written
    /// windows: one round trip (the two keys share a hash tag).
    fn meta_and_written(&self, name: &str) -> io::Result<Option<(Meta, Option<WrittenWindows>)>> {
        let (key, bitmap_key) = (meta_key(name), written_key(name));
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(&key).cmd("GET").arg(&bitmap_key);
        let what = || format!("reading {key} and {bitmap_key} (far dataspace {name:?})");
        let v = self.link.request(&pipe, 2, None, &what)?;
        let Some(meta) = self.decode_meta(name, &v[0])? else {
            return Ok(None);
        };
        if !meta.tracks_written {
            return Ok(Some((meta, None)));
        }
        let windows = (meta.len as usize).div_ceil(PAGE).div_ceil(meta.window);
        let bitmap: &[u8] = match &v[1] {
            Value::Nil => &[],
            Value::BulkString(b) => b,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: {bitmap_key}: not a bitmap: {other:?}",
                        self.link.target()
                    ),
                ))
            }
        };
        Ok(Some((
            meta,
            Some(WrittenWindows::from_bitmap(bitmap, windows)),
        )))
    }

    /// The metadata in the reply `v` to a `GET` of `name`'s key.
    fn decode_meta(&self, name: &str, v: &Value) -> io::Result<Option<Meta>> {
        let key = meta_key(name);
        match v {
            Value::Nil => Ok(None),
            Value::BulkString(b) => Meta::decode(b).map(Some).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: {key} is not far-dataspace metadata: {:?}",
                        self.link.target(),
                        String::from_utf8_lossy(b)
                    ),
                )
            }),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {key}: unexpected reply {other:?}", self.link.target()),
            )),
        }
    }

    fn is_open(&self, name: &str) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, tokens| {
            tokens.retain(|t| t.strong_count() > 0);
            !tokens.is_empty()
        });
        open.contains_key(name)
    }
}

impl Manager for RedisManager {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn key(&self) -> ManagerKey {
        self.key
    }

    fn interrogate(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let name = Self::name_of(id, || Self::no_such(id))?;
        let io = |source| IdentifyError::Io {
            path: PathBuf::from(name),
            source,
        };
        let meta = self
            .meta(name)
            .map_err(io)?
            .ok_or_else(|| Self::no_such(id))?;
        Ok(Identity {
            id: id.clone(),
            manager: Self::NAME,
            len: meta.len,
            inode: None,
        })
    }

    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        let name = Self::name_of(id, || Self::no_such(id))?;
        let io = |source| OpenError::Io {
            path: PathBuf::from(name),
            source,
        };
        let (meta, written) = self
            .meta_and_written(name)
            .map_err(io)?
            .ok_or_else(|| Self::no_such(id))?;
        if let Some(want) = at_least.filter(|&w| w > meta.len) {
            return Err(OpenError::Short {
                id: id.clone(),
                actual: meta.len,
                expected: want,
            });
        }
        let alive = Arc::new(());
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.to_owned())
            .or_default()
            .push(Arc::downgrade(&alive));
        Ok(Box::new(RedisStore {
            link: self.link.clone(),
            owner: self.key,
            name: name.to_owned(),
            len: meta.len,
            window: meta.window,
            writable: access == Access::ReadWrite,
            batching: self.batching,
            // The dataspace's own wait, else the manager's.
            wait: meta.wait.or(self.wait),
            written,
            _alive: alive,
        }))
    }

    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError> {
        let foreign = || CloseError::Foreign {
            manager: Self::NAME,
            id: id.clone(),
        };
        let store = store
            .into_any()
            .downcast::<RedisStore>()
            .map_err(|_| foreign())?;
        match id {
            DataspaceId::Name(n) if *n == store.name && store.owner == self.key => Ok(()),
            _ => Err(foreign()),
        }
    }

    fn create(&self, name: Option<&Path>, len: u64) -> Result<DataspaceId, CreateError> {
        self.create_waited(name, len, self.wait)
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let name = Self::name_of(id, || Self::no_such(id))?;
        let io = |source| DeleteError::Io {
            path: PathBuf::from(name),
            source,
        };
        let meta = self
            .meta(name)
            .map_err(io)?
            .ok_or_else(|| Self::no_such(id))?;
        if self.is_open(name) {
            return Err(DeleteError::Open(id.clone()));
        }
        // The pages first, a window per request, then the metadata: a
        // delete cut short leaves a dataspace to delete again, never pages
        // a later dataspace of the name would find.
        let pages = (meta.len as usize).div_ceil(PAGE);
        for (first, n) in crate::keys::pieces(0, pages, meta.window) {
            let mut pipe = redis::pipe();
            let cmd = pipe.cmd("UNLINK");
            for p in first..first + n {
                cmd.arg(page_key(name, meta.window, p));
            }
            let what = || {
                format!(
                    "deleting pages {first}..{} of far dataspace {name:?}",
                    first + n
                )
            };
            self.link.request(&pipe, 1, None, &what).map_err(io)?;
        }
        // Then the record of written windows with the metadata (one slot):
        // none is left for a later dataspace of the name.
        let key = meta_key(name);
        let mut pipe = redis::pipe();
        pipe.cmd("UNLINK").arg(written_key(name)).arg(&key);
        let what = || format!("deleting {key} (far dataspace {name:?})");
        self.link.request(&pipe, 1, None, &what).map_err(io)?;
        Ok(())
    }

    fn share(&self, _: &DataspaceId, _: Access) -> Result<Share, ShareError> {
        Err(Self::unsupported(Operation::Share, None).into())
    }

    fn copy(&self, _: &DataspaceId, _: Option<&Path>) -> Result<DataspaceId, CopyError> {
        Err(Self::unsupported(Operation::Copy, None).into())
    }

    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        pagepilot_dataspace::hand_over(self, id, to)
    }
}
