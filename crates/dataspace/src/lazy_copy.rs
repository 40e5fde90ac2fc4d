//! The lazy-copy manager (SawMill section 3.2, copy; 3.3, lazy copying by
//! stacking): a copy of a dataspace whose unmodified pages read through to
//! the source and whose modified pages are its own (copy-on-write, at page
//! granularity). The source is never written.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, NoSuch, OpenError, ShareError,
    TransferError, Unsupported,
};
use crate::manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
use crate::sys::PAGE;
use crate::{Lower, ManagerKey, Opened, PageStore, SwapStore, MAX_STACK_DEPTH};

/// Serves lazy copies: a copy made by [`copy_of`](Self::copy_of) (of any
/// manager's dataspace), by `transfer` to it (the dataspace handed over
/// becomes the source of a copy, see [`crate::hand_over`]) or by `copy` (of
/// one of its own copies) reads each page it has not written from its
/// source and each page it has written from an overlay of its own (an
/// anonymous swap file in the manager's directory, with the record of the
/// pages written: the pages the copy owns). Writes go only to the overlay.
///
/// The source is never written, but it is read when the copy is: pages the
/// copy has not written show what the source holds then. `copy` of one of
/// its own copies freezes it: the copy's pages so far become a read-only
/// layer under both the old id and the new one, each with an overlay of
/// its own, so that neither sees the other's later writes.
///
/// Opens may be read-only or read-write, many at a time; `close` keeps
/// the copy for the next `open`; `delete` drops a closed copy (releasing
/// its source: a dataspace opened from another manager is closed back to
/// it). The copy's own pages live in swap: gone with the manager
/// (anonymous). Create (a copy of nothing) and share are not supported.
#[derive(Debug)]
pub struct LazyCopyManager {
    key: ManagerKey,
    dir: PathBuf,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    entries: HashMap<u64, Held>,
    /// Transferred to other managers, which hold them now: only their
    /// statistics are answered, while they last.
    handed: HashMap<u64, std::sync::Weak<LazyCopy>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("copies", &self.entries.len())
            .finish()
    }
}

struct Held {
    copy: Arc<LazyCopy>,
    stack: Vec<ManagerKey>,
}

/// What a lazy copy has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyCopyStats {
    /// Page reads served from the copy's own pages.
    pub reads_own: u64,
    /// Page reads served from the source.
    pub reads_source: u64,
    /// Pages written (all to the copy's own pages).
    pub pages_written: u64,
    /// Layers a read may go through (the copy, its frozen layers, the
    /// source's stack).
    pub depth: usize,
}

/// A copy: its source and its overlay.
struct LazyCopy {
    id: DataspaceId,
    source: Arc<dyn PageStore>,
    /// The copy's own pages; `has_data` says which it owns.
    overlay: SwapStore,
    len: u64,
    pages: usize,
    depth: usize,
    reads_own: AtomicU64,
    reads_source: AtomicU64,
    written: AtomicU64,
}

impl LazyCopy {
    fn new(
        id: DataspaceId,
        source: Arc<dyn PageStore>,
        dir: &Path,
        depth: usize,
    ) -> Result<Self, CreateError> {
        let len = source.size();
        Ok(LazyCopy {
            id,
            overlay: SwapStore::create(dir, len)?,
            pages: (len as usize).div_ceil(PAGE),
            len,
            source,
            depth,
            reads_own: AtomicU64::new(0),
            reads_source: AtomicU64::new(0),
            written: AtomicU64::new(0),
        })
    }

    fn stats(&self) -> LazyCopyStats {
        LazyCopyStats {
            reads_own: self.reads_own.load(Ordering::Relaxed),
            reads_source: self.reads_source.load(Ordering::Relaxed),
            pages_written: self.written.load(Ordering::Relaxed),
            depth: self.depth,
        }
    }
}

/// An open lazy copy.
pub struct LazyCopyStore {
    copy: Arc<LazyCopy>,
    writable: bool,
}

impl LazyCopyManager {
    /// Its name.
    pub const NAME: &'static str = "lazy-copy";

    const CAPABILITIES: Capabilities = Capabilities {
        operations: &[
            Operation::Identify,
            Operation::Open,
            Operation::Close,
            Operation::Interrogate,
            Operation::Delete,
            Operation::Copy,
            Operation::Transfer,
        ],
        flavours: &[
            Flavour::ReadOnly,
            Flavour::ReadWrite,
            Flavour::Anonymous,
            Flavour::Stacked,
        ],
    };

