//! The persistent manager: named dataspaces whose contents outlive the
//! process, kept in a directory (layout: `persistent_files.rs`, and
//! `docs/dataspaces.md`), reopened by name by any later process.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{
    CloseError, CopyError, Corrupt, CreateError, DeleteError, IdentifyError, InvalidName, NoSuch,
    OpenError, ShareError, TransferError,
};
use crate::manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
use crate::persistent_files::{self as files, check_name, Files, Lookup};
use crate::{FileStore, ManagerKey, PageStore};

/// Serves persistent dataspaces, named ([`DataspaceId::Name`]) and kept in
/// a directory: `create` makes one of a length (zero-filled, sparse),
/// `open` hands out its page store (read-write: one open at a time, by any
/// process; read-only: many), written incrementally (the pages written
/// back, each to its place in the data file; `sync`, so `close` and a
/// region's flush, fdatasyncs them), identify, delete, copy (a new name,
/// the same bytes), share (a descriptor of the data file) and transfer
/// (stacking: the dataspace handed to a manager that takes it, such as an
/// [`crate::AnonymousManager`], which then serves it with its own
/// semantics over the persistent store: SawMill's persistence by a
/// persistent dataspace inserted below another).
///
/// Opens are exclusive across processes (`flock` on the data file): a
/// second read-write open, here or in another process, answers
/// [`OpenError::Busy`]; so does opening a dataspace transferred away while
/// the manager holding it keeps it open. A damaged header or data file
/// answers `Corrupt`, naming the file.
#[derive(Debug)]
pub struct PersistentManager {
    key: ManagerKey,
    dir: PathBuf,
}

/// An open persistent dataspace: the data file, with the lock that makes
/// the open exclusive.
pub struct PersistentStore {
    pages: FileStore,
    /// Holds the `flock` (exclusive for read-write opens) until dropped.
    _lock: File,
    dir: PathBuf,
    name: String,
}

impl PersistentManager {
    /// Its name.
    pub const NAME: &'static str = "persistent";

    const CAPABILITIES: Capabilities = Capabilities {
        operations: &Operation::ALL,
        flavours: &[Flavour::ReadOnly, Flavour::ReadWrite, Flavour::Persistent],
    };

