//! Typed errors, one enum per manager operation. Each has an
//! `Unsupported` variant: what a manager answers for an operation or
//! flavour its `interrogate` does not list.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::manager::{DataspaceId, Flavour, Operation};

/// An operation, or a flavour of one, the manager does not support.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("the {manager} manager does not support {operation}{}", flavour.map(|f| format!(" {f:?}")).unwrap_or_default())]
pub struct Unsupported {
    /// The manager.
    pub manager: &'static str,
    /// The operation.
    pub operation: Operation,
    /// The flavour asked for, where the operation is supported but not it.
    pub flavour: Option<Flavour>,
}

/// The manager has no dataspace of that id (no such file; an unknown
/// number; an id of another manager's kind).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{manager}: no dataspace {id}")]
pub struct NoSuch {
    /// The manager.
    pub manager: &'static str,
    /// The id asked for.
    pub id: DataspaceId,
}

/// A dataspace name the manager refuses (a persistent dataspace's name
/// becomes a file name: no `/`, no leading `.`, not empty, bounded).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{manager}: bad dataspace name {name:?}: {why}")]
pub struct InvalidName {
    /// The manager.
    pub manager: &'static str,
    /// The name given.
    pub name: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// A dataspace whose files do not hold what the manager wrote (a header
/// truncated or overwritten, a data file of the wrong length).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{} is corrupt: {why}", path.display())]
pub struct Corrupt {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: String,
}

/// Errors that may say `Unsupported`.
pub trait MaybeUnsupported {
    /// The `Unsupported` answer, if this is one.
    fn unsupported(&self) -> Option<&Unsupported>;
}

macro_rules! maybe_unsupported {
    ($($t:ty),*) => {$(
        impl MaybeUnsupported for $t {
            fn unsupported(&self) -> Option<&Unsupported> {
                match self {
                    Self::Unsupported(u) => Some(u),
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    )*};
}

maybe_unsupported!(
    IdentifyError,
    OpenError,
    CloseError,
    CreateError,
    DeleteError,
    ShareError,
    CopyError,
    TransferError
);

/// Why `identify` failed.
#[derive(Debug, Error)]
pub enum IdentifyError {
    /// Not supported.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The manager has no such dataspace (no such file; an unknown id).
    #[error(transparent)]
    NoSuch(#[from] NoSuch),
    /// The path is not a regular file.
    #[error("{0} is not a regular file")]
    NotAFile(PathBuf),
    /// The system refused.
    #[error("cannot identify {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The name is not one the manager accepts.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// The dataspace's files are damaged.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

/// Why `open` failed.
#[derive(Debug, Error)]
pub enum OpenError {
    /// Not supported (or not this access).
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The manager has no such dataspace (no such file; an unknown id).
    #[error(transparent)]
    NoSuch(#[from] NoSuch),
    /// The path is not a regular file.
    #[error("{0} is not a regular file")]
    NotAFile(PathBuf),
    /// The file is empty: there is nothing to page.
    #[error("{0} is empty")]
    Empty(PathBuf),
    /// The dataspace is shorter than asked for.
    #[error("{id} has {actual} bytes, {expected} were asked for")]
    Short {
        /// The dataspace.
        id: DataspaceId,
        /// Its length.
        actual: u64,
        /// The length asked for.
        expected: u64,
    },
    /// Read-write access to a read-only file was asked for.
    #[error("{0} is read-only but read-write access was asked for")]
    ReadOnly(PathBuf),
    /// The dataspace is open already and opens are exclusive.
    #[error("{0} is open already")]
    Busy(DataspaceId),
    /// The system refused.
    #[error("cannot open {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The name is not one the manager accepts.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// The dataspace's files are damaged.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

/// Why `close` failed.
#[derive(Debug, Error)]
pub enum CloseError {
    /// Not supported.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The store was not opened from this id by this manager.
    #[error("{manager}: the store closed is not an open {id}")]
    Foreign {
        /// The manager.
        manager: &'static str,
        /// The id given.
        id: DataspaceId,
    },
    /// Completed writes could not be made durable.
    #[error("closing {id}: sync failed")]
    Sync {
        /// The dataspace.
        id: DataspaceId,
        /// The system's reason.
        source: io::Error,
    },
}

/// Why `create` failed.
#[derive(Debug, Error)]
pub enum CreateError {
    /// Not supported.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The name given does not suit the manager (missing, or given to one
    /// that names its dataspaces itself).
    #[error("{manager}: create: {why}")]
    BadName {
        /// The manager.
        manager: &'static str,
        /// What was wrong.
        why: &'static str,
    },
    /// A dataspace of no bytes was asked for.
    #[error("{manager}: create: a dataspace of 0 bytes")]
    Empty {
        /// The manager.
        manager: &'static str,
    },
    /// The name is taken.
    #[error("cannot create {0}: it exists")]
    Exists(PathBuf),
    /// The system refused (for anonymous dataspaces `path` is the swap directory).
    #[error("cannot create {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The name is not one the manager accepts.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
}

/// Why `delete` failed.
#[derive(Debug, Error)]
pub enum DeleteError {
    /// Not supported.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The manager has no such dataspace (no such file; an unknown id).
    #[error(transparent)]
    NoSuch(#[from] NoSuch),
    /// The dataspace is open: close it first.
    #[error("cannot delete {0}: it is open")]
    Open(DataspaceId),
    /// The system refused.
    #[error("cannot delete {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The name is not one the manager accepts.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
}

/// Why `share` failed.
#[derive(Debug, Error)]
pub enum ShareError {
    /// Not supported (or not this access).
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The manager has no such dataspace (no such file; an unknown id).
    #[error(transparent)]
    NoSuch(#[from] NoSuch),
    /// The system refused the handle.
    #[error("cannot share {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The name is not one the manager accepts.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// The dataspace's files are damaged.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

/// Why `copy` failed.
#[derive(Debug, Error)]
pub enum CopyError {
    /// Not supported.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The manager has no such dataspace (no such file; an unknown id).
    #[error(transparent)]
    NoSuch(#[from] NoSuch),
    /// The copy could not be created.
    #[error(transparent)]
    Create(#[from] CreateError),
    /// The dataspace to copy could not be opened (from its manager, which
    /// is named).
    #[error("cannot copy {id}: the {manager} manager cannot open it")]
    Open {
        /// The dataspace to copy.
        id: DataspaceId,
        /// Its manager.
        manager: &'static str,
        /// Why.
        source: Box<OpenError>,
    },
    /// The dataspace is open and a copy would have to freeze it.
    #[error("{manager}: cannot copy {id}: it is open")]
    Busy {
        /// The manager.
        manager: &'static str,
        /// The dataspace.
        id: DataspaceId,
    },
    /// The copy would read through more layers than
    /// [`crate::MAX_STACK_DEPTH`].
    #[error("{manager}: cannot copy {id}: the copy would read through {depth} layers, at most {} are allowed", crate::MAX_STACK_DEPTH)]
    TooDeep {
        /// The manager.
        manager: &'static str,
        /// The dataspace.
        id: DataspaceId,
        /// The depth the copy would have.
        depth: usize,
    },
    /// The bytes could not be copied (`path` is the copy, removed again).
    #[error("cannot copy into {path}")]
    Io {
        /// The copy.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// The name is not one the manager accepts.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// The dataspace's files are damaged.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

/// Why `transfer` failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TransferError {
    /// Not supported (by the manager handing over, or, with flavour
    /// `Stacked`, by the one receiving).
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The manager handing over has no such dataspace.
    #[error(transparent)]
    NoSuch(#[from] NoSuch),
    /// The receiving manager is already in the dataspace's stack.
    #[error("cannot transfer {id} to the {to}: it is already stacked on it (stack, bottom first: {})", .stack.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "))]
    Cycle {
        /// The dataspace.
        id: DataspaceId,
        /// The manager it was to go to.
        to: crate::ManagerKey,
        /// Its stack, bottom first.
        stack: Vec<crate::ManagerKey>,
    },
    /// The stack would be deeper than [`crate::MAX_STACK_DEPTH`].
    #[error(
        "cannot transfer {id}: the stack would be {depth} managers deep, at most {} are allowed",
        crate::MAX_STACK_DEPTH
    )]
    TooDeep {
        /// The dataspace.
        id: DataspaceId,
        /// The depth it would have.
        depth: usize,
    },
    /// The dataspace could not be opened to be handed over (it is open, or
    /// its store failed).
    #[error("cannot transfer {id}")]
    Open {
        /// The dataspace.
        id: DataspaceId,
        /// Why.
        source: Box<OpenError>,
    },
    /// The receiving manager could not take it over.
    #[error("the {manager} manager cannot take over {id}")]
    Io {
        /// The receiving manager.
        manager: &'static str,
        /// The dataspace.
        id: DataspaceId,
        /// Why.
        source: io::Error,
    },
    /// The receiving manager's quota cannot take the dataspace (a pinned
    /// manager: bytes it may pin).
    #[error("the {manager} manager cannot take {id}: {asked} bytes asked, {left} of its quota of {quota} left")]
    Quota {
        /// The receiving manager.
        manager: &'static str,
        /// The dataspace.
        id: DataspaceId,
        /// Its length, in whole pages.
        asked: u64,
        /// The quota left.
        left: u64,
        /// The whole quota.
        quota: u64,
    },
}
