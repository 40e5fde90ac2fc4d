//! Dataspaces and their managers, after SawMill (Aron et al., "The SawMill
//! Framework for Virtual Memory Diversity"): a dataspace is an unstructured
//! container of data (a file, anonymous memory); a [`Manager`] implements
//! one kind of dataspace and answers SawMill's operations on it
//! (identify, open, close, interrogate; create, delete, share, copy,
//! transfer where it makes sense); an open dataspace is a [`PageStore`],
//! which a region's fault path reads pages from and writes them back to.
//!
//! Managers: [`FileManager`] (files by path), [`AnonymousManager`]
//! (zero-filled memory in swap files of pagepilot's own, or over a
//! dataspace transferred to it), [`PersistentManager`] (named dataspaces
//! that outlive the process), and three stacked ones that take dataspaces
//! by `transfer`: [`CompressedManager`] (pages lz4-compressed in memory
//! under a budget over the lower dataspace), [`LazyCopyManager`]
//! (copy-on-write copies reading through to their source) and
//! [`PinnedManager`] (served pinned, within a quota). See
//! `docs/dataspaces.md`.
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
mod anonymous_over;
mod compressed;
mod error;
mod file;
mod file_manager;
mod lazy_copy;
mod manager;
mod opened;
mod persistent;
mod persistent_files;
mod pinned;
mod routed;
mod stack;
mod store;
mod stored;
mod swap;
pub mod sys;
mod tier;
mod tier_data;
mod tier_pool;
mod tier_stats;

pub use anonymous::AnonymousManager;
pub use compressed::{CompressedManager, CompressedStore};
pub use error::{
    CloseError, CopyError, Corrupt, CreateError, DeleteError, IdentifyError, InvalidName,
    MaybeUnsupported, NoSuch, OpenError, ShareError, TransferError, Unsupported,
};
pub use file::FileStore;
pub use file_manager::FileManager;
pub use lazy_copy::{LazyCopyManager, LazyCopyStats, LazyCopyStore};
pub use manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
pub use opened::Opened;
pub use persistent::{PersistentManager, PersistentStore};
pub use persistent_files::MAX_NAME;
pub use pinned::{PinnedManager, PinnedStore};
pub use routed::{AttachError, Attached, Routed};
pub use stack::{hand_over, hand_over_with, Lower, ManagerKey, MAX_STACK_DEPTH};
pub use store::PageStore;
pub use swap::SwapStore;
pub use sys::PAGE;
pub use tier::CompressedStats;
