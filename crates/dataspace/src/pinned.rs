//! The pinned manager (SawMill, Figure 6): moving a dataspace from a
//! swappable manager to a non-swappable one is a pinning operation, moving
//! it out again unpinning. It serves the dataspaces transferred to it with
//! [`PageStore::pinned`] true, so that a region mapping one pins all its
//! pages (never evicted while mapped), within a quota of bytes of its own.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, NoSuch, OpenError, ShareError,
    TransferError, Unsupported,
};
use crate::manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
use crate::sys::PAGE;
use crate::{Lower, ManagerKey, PageStore};

/// Serves dataspaces transferred to it ([`Flavour::Stacked`]) pinned
/// ([`Flavour::Pinned`]): the store it hands out says [`PageStore::pinned`],
/// everything else is the transferred store's. A quota bounds the bytes it
/// holds (each dataspace counted in whole pages): a transfer that would pass
/// it is refused ([`TransferError::Quota`]) before the dataspace leaves the
/// manager handing it over. Transferring a dataspace out (to an anonymous
/// manager, any stacked one) hands over the store it received, unpinned,
/// and gives its bytes back to the quota; so does `delete`, which drops the
/// store (an anonymous dataspace below goes with it, a persistent one is
/// closed). The stacking rules hold: the manager a dataspace came from is
/// in its stack, so moving it back there is refused as a cycle; move it to
/// another manager.
///
/// Opens are read-write, one at a time, as the anonymous manager's; create,
/// share and copy are not supported (it pins what it is given).
#[derive(Debug)]
pub struct PinnedManager {
    key: ManagerKey,
    quota: u64,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    entries: HashMap<u64, Entry>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("dataspaces", &self.entries.len())
            .field("bytes", &self.used())
            .finish()
    }
}

impl Table {
    /// Bytes charged to the quota.
    fn used(&self) -> u64 {
        self.entries.values().map(|e| charge(e.len)).sum()
    }
}

struct Entry {
    len: u64,
    /// The stack below this manager, bottom first.
    below: Vec<ManagerKey>,
    state: State,
}

enum State {
    /// The manager holds the store.
    Closed(Box<dyn PageStore>),
    /// Handed out; the store holds the other end.
    Open(Weak<()>),
}

/// An open pinned dataspace: the transferred store, pinned.
pub struct PinnedStore {
    lower: Box<dyn PageStore>,
    /// Held while open; the manager keeps the other end.
    attached: Arc<()>,
}

/// Bytes a dataspace of `len` bytes takes of the quota: whole pages.
fn charge(len: u64) -> u64 {
    len.div_ceil(PAGE as u64) * PAGE as u64
}

impl PinnedManager {
    /// Its name.
    pub const NAME: &'static str = "pinned";

    const CAPABILITIES: Capabilities = Capabilities {
        operations: &[
            Operation::Identify,
            Operation::Open,
            Operation::Close,
            Operation::Interrogate,
            Operation::Delete,
            Operation::Transfer,
        ],
        flavours: &[Flavour::ReadWrite, Flavour::Stacked, Flavour::Pinned],
    };

    /// A manager that may pin up to `quota_bytes` bytes.
    pub fn new(quota_bytes: u64) -> Self {
        PinnedManager {
            key: ManagerKey::fresh(Self::NAME),
            quota: quota_bytes,
            table: Mutex::default(),
        }
    }

    /// Its quota, bytes.
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// Bytes of the quota its dataspaces take (whole pages each).
    pub fn pinned_bytes(&self) -> u64 {
        self.table().used()
    }

    /// The table, without the dataspaces whose stores were dropped open.
    fn table(&self) -> MutexGuard<'_, Table> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.entries.retain(|_, e| match &e.state {
            State::Closed(_) => true,
            State::Open(alive) => alive.strong_count() > 0,
        });
        t
    }

    /// Refuses `len` bytes more than the quota leaves.
    fn check_quota(&self, t: &Table, id: &DataspaceId, len: u64) -> Result<(), TransferError> {
        let left = self.quota.saturating_sub(t.used());
        if charge(len) > left {
            return Err(TransferError::Quota {
                manager: Self::NAME,
                id: id.clone(),
                asked: charge(len),
                left,
                quota: self.quota,
            });
        }
        Ok(())
    }

    fn unsupported(operation: Operation, flavour: Option<Flavour>) -> Unsupported {
        Unsupported {
            manager: Self::NAME,
            operation,
            flavour,
        }
    }

    fn no_such(id: &DataspaceId) -> NoSuch {
        NoSuch {
            manager: Self::NAME,
            id: id.clone(),
        }
    }

    /// Removes closed dataspace `id`, giving its store (for `transfer`).
    fn take(&self, id: &DataspaceId) -> Result<Box<dyn PageStore>, OpenError> {
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        let mut t = self.table();
        match t.entries.get(&n).map(|e| &e.state) {
            None => Err(Self::no_such(id).into()),
            Some(State::Open(_)) => Err(OpenError::Busy(id.clone())),
            Some(State::Closed(_)) => match t.entries.remove(&n).map(|e| e.state) {
                Some(State::Closed(store)) => Ok(store),
                _ => unreachable!("checked closed above"),
            },
        }
    }
}