    /// A manager whose copies keep their own pages in swap files in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LazyCopyManager {
            key: ManagerKey::fresh(Self::NAME),
            dir: dir.into(),
            table: Mutex::default(),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn no_such(id: &DataspaceId) -> NoSuch {
        NoSuch {
            manager: Self::NAME,
            id: id.clone(),
        }
    }

    /// The copy `id` names, or `NoSuch`.
    fn copy_named(&self, id: &DataspaceId) -> Result<Arc<LazyCopy>, NoSuch> {
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        match self.table().entries.get(&n) {
            Some(h) => Ok(h.copy.clone()),
            _ => Err(Self::no_such(id)),
        }
    }

    /// A new copy of `source`, whose pages were served through `stack`.
    fn insert(
        &self,
        source: Arc<dyn PageStore>,
        stack: Vec<ManagerKey>,
    ) -> Result<DataspaceId, CreateError> {
        let mut t = self.table();
        let n = t.next;
        let id = DataspaceId::Anonymous(n);
        let depth = stack.len() + 1;
        let copy = Arc::new(LazyCopy::new(id.clone(), source, &self.dir, depth)?);
        t.next += 1;
        let held = Held { copy, stack };
        t.entries.insert(n, held);
        Ok(id)
    }

    /// A lazy copy of dataspace `id` of `source` (this manager's own: as
    /// `copy`). The source is opened read-only (read-write where its
    /// manager offers no read-only opens; it is never written) and closed
    /// back to its manager when the copy is deleted.
    pub fn copy_of(
        &self,
        source: Arc<dyn Manager>,
        id: &DataspaceId,
    ) -> Result<DataspaceId, CopyError> {
        if source.key() == self.key {
            return self.copy(id, None);
        }
        let stack = source.stack(id).ok_or_else(|| NoSuch {
            manager: source.name(),
            id: id.clone(),
        })?;
        if stack.len() >= MAX_STACK_DEPTH {
            return Err(CopyError::TooDeep {
                manager: Self::NAME,
                id: id.clone(),
                depth: stack.len() + 1,
            });
        }
        let open = |access| Opened::open(source.clone(), id.clone(), access, None);
        let opened = match open(Access::ReadOnly) {
            Err(OpenError::Unsupported(u)) if u.flavour == Some(Flavour::ReadOnly) => {
                open(Access::ReadWrite)
            }
            other => other,
        }
        .map_err(|e| CopyError::Open {
            id: id.clone(),
            manager: source.name(),
            source: Box::new(e),
        })?;
        Ok(self.insert(Arc::new(opened), stack)?)
    }

    /// What copy `id` has done (also once it was handed over to another
    /// manager), if there is one.
    pub fn stats(&self, id: &DataspaceId) -> Option<LazyCopyStats> {
        let n = number(id)?;
        let t = self.table();
        match t.entries.get(&n) {
            Some(h) => Some(h.copy.stats()),
            None => t.handed.get(&n)?.upgrade().map(|x| x.stats()),
        }
    }
}

fn number(id: &DataspaceId) -> Option<u64> {
    match id {
        DataspaceId::Anonymous(n) => Some(*n),
        _ => None,
    }
}

impl Manager for LazyCopyManager {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn key(&self) -> ManagerKey {
        self.key
    }

    fn stack(&self, id: &DataspaceId) -> Option<Vec<ManagerKey>> {
        let t = self.table();
        let h = t.entries.get(&number(id)?)?;
        let mut stack = h.stack.clone();
        stack.push(self.key);
        Some(stack)
    }

    fn receive(&self, lower: Lower) -> Result<DataspaceId, TransferError> {
        let id = lower.id.clone();
        self.insert(Arc::from(lower.store), lower.stack)
            .map_err(|e| TransferError::Io {
                manager: Self::NAME,
                id,
                source: io::Error::other(e),
            })
    }