    /// A manager of the dataspaces in `dir` (made at the first `create`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        PersistentManager {
            key: ManagerKey::fresh(Self::NAME),
            dir: dir.into(),
        }
    }

    /// The default directory: `$PAGEPILOT_HOME/dataspaces`, else
    /// `$XDG_DATA_HOME/pagepilot/dataspaces`, else
    /// `$HOME/.local/share/pagepilot/dataspaces` (`None`: none is set).
    pub fn default_dir() -> Option<PathBuf> {
        let var = |v| {
            std::env::var_os(v)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        };
        var("PAGEPILOT_HOME")
            .map(|h| h.join("dataspaces"))
            .or_else(|| var("XDG_DATA_HOME").map(|d| d.join("pagepilot/dataspaces")))
            .or_else(|| var("HOME").map(|h| h.join(".local/share/pagepilot/dataspaces")))
    }

    /// A manager of the default directory ([`Self::default_dir`]).
    pub fn at_default() -> Option<Self> {
        Self::default_dir().map(Self::new)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates dataspace `name` of `len` zero bytes (the trait's `create`
    /// with the name as a string).
    pub fn create_named(&self, name: &str, len: u64) -> Result<DataspaceId, CreateError> {
        check_name(Self::NAME, name)?;
        if len == 0 {
            return Err(CreateError::Empty {
                manager: Self::NAME,
            });
        }
        let f = Files::new(&self.dir, name);
        files::make(&f, len, None).map_err(|(path, source)| match source.kind() {
            io::ErrorKind::AlreadyExists => CreateError::Exists(f.meta.clone()),
            _ => CreateError::Io { path, source },
        })?;
        Ok(DataspaceId::Name(name.into()))
    }

    /// The names of the dataspaces in the directory, sorted (none if it
    /// does not exist yet).
    pub fn names(&self) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for e in entries {
            let file = e?.file_name();
            let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".meta")) else {
                continue;
            };
            if check_name(Self::NAME, name).is_ok() {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// `id`'s name, checked, and its files.
    fn files(&self, id: &DataspaceId) -> Result<(String, Files), Named> {
        match id {
            DataspaceId::Name(n) => {
                check_name(Self::NAME, n)?;
                Ok((n.clone(), Files::new(&self.dir, n)))
            }
            other => Err(Named::NoSuch(NoSuch {
                manager: Self::NAME,
                id: other.clone(),
            })),
        }
    }

    /// `id`'s files and length.
    fn lookup(&self, id: &DataspaceId) -> Result<(String, Files, u64), Named> {
        let (name, f) = self.files(id)?;
        let len = files::read_len(&f).map_err(|e| match e {
            Lookup::Missing => Named::NoSuch(NoSuch {
                manager: Self::NAME,
                id: id.clone(),
            }),
            Lookup::Corrupt(c) => Named::Corrupt(c),
            Lookup::Io(path, source) => Named::Io(path, source),
        })?;
        Ok((name, f, len))
    }
}

/// What looking a name up may answer, before it becomes an operation's error.
enum Named {
    Invalid(InvalidName),
    NoSuch(NoSuch),
    Corrupt(Corrupt),
    Io(PathBuf, io::Error),
}

impl From<InvalidName> for Named {
    fn from(e: InvalidName) -> Self {
        Named::Invalid(e)
    }
}

macro_rules! from_named {
    ($($t:ident),*) => {$(
        impl From<Named> for $t {
            fn from(e: Named) -> Self {
                match e {
                    Named::Invalid(e) => $t::InvalidName(e),
                    Named::NoSuch(e) => $t::NoSuch(e),
                    Named::Corrupt(e) => $t::Corrupt(e),
                    Named::Io(path, source) => $t::Io { path, source },
                }
            }
        }
    )*};
}

from_named!(IdentifyError, OpenError, ShareError, CopyError);

impl From<Named> for DeleteError {
    fn from(e: Named) -> Self {
        match e {
            Named::Invalid(e) => DeleteError::InvalidName(e),
            Named::NoSuch(e) => DeleteError::NoSuch(e),
            Named::Corrupt(Corrupt { path, why }) => DeleteError::Io {
                path,
                source: io::Error::new(io::ErrorKind::InvalidData, why),
            },
            Named::Io(path, source) => DeleteError::Io { path, source },
        }
    }
}

/// A new descriptor of `path` locked with `flock` (exclusive or shared);
/// `Ok(None)` if another open holds a conflicting lock.
fn locked(path: &Path, exclusive: bool) -> io::Result<Option<File>> {
    let f = File::open(path)?;
    Ok(crate::sys::try_flock(&f, exclusive)?.then_some(f))
}

impl Manager for PersistentManager {
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
        let (_, f, len) = self.lookup(id)?;
        let inode = std::fs::metadata(&f.data).ok().map(|m| m.ino());
        Ok(Identity {
            id: id.clone(),
            manager: Self::NAME,
            len,
            inode,
        })
    }

    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        let (name, f, len) = self.lookup(id)?;
        if let Some(want) = at_least.filter(|&w| w > len) {
            return Err(OpenError::Short {
                id: id.clone(),
                actual: len,
                expected: want,
            });
        }
        let io = |source| OpenError::Io {
            path: f.data.clone(),
            source,
        };
        let writable = access == Access::ReadWrite;
        let lock = locked(&f.data, writable)
            .map_err(io)?
            .ok_or_else(|| OpenError::Busy(id.clone()))?;
        let pages = FileStore::open(&f.data, writable, None)?;
        Ok(Box::new(PersistentStore {
            pages,
            _lock: lock,
            dir: self.dir.clone(),
            name,
        }))
    }

    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError> {
        let foreign = || CloseError::Foreign {
            manager: Self::NAME,
            id: id.clone(),
        };
        let store = store
            .into_any()
            .downcast::<PersistentStore>()
            .map_err(|_| foreign())?;
        if *id != DataspaceId::Name(store.name.clone()) || store.dir != self.dir {
            return Err(foreign());
        }
        store.pages.sync().map_err(|source| CloseError::Sync {
            id: id.clone(),
            source,
        })
    }

    fn create(&self, name: Option<&Path>, len: u64) -> Result<DataspaceId, CreateError> {
        let name = name.ok_or(CreateError::BadName {
            manager: Self::NAME,
            why: "a persistent dataspace needs a name",
        })?;
        let name = name.to_str().ok_or_else(|| InvalidName {
            manager: Self::NAME,
            name: name.to_string_lossy().into(),
            why: "a name must be UTF-8",
        })?;
        self.create_named(name, len)
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let (_, f) = self.files(id)?;
        if !f.meta.exists() {
            return Err(DeleteError::NoSuch(NoSuch {
                manager: Self::NAME,
                id: id.clone(),
            }));
        }
        // Held while the files go: no open can start meanwhile.
        let _lock = match locked(&f.data, true) {
            Ok(Some(l)) => Some(l),
            Ok(None) => return Err(DeleteError::Open(id.clone())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(DeleteError::Io {
                    path: f.data,
                    source,
                })
            }
        };
        let gone = |path: &Path| match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(DeleteError::Io {
                path: path.into(),
                source: e,
            }),
            _ => Ok(()),
        };
        gone(&f.meta)?;
        gone(&f.data)?;
        let _ = files::sync_dir(&self.dir);
        Ok(())
    }

    fn share(&self, id: &DataspaceId, access: Access) -> Result<Share, ShareError> {
        let (_, f, _) = self.lookup(id)?;
        let handle = OpenOptions::new()
            .read(true)
            .write(access == Access::ReadWrite)
            .open(&f.data)
            .map_err(|source| ShareError::Io {
                path: f.data.clone(),
                source,
            })?;
        Ok(Share {
            id: id.clone(),
            access,
            handle,
        })
    }

    fn copy(&self, id: &DataspaceId, to: Option<&Path>) -> Result<DataspaceId, CopyError> {
        let (_, f, len) = self.lookup(id)?;
        let to = to.ok_or(CreateError::BadName {
            manager: Self::NAME,
            why: "a copy needs a name",
        })?;
        let to = to.to_str().ok_or_else(|| InvalidName {
            manager: Self::NAME,
            name: to.to_string_lossy().into(),
            why: "a name must be UTF-8",
        })?;
        check_name(Self::NAME, to).map_err(CreateError::from)?;
        let from = File::open(&f.data).map_err(|source| CopyError::Io {
            path: f.data.clone(),
            source,
        })?;
        let dst = Files::new(&self.dir, to);
        files::make(&dst, len, Some(&from)).map_err(|(path, source)| match source.kind() {
            io::ErrorKind::AlreadyExists => CreateError::Exists(dst.meta.clone()).into(),
            _ => CopyError::Io { path, source },
        })?;
        Ok(DataspaceId::Name(to.into()))
    }

    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        crate::hand_over(self, id, to)
    }
}

impl PersistentStore {
    /// The dataspace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PersistentStore {
    fn drop(&mut self) {
        // Dropped without `close` (a stacked manager gave it up): what was
        // written is made durable all the same.
        let _ = self.pages.sync();
    }
}

impl PageStore for PersistentStore {
    crate::store::forward_pages!(self => self.pages);

    fn persistent(&self) -> bool {
        true
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
