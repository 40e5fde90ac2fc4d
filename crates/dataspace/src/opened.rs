//! A dataspace opened from its manager that goes back to it when dropped:
//! what a region holds for each attached dataspace, so that unmapping
//! closes it (an anonymous manager keeps a closed dataspace's pages for
//! the next `open`; one dropped open would take them with it).

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::Arc;

use crate::{Access, DataspaceId, Manager, OpenError, PageStore};

/// A page store that its manager closes when it is dropped.
pub struct Opened {
    manager: Arc<dyn Manager>,
    id: DataspaceId,
    /// `Some` until dropped.
    store: Option<Box<dyn PageStore>>,
}

impl Opened {
    /// Opens `id` from `manager` with `access`, at least `at_least` bytes long.
    pub fn open(
        manager: Arc<dyn Manager>,
        id: DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Self, OpenError> {
        let store = manager.open(&id, access, at_least)?;
        Ok(Opened {
            manager,
            id,
            store: Some(store),
        })
    }

    /// The manager it goes back to.
    pub fn manager(&self) -> &Arc<dyn Manager> {
        &self.manager
    }

    /// Its id there.
    pub fn id(&self) -> &DataspaceId {
        &self.id
    }

    fn store(&self) -> &dyn PageStore {
        self.store.as_deref().expect("present until dropped")
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            if let Err(e) = self.manager.close(&self.id, store) {
                eprintln!("pagepilot: closing {}: {e}", self.id);
            }
        }
    }
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("manager", &self.manager.name())
            .field("id", &self.id)
            .finish()
    }
}

impl PageStore for Opened {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.store().read(first, pages, dst) }
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.store().write(first, pages, src) }
    }

    fn sync(&self) -> io::Result<()> {
        self.store().sync()
    }

    fn size(&self) -> u64 {
        self.store().size()
    }

    fn direct(&self) -> bool {
        self.store().direct()
    }

    fn readaround_pages(&self) -> Option<usize> {
        self.store().readaround_pages()
    }

    fn has_data(&self, page: usize) -> bool {
        self.store().has_data(page)
    }

    fn read_source(&self, first: usize, pages: usize) -> Option<(RawFd, u64)> {
        self.store().read_source(first, pages)
    }

    fn file(&self) -> Option<RawFd> {
        self.store().file()
    }

    fn writable_file(&self) -> Option<BorrowedFd<'_>> {
        self.store().writable_file()
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.store().bookkeeping_bytes()
    }

    fn cached_bytes_read(&self) -> u64 {
        self.store().cached_bytes_read()
    }

    fn persistent(&self) -> bool {
        // The manager keeps the dataspace after the region goes: what the
        // region wrote must reach it at flush and unmap.
        true
    }

    fn pinned(&self) -> bool {
        self.store().pinned()
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
