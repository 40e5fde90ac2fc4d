//! The compressed manager (SawMill section 4, compressed memory): a
//! dataspace whose pages are kept lz4-compressed in memory under a byte
//! budget (the manager's, shared by all its dataspaces), stacked over a
//! lower dataspace that receives what the tier evicts and, at `sync` (a
//! region's flush, `close`), every page newer than its copy there.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, NoSuch, OpenError, ShareError,
    TransferError, Unsupported,
};
use crate::manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
use crate::tier::Tier;
use crate::tier_pool::TierPool;
use crate::{CompressedStats, Lower, ManagerKey, PageStore, SwapStore};

/// Serves compressed dataspaces: `transfer` a dataspace to it (see
/// [`crate::hand_over`]) and it serves it from then on with a compressed
/// tier of its own in front: reads come from the tier where it holds the
/// page, else from the lower dataspace; writes go into the tier; when the
/// tiers of all its dataspaces together hold more than the manager's
/// budget, the least recently used pages among them are written down to
/// their lower dataspaces (decompressed) and dropped; pages read from a
/// lower dataspace are kept in the tier too, clean, and dropped first
/// come first like the others; `close` and a region's flush write every
/// page newer than the lower copy down and sync the lower dataspace.
/// Zero pages are held as nothing.
///
/// `create` makes a compressed dataspace over a fresh anonymous swap file
/// in the manager's directory. Opens may be read-only or read-write, and
/// many at a time. `delete` drops a closed dataspace with its tier (what
/// was written down stays in the lower dataspace, which is released).
/// Share and copy are not supported (a copy is the lazy-copy manager's).
#[derive(Debug)]
pub struct CompressedManager {
    key: ManagerKey,
    pool: Arc<TierPool>,
    dir: PathBuf,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    entries: HashMap<u64, Held>,
    /// Transferred to other managers, which hold them now: only their
    /// statistics are answered, while they last.
    handed: HashMap<u64, std::sync::Weak<Tier>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("dataspaces", &self.entries.len())
            .finish()
    }
}

struct Held {
    tier: Arc<Tier>,
    stack: Vec<ManagerKey>,
}

/// An open compressed dataspace.
pub struct CompressedStore {
    tier: Arc<Tier>,
    writable: bool,
}

