//! A dataspace opened from its manager that goes back to it when dropped:
//! what a region holds for each attached dataspace, so that unmapping
//! closes it (an anonymous manager keeps a closed dataspace's pages for
//! the next `open`; one dropped open would take them with it).

use std::sync::Arc;

use pagepilot_policy::chain;

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
                eprintln!("pagepilot: closing {}: {}", self.id, chain(&e));
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
    crate::store::forward_pages!(self => self.store());

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