fn number(id: &DataspaceId) -> Option<u64> {
    match id {
        DataspaceId::Anonymous(n) => Some(*n),
        _ => None,
    }
}

impl Manager for PinnedManager {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn key(&self) -> ManagerKey {
        self.key
    }

    fn interrogate(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn stack(&self, id: &DataspaceId) -> Option<Vec<ManagerKey>> {
        let mut stack = self.table().entries.get(&number(id)?)?.below.clone();
        stack.push(self.key);
        Some(stack)
    }

    fn admit(&self, id: &DataspaceId, len: u64) -> Result<(), TransferError> {
        self.check_quota(&self.table(), id, len)
    }

    fn receive(&self, lower: Lower) -> Result<DataspaceId, TransferError> {
        let mut t = self.table();
        let len = lower.store.size();
        self.check_quota(&t, &lower.id, len)?;
        let n = t.next;
        t.next += 1;
        let entry = Entry {
            len,
            below: lower.stack,
            state: State::Closed(lower.store),
        };
        t.entries.insert(n, entry);
        Ok(DataspaceId::Anonymous(n))
    }

    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        let len = self
            .table()
            .entries
            .get(&n)
            .ok_or_else(|| Self::no_such(id))?
            .len;
        Ok(Identity {
            id: id.clone(),
            manager: Self::NAME,
            len,
            inode: None,
        })
    }

    fn open(
        &self,
        id: &DataspaceId,
        access: Access,
        at_least: Option<u64>,
    ) -> Result<Box<dyn PageStore>, OpenError> {
        if access != Access::ReadWrite {
            return Err(Self::unsupported(Operation::Open, Some(access.flavour())).into());
        }
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        let mut t = self.table();
        let entry = t.entries.get_mut(&n).ok_or_else(|| Self::no_such(id))?;
        if let Some(want) = at_least.filter(|&w| w > entry.len) {
            return Err(OpenError::Short {
                id: id.clone(),
                actual: entry.len,
                expected: want,
            });
        }
        if let State::Open(_) = entry.state {
            return Err(OpenError::Busy(id.clone()));
        }
        let attached = Arc::new(());
        let State::Closed(lower) =
            std::mem::replace(&mut entry.state, State::Open(Arc::downgrade(&attached)))
        else {
            unreachable!("checked closed above");
        };
        Ok(Box::new(PinnedStore { lower, attached }))
    }

    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError> {
        let foreign = || CloseError::Foreign {
            manager: Self::NAME,
            id: id.clone(),
        };
        let store = store
            .into_any()
            .downcast::<PinnedStore>()
            .map_err(|_| foreign())?;
        let mut t = self.table();
        let from = t.entries.iter_mut().find(|(_, e)| {
            matches!(&e.state, State::Open(alive)
                if std::ptr::eq(alive.as_ptr(), Arc::as_ptr(&store.attached)))
        });
        let Some((&from, entry)) = from else {
            return Err(foreign());
        };
        // Back where it was opened from, even when `id` names another (the
        // caller hears it named the wrong one).
        let PinnedStore { lower, .. } = *store;
        entry.state = State::Closed(lower);
        if Some(from) == number(id) {
            Ok(())
        } else {
            Err(foreign())
        }
    }

    fn create(&self, _: Option<&Path>, _: u64) -> Result<DataspaceId, CreateError> {
        Err(Self::unsupported(Operation::Create, None).into())
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let n = number(id).ok_or_else(|| Self::no_such(id))?;
        let mut t = self.table();
        match t.entries.get(&n).map(|e| &e.state) {
            None => Err(Self::no_such(id).into()),
            Some(State::Open(_)) => Err(DeleteError::Open(id.clone())),
            Some(State::Closed(_)) => {
                t.entries.remove(&n);
                Ok(())
            }
        }
    }

    fn share(&self, _: &DataspaceId, _: Access) -> Result<Share, ShareError> {
        Err(Self::unsupported(Operation::Share, None).into())
    }

    fn copy(&self, _: &DataspaceId, _: Option<&Path>) -> Result<DataspaceId, CopyError> {
        Err(Self::unsupported(Operation::Copy, None).into())
    }

    fn transfer(&self, id: &DataspaceId, to: &dyn Manager) -> Result<DataspaceId, TransferError> {
        // The store it received goes, unpinned; the stack below it is the
        // dataspace's stack without this manager.
        let below = number(id)
            .and_then(|n| self.table().entries.get(&n).map(|e| e.below.clone()))
            .ok_or_else(|| Self::no_such(id))?;
        crate::hand_over_with(self, id, to, below, || self.take(id))
    }
}

impl PageStore for PinnedStore {
    crate::store::forward_pages!(self => self.lower);

    fn pinned(&self) -> bool {
        true
    }

    fn persistent(&self) -> bool {
        // The manager keeps the dataspace after the region goes.
        true
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
