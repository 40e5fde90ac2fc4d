//! The anonymous manager: zero-filled dataspaces in swap files of
//! pagepilot's own, or over a dataspace transferred to it, named by a
//! number within the process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::anonymous_over::Held;
use crate::error::{
    CloseError, CopyError, CreateError, DeleteError, IdentifyError, NoSuch, OpenError, ShareError,
    TransferError, Unsupported,
};
use crate::manager::{
    Access, Capabilities, DataspaceId, Flavour, Identity, Manager, Operation, Share,
};
use crate::{Lower, ManagerKey, PageStore, SwapStore};

/// Serves anonymous memory: `create` makes a fresh zero-filled dataspace
/// of a length (an unnamed swap file in the manager's directory), `open`
/// hands out its page store (read-write, one open at a time), `close`
/// takes the store back with its contents, so a later `open` sees them,
/// `delete` drops a closed dataspace. A store dropped without `close`
/// takes its dataspace with it (as unmapping anonymous memory does).
///
/// `transfer` hands a dataspace to a stacked manager (its store goes with
/// it). It also takes dataspaces transferred to it ([`Flavour::Stacked`]):
/// an anonymous dataspace whose pages live in the received store instead
/// of a swap file of its own, anonymous otherwise (read-write, one open at
/// a time, zero where nothing was written). Over a persistent dataspace
/// this is SawMill's persistence by insertion below (Figure 5): what is
/// written reaches the persistent store at write-back, and the dataspace
/// can be reopened by name from its persistent manager once the anonymous
/// one gives it up (`delete`, or the manager dropped). Share and copy are not supported: ids mean nothing outside the
/// process and the swap file has no name to pass (sharing across processes
/// goes through the daemon); a copy is the lazy-copy manager's.
#[derive(Debug)]
pub struct AnonymousManager {
    key: ManagerKey,
    dir: PathBuf,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    entries: HashMap<u64, Entry>,
}

#[derive(Debug)]
enum Entry {
    /// Closed: the manager holds the store.
    Closed(Held),
    /// Open: the store holds the other end; `len` for `identify`, `below`
    /// for `stack`.
    Open {
        len: u64,
        below: Vec<ManagerKey>,
        alive: Weak<()>,
    },
}

impl std::fmt::Debug for SwapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwapStore")
            .field("len", &self.size())
            .finish()
    }
}

impl AnonymousManager {
    /// Its name.
    pub const NAME: &'static str = "anonymous";

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
        flavours: &[Flavour::ReadWrite, Flavour::Anonymous, Flavour::Stacked],
    };

    /// A manager whose swap files go in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        AnonymousManager {
            key: ManagerKey::fresh(Self::NAME),
            dir: dir.into(),
            table: Mutex::default(),
        }
    }

    /// The table, without the dataspaces whose stores were dropped open.
    fn table(&self) -> MutexGuard<'_, Table> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.entries.retain(|_, e| match e {
            Entry::Closed(_) => true,
            Entry::Open { alive, .. } => alive.strong_count() > 0,
        });
        t
    }

    fn unsupported(operation: Operation, flavour: Option<Flavour>) -> Unsupported {
        Unsupported {
            manager: Self::NAME,
            operation,
            flavour,
        }
    }
}

/// The number of an anonymous id, or `no_such(id)`.
fn number<E>(id: &DataspaceId, no_such: impl FnOnce(DataspaceId) -> E) -> Result<u64, E> {
    match id {
        DataspaceId::Anonymous(n) => Ok(*n),
        other => Err(no_such(other.clone())),
    }
}

