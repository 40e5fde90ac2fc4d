//! SawMill's dataspace-manager interface: the operations every manager
//! answers (identify, open, close, interrogate) and the optional ones
//! (create, delete, share, copy, transfer), which a manager that lacks them
//! answers [`Unsupported`](crate::Unsupported) as its
//! [`interrogate`](Manager::interrogate) predicts.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, OpenError, ShareError,
    TransferError,
};
use crate::stack::{Lower, ManagerKey};
use crate::PageStore;

/// A dataspace's name within its manager: a file's path, or the number an
/// anonymous manager gave it at `create`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DataspaceId {
    /// A file, by path.
    Path(PathBuf),
    /// An anonymous dataspace, by the number its manager gave it (also
    /// the ids of the layered managers' dataspaces: numbers within the
    /// process).
    Anonymous(u64),
    /// A dataspace by name (a persistent one, one in far memory).
    Name(String),
}

impl fmt::Display for DataspaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataspaceId::Path(p) => write!(f, "{}", p.display()),
            DataspaceId::Anonymous(n) => write!(f, "anonymous dataspace {n}"),
            DataspaceId::Name(n) => write!(f, "dataspace {n:?}"),
        }
    }
}

/// The operations of SawMill's manager interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Names a dataspace and says what it is.
    Identify,
    /// Opens a dataspace for page I/O (SawMill's attach/open).
    Open,
    /// Closes an open dataspace; its id stays valid (detach/close).
    Close,
    /// Says which operations and flavours the manager supports.
    Interrogate,
    /// Makes a new dataspace.
    Create,
    /// Removes a dataspace.
    Delete,
    /// Lets another task open the dataspace.
    Share,
    /// Makes a new dataspace with the same contents.
    Copy,
    /// Hands the dataspace to another manager (stacking).
    Transfer,
}

impl Operation {
    /// Every operation, in the paper's order.
    pub const ALL: [Operation; 9] = [
        Operation::Identify,
        Operation::Open,
        Operation::Close,
        Operation::Interrogate,
        Operation::Share,
        Operation::Copy,
        Operation::Transfer,
        Operation::Create,
        Operation::Delete,
    ];
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A kind of dataspace or of access a manager may offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavour {
    /// Opened for reading only.
    ReadOnly,
    /// Opened for reading and writing.
    ReadWrite,
    /// The contents outlive the process (a file).
    Persistent,
    /// Zero-filled memory, gone with its last holder.
    Anonymous,
    /// Serves dataspaces transferred to it, over the dataspace handed over
    /// (stacking: it receives; see [`crate::hand_over`]).
    Stacked,
    /// Pages never evicted while a region maps them.
    Pinned,
    /// Pages kept compressed in memory.
    Compressed,
    /// Pages stored on other machines.
    Far,
}

/// How a dataspace is opened or shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reads only.
    ReadOnly,
    /// Reads and writes.
    ReadWrite,
}

impl Access {
    /// `ReadWrite` if `writable`, else `ReadOnly`.
    pub fn writable(writable: bool) -> Access {
        if writable {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        }
    }

    /// The flavour a manager must offer for this access.
    pub fn flavour(self) -> Flavour {
        match self {
            Access::ReadOnly => Flavour::ReadOnly,
            Access::ReadWrite => Flavour::ReadWrite,
        }
    }
}

/// A manager's answer to `interrogate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The operations it answers (the rest answer `Unsupported`).
    pub operations: &'static [Operation],
    /// The flavours it offers.
    pub flavours: &'static [Flavour],
}

impl Capabilities {
    /// Whether `op` is answered.
    pub fn supports(&self, op: Operation) -> bool {
        self.operations.contains(&op)
    }

    /// Whether `flavour` is offered.
    pub fn offers(&self, flavour: Flavour) -> bool {
        self.flavours.contains(&flavour)
    }
}

/// What `identify` says of a dataspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Its id.
    pub id: DataspaceId,
    /// The manager's name.
    pub manager: &'static str,
    /// Its length in bytes.
    pub len: u64,
    /// The file's inode number, for a file.
    pub inode: Option<u64>,
}

/// What `share` hands out: a handle another task may open the dataspace
/// through (a descriptor it can be sent).
#[derive(Debug)]
pub struct Share {
    /// The dataspace shared.
    pub id: DataspaceId,
    /// The access granted.
    pub access: Access,
    /// A descriptor of the dataspace, open with that access.
    pub handle: std::fs::File,
}

/// A dataspace manager (SawMill): implements one kind of dataspace and
/// answers the operations on it.
pub trait Manager: Send + Sync {
    /// Its name, in errors and capabilities.
    fn name(&self) -> &'static str;

    /// This instance, in dataspace stacks.
    fn key(&self) -> ManagerKey;

    /// The managers dataspace `id` is served through, bottom first, ending
    /// with this one (`None`: no such dataspace). A dataspace of the
    /// manager's own is a stack of one.
    fn stack(&self, id: &DataspaceId) -> Option<Vec<ManagerKey>> {
        self.identify(id).ok().map(|_| vec![self.key()])
    }

    /// Whether a dataspace this manager handed on may be handed back to it
    /// (SawMill, Figure 6: a dataspace moved to the pinned manager and back
    /// is pinned, then unpinned). Its `receive` then gets a [`Lower`] whose
    /// stack ends with its own key, and serves the store as its own again;
    /// for the others, handing a dataspace back is a cycle.
    fn takes_back(&self) -> bool {
        false
    }

    /// Takes over a dataspace another manager's `transfer` hands it (see
    /// [`crate::hand_over`], which calls this), serving it from then on
    /// over `lower`: the new id. Managers offering [`Flavour::Stacked`]
    /// implement it.
    fn receive(&self, _lower: Lower) -> Result<DataspaceId, TransferError> {
        Err(crate::Unsupported {
            manager: self.name(),
            operation: Operation::Transfer,
            flavour: Some(Flavour::Stacked),
        }
        .into())
    }

    /// Whether it would take a dataspace of `len` bytes handed over by
    /// `transfer` (a quota): asked by [`crate::hand_over`] before the
    /// dataspace leaves the manager handing it over, so that a refusal
    /// loses nothing. `receive` checks again.
    fn admit(&self, _id: &DataspaceId, _len: u64) -> Result<(), TransferError> {
        Ok(())
    }

    /// Which operations and flavours it supports.
    fn interrogate(&self) -> Capabilities;

    /// Says what dataspace `id` is.
    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError>;

    /// Opens dataspace `id` for page I/O with `access`; `at_least` bytes
    /// long if given.
    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError>;

    /// Closes `store`, opened from `id` by this manager: completed writes
    /// are made durable; `id` stays valid for another `open`.
    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError>;

    /// Makes a new dataspace of `len` bytes, named `name` where the manager
    /// names dataspaces by path.
    fn create(&self, name: Option<&Path>, len: u64) -> Result<DataspaceId, CreateError>;

    /// Removes dataspace `id`.
    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError>;

    /// A handle through which another task may open `id` with `access`.
    fn share(&self, id: &DataspaceId, access: Access) -> Result<Share, ShareError>;

    /// Makes a new dataspace with `id`'s contents, named `to` where the
    /// manager names dataspaces by path.
    fn copy(&self, id: &DataspaceId, to: Option<&Path>) -> Result<DataspaceId, CopyError>;

    /// Hands `id` to manager `to`, which serves it from then on (stacked
    /// over what this manager served: [`crate::hand_over`]); the id `to`
    /// gave it.
    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError>;
}