    fn interrogate(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let copy = self.copy_named(id)?;
        Ok(Identity {
            id: id.clone(),
            manager: Self::NAME,
            len: copy.len,
            inode: None,
        })
    }

    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        let copy = self.copy_named(id)?;
        if let Some(want) = at_least.filter(|&w| w > copy.len) {
            return Err(OpenError::Short {
                id: id.clone(),
                actual: copy.len,
                expected: want,
            });
        }
        Ok(Box::new(LazyCopyStore {
            copy,
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
            .downcast::<LazyCopyStore>()
            .map_err(|_| foreign())?;
        let copy = self.copy_named(id).map_err(|_| foreign())?;
        if !Arc::ptr_eq(&copy, &store.copy) {
            return Err(foreign());
        }
        Ok(())
    }

    fn create(&self, _: Option<&Path>, _: u64) -> Result<DataspaceId, CreateError> {
        Err(Unsupported {
            manager: Self::NAME,
            operation: Operation::Create,
            flavour: None,
        }
        .into())
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        let mut t = self.table();
        match t.entries.get(&n) {
            Some(h) => {
                if Arc::strong_count(&h.copy) > 1 {
                    return Err(DeleteError::Open(id.clone()));
                }
            }
            _ => return Err(Self::no_such(id).into()),
        }
        t.entries.remove(&n);
        Ok(())
    }

    fn share(&self, _: &DataspaceId, _: Access) -> Result<Share, ShareError> {
        Err(Unsupported {
            manager: Self::NAME,
            operation: Operation::Share,
            flavour: None,
        }
        .into())
    }

    fn copy(&self, id: &DataspaceId, to: Option<&Path>) -> Result<DataspaceId, CopyError> {
        if to.is_some() {
            return Err(CreateError::BadName {
                manager: Self::NAME,
                why: "lazy copies are named by the manager",
            }
            .into());
        }
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        let mut t = self.table();
        let held = match t.entries.get(&n) {
            Some(h) => h,
            _ => return Err(Self::no_such(id).into()),
        };
        let stack = held.stack.clone();
        // Only the table holds it: no open store writes it while it freezes.
        if Arc::strong_count(&held.copy) > 1 {
            return Err(CopyError::Busy {
                manager: Self::NAME,
                id: id.clone(),
            });
        }
        let depth = held.copy.depth + 1;
        if depth > MAX_STACK_DEPTH {
            return Err(CopyError::TooDeep {
                manager: Self::NAME,
                id: id.clone(),
                depth,
            });
        }
        let frozen: Arc<dyn PageStore> = Arc::new(LazyCopyStore {
            copy: held.copy.clone(),
            writable: false,
        });
        let new_id = DataspaceId::Anonymous(t.next);
        let old = LazyCopy::new(id.clone(), frozen.clone(), &self.dir, depth)?;
        let new = LazyCopy::new(new_id.clone(), frozen, &self.dir, depth)?;
        t.entries.get_mut(&n).expect("checked above").copy = Arc::new(old);
        let next = t.next;
        t.entries.insert(
            next,
            Held {
                copy: Arc::new(new),
                stack,
            },
        );
        t.next += 1;
        Ok(new_id)
    }

    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        let moved = crate::hand_over(self, id, to)?;
        if let Some(n) = number(id) {
            let mut t = self.table();
            if let Some(h) = t.entries.remove(&n) {
                t.handed.insert(n, Arc::downgrade(&h.copy));
            }
        }
        Ok(moved)
    }
}

impl PageStore for LazyCopyStore {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let c = &self.copy;
        let avail = c.pages.saturating_sub(first).min(pages);
        let mut i = 0;
        while i < avail {
            let owned = c.overlay.has_data(first + i);
            let start = i;
            while i < avail && c.overlay.has_data(first + i) == owned {
                i += 1;
            }
            let n = i - start;
            // SAFETY: pages `start..i` of the caller's buffer.
            let at = unsafe { dst.add(start * PAGE) };
            if owned {
                // SAFETY: part of the caller's buffer, lent for the call.
                unsafe { c.overlay.read(first + start, n, at) }?;
                c.reads_own.fetch_add(n as u64, Ordering::Relaxed);
            } else {
                // SAFETY: as above.
                let got = unsafe { c.source.read(first + start, n, at) }?;
                if got < n {
                    // The source ended since the copy was made: the copy
                    // keeps its length, the pages read as zero.
                    // SAFETY: as above, the pages the source left.
                    unsafe { at.add(got * PAGE).write_bytes(0, (n - got) * PAGE) };
                }
                c.reads_source.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        Ok(avail)
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("lazy copy {} is open read-only", self.copy.id),
            ));
        }
        let n = self.copy.pages.saturating_sub(first).min(pages);
        // SAFETY: the caller's guarantee, for the first `n` of its pages.
        unsafe { self.copy.overlay.write(first, n, src) }?;
        self.copy.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.copy.len
    }

    fn direct(&self) -> bool {
        self.copy.overlay.direct()
    }

    fn has_data(&self, page: usize) -> bool {
        let c = &self.copy;
        c.overlay.has_data(page) || (page < c.pages && c.source.has_data(page))
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.copy.overlay.bookkeeping_bytes()
    }

    fn cached_bytes_read(&self) -> u64 {
        self.copy.source.cached_bytes_read()
    }

    fn persistent(&self) -> bool {
        false
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