impl Manager for AnonymousManager {
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
        let DataspaceId::Anonymous(n) = id else {
            return None;
        };
        let mut stack = match self.table().entries.get(n)? {
            Entry::Closed(held) => held.below().to_vec(),
            Entry::Open { below, .. } => below.clone(),
        };
        stack.push(self.key);
        Some(stack)
    }

    fn takes_back(&self) -> bool {
        true
    }

    fn receive(&self, lower: Lower) -> Result<DataspaceId, TransferError> {
        let mut stack = lower.stack;
        let held = if stack.last() == Some(&self.key) {
            // One of ours, handed back (unpinned, say): it is served as it
            // was before it left. Its old entry goes with the token.
            stack.pop();
            match Held::take_back(lower.store.into_any()) {
                Some((held, _token)) => held,
                None => {
                    return Err(TransferError::Io {
                        manager: Self::NAME,
                        id: lower.id,
                        source: std::io::Error::other(
                            "handed back a store this manager never opened",
                        ),
                    })
                }
            }
        } else {
            Held::over(lower.store, stack)
        };
        let mut t = self.table();
        let n = t.next;
        t.next += 1;
        t.entries.insert(n, Entry::Closed(held));
        Ok(DataspaceId::Anonymous(n))
    }

    fn identify(&self, id: &DataspaceId) -> Result<Identity, IdentifyError> {
        let no_such = |id| {
            IdentifyError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let n = number(id, no_such)?;
        let len = match self.table().entries.get(&n) {
            Some(Entry::Closed(s)) => s.size(),
            Some(Entry::Open { len, .. }) => *len,
            None => return Err(no_such(id.clone())),
        };
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
        let no_such = |id| {
            OpenError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let n = number(id, no_such)?;
        let mut t = self.table();
        let (len, below) = match t.entries.get(&n) {
            None => return Err(no_such(id.clone())),
            Some(Entry::Open { .. }) => return Err(OpenError::Busy(id.clone())),
            Some(Entry::Closed(s)) => (s.size(), s.below().to_vec()),
        };
        if let Some(want) = at_least.filter(|&w| w > len) {
            return Err(OpenError::Short {
                id: id.clone(),
                actual: len,
                expected: want,
            });
        }
        let alive = Arc::new(());
        let open = Entry::Open {
            len,
            below,
            alive: Arc::downgrade(&alive),
        };
        let Some(Entry::Closed(held)) = t.entries.insert(n, open) else {
            unreachable!("checked closed above");
        };
        Ok(held.open(alive))
    }

    fn close(&self, id: &DataspaceId, store: Box<dyn PageStore>) -> Result<(), CloseError> {
        let foreign = || CloseError::Foreign {
            manager: Self::NAME,
            id: id.clone(),
        };
        let n = number(id, |_| foreign())?;
        let (store, held) = Held::take_back(store.into_any()).ok_or_else(foreign)?;
        let mut t = self.table();
        // The entry the store was opened from: `id`'s, or another's (then
        // it goes back there, and the caller hears it named the wrong id).
        let from = t.entries.iter().find_map(|(k, e)| match e {
            Entry::Open { alive, .. } if std::ptr::eq(alive.as_ptr(), Arc::as_ptr(&held)) => {
                Some(*k)
            }
            _ => None,
        });
        let Some(from) = from else {
            return Err(foreign());
        };
        t.entries.insert(from, Entry::Closed(store));
        if from == n {
            Ok(())
        } else {
            Err(foreign())
        }
    }

    fn create(&self, name: Option<&Path>, len: u64) -> Result<DataspaceId, CreateError> {
        if name.is_some() {
            return Err(CreateError::BadName {
                manager: Self::NAME,
                why: "anonymous dataspaces are named by the manager",
            });
        }
        if len == 0 {
            return Err(CreateError::Empty {
                manager: Self::NAME,
            });
        }
        let store = SwapStore::create(&self.dir, len)?;
        let mut t = self.table();
        let n = t.next;
        t.next += 1;
        t.entries.insert(n, Entry::Closed(Held::Swap(store)));
        Ok(DataspaceId::Anonymous(n))
    }

    fn delete(&self, id: &DataspaceId) -> Result<(), DeleteError> {
        let no_such = |id| {
            DeleteError::from(NoSuch {
                manager: Self::NAME,
                id,
            })
        };
        let n = number(id, no_such)?;
        let mut t = self.table();
        match t.entries.get(&n) {
            None => Err(no_such(id.clone())),
            Some(Entry::Open { .. }) => Err(DeleteError::Open(id.clone())),
            Some(Entry::Closed(_)) => {
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
        crate::hand_over(self, id, to)
    }
}
