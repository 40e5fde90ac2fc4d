//! The file manager: dataspaces are regular files, named by path.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, NoSuch, OpenError, ShareError,
    TransferError,
};
use crate::manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
use crate::{sys, FileStore, ManagerKey, PageStore};

/// Serves files as dataspaces: open read-only or read-write, identify
/// (path, length, inode), create (a new file of a length), delete
/// (unlink), copy (`copy_file_range` into a new file), share (another
/// descriptor of the file). Transfer is not supported yet (stacking).
///
/// Deleting a file that is open unlinks it; the open stores keep reading
/// and writing the unlinked file until closed, as Unix descriptors do.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileManager;

impl FileManager {
    /// Its name.
    pub const NAME: &'static str = "file";

    const CAPABILITIES: Capabilities = Capabilities {
        operations: &[
            Operation::Identify,
            Operation::Open,
            Operation::Close,
            Operation::Interrogate,
            Operation::Create,
            Operation::Delete,
            Operation::Share,
            Operation::Copy,
            Operation::Transfer,
        ],
        flavours: &[Flavour::ReadOnly, Flavour::ReadWrite, Flavour::Persistent],
    };
}

/// The path of `id`, or `no_such(id)` for an id that is not a path.
fn path_of<E>(id: &DataspaceId, no_such: impl FnOnce(DataspaceId) -> E) -> Result<&Path, E> {
    match id {
        DataspaceId::Path(p) => Ok(p),
        other => Err(no_such(other.clone())),
    }
}

/// A new file at `path` (not there before) of `len` bytes, sparse.
fn create_file(path: &Path, len: u64) -> Result<File, CreateError> {
    let io = |source: io::Error| match source.kind() {
        io::ErrorKind::AlreadyExists => CreateError::Exists(path.into()),
        _ => CreateError::Io {
            path: path.into(),
            source,
        },
    };
    if len == 0 {
        return Err(CreateError::Empty {
            manager: FileManager::NAME,
        });
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io)?;
    if let Err(e) = f.set_len(len) {
        let _ = std::fs::remove_file(path);
        return Err(io(e));
    }
    Ok(f)
}

impl Manager for FileManager {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn key(&self) -> ManagerKey {
        // Stateless: every instance serves the same files.
        ManagerKey {
            name: Self::NAME,
            instance: 0,
        }
    }

    fn interrogate(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let no_such = |id| {
            IdentifyError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let path = path_of(id, no_such)?;
        let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => no_such(id.clone()),
            _ => IdentifyError::Io {
                path: path.into(),
                source,
            },
        })?;
        if !meta.is_file() {
            return Err(IdentifyError::NotAFile(path.into()));
        }
        Ok(Identity {
            id: id.clone(),
            manager: Self::NAME,
            len: meta.len(),
            inode: Some(meta.ino()),
        })
    }

    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        let path = path_of(id, |id| {
            OpenError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        })?;
        let store = FileStore::open(path, access == Access::ReadWrite, at_least)?;
        Ok(Box::new(store))
    }

    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError> {
        let foreign = || CloseError::Foreign {
            manager: Self::NAME,
            id: id.clone(),
        };
        path_of(id, |_| foreign())?;
        let store = store
            .into_any()
            .downcast::<FileStore>()
            .map_err(|_| foreign())?;
        store.sync().map_err(|source| CloseError::Sync {
            id: id.clone(),
            source,
        })
    }

    fn create(&self, name: Option<&Path>, len: u64) -> Result<DataspaceId, CreateError> {
        let path = name.ok_or(CreateError::BadName {
            manager: Self::NAME,
            why: "a file needs a path",
        })?;
        create_file(path, len)?;
        Ok(DataspaceId::Path(path.into()))
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let no_such = |id| {
            DeleteError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let path = path_of(id, no_such)?;
        std::fs::remove_file(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => no_such(id.clone()),
            _ => DeleteError::Io {
                path: path.into(),
                source,
            },
        })
    }

    fn share(&self, id: &DataspaceId, access: Access) -> Result<Share, ShareError> {
        let no_such = |id| {
            ShareError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let path = path_of(id, no_such)?;
        let handle = OpenOptions::new()
            .read(true)
            .write(access == Access::ReadWrite)
            .open(path)
            .map_err(|source| match source.kind() {
                io::ErrorKind::NotFound => no_such(id.clone()),
                _ => ShareError::Io {
                    path: path.into(),
                    source,
                },
            })?;
        Ok(Share {
            id: id.clone(),
            access,
            handle,
        })
    }

    fn copy(&self, id: &DataspaceId, to: Option<&Path>) -> Result<DataspaceId, CopyError> {
        let no_such = |id| {
            CopyError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let path = path_of(id, no_such)?;
        let to: PathBuf = to
            .ok_or(CreateError::BadName {
                manager: Self::NAME,
                why: "a copy of a file needs a path",
            })?
            .into();
        let from = File::open(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => no_such(id.clone()),
            _ => CopyError::Io {
                path: path.into(),
                source,
            },
        })?;
        let len = from
            .metadata()
            .map_err(|source| CopyError::Io {
                path: path.into(),
                source,
            })?
            .len();
        let dst = create_file(&to, len)?;
        sys::copy_range(&from, &dst, len).map_err(|source| {
            let _ = std::fs::remove_file(&to);
            CopyError::Io {
                path: to.clone(),
                source,
            }
        })?;
        Ok(DataspaceId::Path(to))
    }

    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        crate::hand_over(self, id, to)
    }
}
