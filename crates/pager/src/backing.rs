//! What a region is backed by, and opening it: the pager asks the
//! dataspace managers of `pagepilot-dataspace` (a [`FileManager`] for a
//! file, an [`AnonymousManager`] for anonymous memory) for the page store
//! its faults are served from.

use std::path::PathBuf;

use pagepilot_dataspace::{
    Access, AnonymousManager, CreateError, DataspaceId, FileManager, Manager, NoSuch, OpenError,
    PageStore,
};

use crate::error::MapError;

/// What a region is backed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A file, mapped read-only or read-write.
    File {
        /// The file.
        path: PathBuf,
        /// Whether the application may write (dirty pages are written back).
        writable: bool,
    },
    /// Zero-filled memory of `len` bytes, spilled to a swap file of pagepilot's own.
    Anonymous {
        /// Length in bytes.
        len: usize,
    },
}

impl Backing {
    /// Opens the dataspace through its manager: the page store and whether
    /// the application may write. `want` is the least
    /// length of a file; `swap_dir` holds an anonymous region's swap file.
    pub(crate) fn open(
        &self,
        want: Option<usize>,
        swap_dir: Option<&std::path::Path>,
    ) -> Result<(Box<dyn PageStore>, bool), MapError> {
        match self {
            Backing::File { path, writable } => {
                let id = DataspaceId::Path(path.clone());
                let access = Access::writable(*writable);
                let store = FileManager
                    .open(&id, access, want.map(|w| w as u64))
                    .map_err(map_open)?;
                Ok((store, *writable))
            }
            Backing::Anonymous { len } => {
                let dir = swap_dir.map_or_else(std::env::temp_dir, Into::into);
                // A manager of the region's own: the store outlives it and
                // takes its dataspace with it when the region goes.
                let anon = AnonymousManager::new(&dir);
                let swap = |source| MapError::Swap { dir, source };
                let id = anon.create(None, *len as u64).map_err(|e| match e {
                    CreateError::Io { source, .. } => swap(source),
                    e => swap(std::io::Error::other(e)),
                })?;
                let store = anon.open(&id, Access::ReadWrite, None)?;
                Ok((store, true))
            }
        }
    }
}

/// The pager's error for a file the file manager would not open.
fn map_open(e: OpenError) -> MapError {
    match e {
        OpenError::NoSuch(NoSuch {
            id: DataspaceId::Path(p),
            ..
        }) => MapError::MissingFile(p),
        OpenError::NotAFile(p) => MapError::NotAFile(p),
        OpenError::Empty(p) => MapError::EmptyFile(p),
        OpenError::Short {
            id: DataspaceId::Path(path),
            actual,
            expected,
        } => MapError::ShortFile {
            path,
            actual,
            expected,
        },
        OpenError::ReadOnly(p) => MapError::ReadOnly(p),
        OpenError::Io { path, source } => MapError::Open { path, source },
        e => MapError::Dataspace(e),
    }
}
