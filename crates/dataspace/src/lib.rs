//! Dataspaces and their managers, after SawMill (Aron et al., "The SawMill
//! Framework for Virtual Memory Diversity"): a dataspace is an unstructured
//! container of data (a file, anonymous memory); a [`Manager`] implements
//! one kind of dataspace and answers SawMill's operations on it
//! (identify, open, close, interrogate; create, delete, share, copy,
//! transfer where it makes sense); an open dataspace is a [`PageStore`],
//! which a region's fault path reads pages from and writes them back to.
//!
//! Managers: [`FileManager`] (files by path), [`AnonymousManager`]
//! (zero-filled memory in swap files of pagepilot's own), and two stacked
//! ones that take dataspaces by `transfer`: [`CompressedManager`] (pages
//! lz4-compressed in memory under a budget over the lower dataspace) and
//! [`LazyCopyManager`] (copy-on-write copies reading through to their
//! source). See `docs/dataspaces.md`.
//!
//! ```
//! use pagepilot_dataspace::{Access, AnonymousManager, Manager, Operation};
//! let anon = AnonymousManager::new(std::env::temp_dir());
//! assert!(!anon.interrogate().supports(Operation::Copy));
//! let id = anon.create(None, 1 << 20).unwrap();
//! let store = anon.open(&id, Access::ReadWrite, None).unwrap();
//! assert_eq!(store.size(), 1 << 20);
//! anon.close(&id, store).unwrap();
//! anon.delete(&id).unwrap();
//! ```

mod anonymous;
mod compressed;
mod error;
mod file;
mod file_manager;
mod lazy_copy;
mod manager;
mod store;
mod opened;
mod routed;
mod stack;
mod stored;
mod swap;
mod tier;
pub mod sys;

pub use anonymous::AnonymousManager;
pub use compressed::{CompressedManager, CompressedStore};
pub use lazy_copy::{LazyCopyManager, LazyCopyStats, LazyCopyStore};
pub use tier::CompressedStats;
pub use error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, MaybeUnsupported, NoSuch,
    OpenError, ShareError, TransferError, Unsupported,
};
pub use file::FileStore;
pub use file_manager::FileManager;
pub use manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
pub use opened::Opened;
pub use routed::{AttachError, Attached, Routed};
pub use stack::{hand_over, Lower, ManagerKey, MAX_STACK_DEPTH};
pub use store::PageStore;
pub use swap::SwapStore;
pub use sys::PAGE;