impl CompressedManager {
    /// Its name.
    pub const NAME: &'static str = "compressed";

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
            Flavour::Stacked,
            Flavour::Compressed,
        ],
    };

    /// A manager whose dataspaces' tiers hold up to `budget_bytes` of
    /// compressed pages together; `create` puts swap files in the temp dir.
    pub fn new(budget_bytes: usize) -> Self {
        Self::with_dir(budget_bytes, std::env::temp_dir())
    }

    /// The same, `create`'s swap files in `dir`.
    pub fn with_dir(budget_bytes: usize, dir: impl Into<PathBuf>) -> Self {
        CompressedManager {
            key: ManagerKey::fresh(Self::NAME),
            pool: TierPool::new(budget_bytes),
            dir: dir.into(),
            table: Mutex::default(),
        }
    }

    /// The statistics of dataspace `id`'s tier (also once it was handed
    /// over to another manager), if there is one.
    pub fn stats(&self, id: &DataspaceId) -> Option<CompressedStats> {
        let n = number(id).ok()?;
        let t = self.table();
        match t.entries.get(&n) {
            Some(h) => Some(h.tier.stats()),
            None => t.handed.get(&n)?.upgrade().map(|x| x.stats()),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tier of a dataspace it serves, or `NoSuch`.
    fn tier(&self, id: &DataspaceId) -> Result<Arc<Tier>, NoSuch> {
        let no_such = || NoSuch {
            manager: Self::NAME,
            id: id.clone(),
        };
        let n = number(id).map_err(|_| no_such())?;
        match self.table().entries.get(&n) {
            Some(h) => Ok(h.tier.clone()),
            _ => Err(no_such()),
        }
    }

    fn unsupported(operation: Operation, flavour: Option<Flavour>) -> Unsupported {
        Unsupported {
            manager: Self::NAME,
            operation,
            flavour,
        }
    }

    /// Serves `lower` compressed under a new id.
    fn insert(&self, lower: Box<dyn PageStore>, stack: Vec<ManagerKey>) -> DataspaceId {
        let mut t = self.table();
        let n = t.next;
        t.next += 1;
        let id = DataspaceId::Anonymous(n);
        let tier = Tier::new(id.clone(), lower, self.pool.clone());
        t.entries.insert(n, Held { tier, stack });
        id
    }
}

fn number(id: &DataspaceId) -> Result<u64, ()> {
    match id {
        DataspaceId::Anonymous(n) => Ok(*n),
        _ => Err(()),
    }
}

impl Manager for CompressedManager {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn key(&self) -> ManagerKey {
        self.key
    }

    fn stack(&self, id: &DataspaceId) -> Option<Vec<ManagerKey>> {
        let n = number(id).ok()?;
        let t = self.table();
        let h = t.entries.get(&n)?;
        let mut stack = h.stack.clone();
        stack.push(self.key);
        Some(stack)
    }

    fn receive(&self, lower: Lower) -> Result<DataspaceId, TransferError> {
        Ok(self.insert(lower.store, lower.stack))
    }

    fn interrogate(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let tier = self.tier(id)?;
        Ok(Identity {
            id: id.clone(),
            manager: Self::NAME,
            len: tier.lower().size(),
            inode: None,
        })
    }

    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        let tier = self.tier(id)?;
        let len = tier.lower().size();
        if let Some(want) = at_least.filter(|&w| w > len) {
            return Err(OpenError::Short {
                id: id.clone(),
                actual: len,
                expected: want,
            });
        }
        Ok(Box::new(CompressedStore {
            tier,
            writable: access == Access::ReadWrite,
        }))
    }

    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError> {
        let foreign = || CloseError::Foreign {
            manager: Self::NAME,
            id: id.clone(),
        };
        let store = store
            .into_any()
            .downcast::<CompressedStore>()
            .map_err(|_| foreign())?;
        let tier = self.tier(id).map_err(|_| foreign())?;
        if !Arc::ptr_eq(&tier, &store.tier) {
            return Err(foreign());
        }
        store.tier.sync().map_err(|source| CloseError::Sync {
            id: id.clone(),
            source,
        })
    }

    fn create(&self, name: Option<&Path>, len: u64) -> Result<DataspaceId, CreateError> {
        if name.is_some() {
            return Err(CreateError::BadName {
                manager: Self::NAME,
                why: "compressed dataspaces are named by the manager",
            });
        }
        if len == 0 {
            return Err(CreateError::Empty {
                manager: Self::NAME,
            });
        }
        let swap = SwapStore::create(&self.dir, len)?;
        Ok(self.insert(Box::new(swap), Vec::new()))
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let tier = self.tier(id)?;
        let mut t = self.table();
        // The table's reference, this one, and any open store's.
        if Arc::strong_count(&tier) > 2 {
            return Err(DeleteError::Open(id.clone()));
        }
        if let Ok(n) = number(id) {
            t.entries.remove(&n);
        }
        Ok(())
    }

    fn share(&self, _: &DataspaceId, _: Access) -> Result<Share, ShareError> {
        Err(Self::unsupported(Operation::Share, None).into())
    }

    fn copy(&self, _: &DataspaceId, _: Option<&Path>) -> Result<DataspaceId, CopyError> {
        Err(Self::unsupported(Operation::Copy, None).into())
    }

    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        let moved = crate::hand_over(self, id, to)?;
        if let Ok(n) = number(id) {
            let mut t = self.table();
            if let Some(h) = t.entries.remove(&n) {
                t.handed.insert(n, Arc::downgrade(&h.tier));
            }
        }
        Ok(moved)
    }
}

impl PageStore for CompressedStore {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.tier.read(first, pages, dst) }
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("compressed dataspace {} is open read-only", self.tier.id),
            ));
        }
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.tier.write(first, pages, src) }
    }

    fn sync(&self) -> io::Result<()> {
        if self.writable {
            self.tier.sync()
        } else {
            Ok(())
        }
    }

    fn size(&self) -> u64 {
        self.tier.lower().size()
    }

    fn direct(&self) -> bool {
        false
    }

    fn has_data(&self, page: usize) -> bool {
        self.tier.has_data(page)
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.tier.bookkeeping_bytes() + self.tier.lower().bookkeeping_bytes()
    }

    fn cached_bytes_read(&self) -> u64 {
        self.tier.lower().cached_bytes_read()
    }

    fn persistent(&self) -> bool {
        self.tier.lower().persistent()
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(4096))]
    struct Page([u8; crate::PAGE]);

    #[test]
    fn test_page_that_fails_to_decompress_is_an_io_error_naming_dataspace_and_page() {
        let dir = std::env::temp_dir();
        let m = CompressedManager::with_dir(1 << 20, &dir);
        let id = m.create(None, 4 * 4096).unwrap();
        let store = m.open(&id, Access::ReadWrite, None).unwrap();
        let mut page = Page([7; crate::PAGE]);
        // SAFETY: one aligned page of ours.
        unsafe { store.write(2, 1, page.0.as_ptr()) }.unwrap();
        m.tier(&id).unwrap().corrupt(2);
        // SAFETY: as above.
        let err = unsafe { store.read(2, 1, page.0.as_mut_ptr()) }.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let text = err.to_string();
        assert!(
            text.contains("anonymous dataspace 0") && text.contains("page 2"),
            "{text}"
        );
        // The sync that writes it down fails the same way, without a panic.
        assert!(m.close(&id, store).is_err());
    }
}
