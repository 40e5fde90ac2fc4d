//! Stacking managers by `transfer` (SawMill, Figure 5): a dataspace handed
//! to another manager, which serves it from then on with semantics of its
//! own (compression, persistence, lazy copy, pinning) over the transferred
//! dataspace as its lower layer. A stack is bounded ([`MAX_STACK_DEPTH`])
//! and a manager may appear in it once: handing a dataspace to a manager it
//! is already stacked on would make the manager its own lower layer.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{NoSuch, TransferError, Unsupported};
use crate::manager::{Access, DataspaceId, Flavour, Manager, Operation};
use crate::PageStore;

/// The most managers a dataspace may be stacked through, its own included.
pub const MAX_STACK_DEPTH: usize = 8;

/// A manager instance within the process: its name and a number no other
/// instance has (a stateless manager, such as the file manager, may share
/// one across instances: they serve the same dataspaces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ManagerKey {
    /// The manager's name.
    pub name: &'static str,
    /// Which instance.
    pub instance: u64,
}

impl ManagerKey {
    /// A key no other call returns.
    pub fn fresh(name: &'static str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ManagerKey {
            name,
            instance: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl fmt::Display for ManagerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} manager #{}", self.name, self.instance)
    }
}

/// A dataspace handed over by `transfer`: opened read-write by the manager
/// that served it, which no longer does.
pub struct Lower {
    /// Its id under the manager that handed it over.
    pub id: DataspaceId,
    /// Its pages.
    pub store: Box<dyn PageStore>,
    /// The managers it was served through, bottom first, ending with the
    /// one that handed it over.
    pub stack: Vec<ManagerKey>,
}

impl fmt::Debug for Lower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lower")
            .field("id", &self.id)
            .field("len", &self.store.size())
            .field("stack", &self.stack)
            .finish()
    }
}

/// The common half of `transfer`, for managers that support it: refuses a
/// manager that does not take stacked dataspaces, a cycle, a stack deeper
/// than [`MAX_STACK_DEPTH`] and a dataspace `to` does not [admit]
/// ([`Manager::admit`]), then opens `id` read-write from `from` and hands
/// it to `to`, whose id for it is returned. `from` stops serving `id` (the
/// store is `to`'s now).
///
/// [admit]: Manager::admit
pub fn hand_over(
    from: &dyn Manager,
    id: &DataspaceId,
    to: &dyn Manager,
) -> Result<DataspaceId, TransferError> {
    let stack = from.stack(id).ok_or_else(|| NoSuch {
        manager: from.name(),
        id: id.clone(),
    })?;
    hand_over_with(from, id, to, stack, || {
        from.open(id, Access::ReadWrite, None)
    })
}

/// [`hand_over`] for a manager that hands over something other than what
/// its `open` gives (a pinned manager hands over the store it pinned, not
/// its pinned view of it): `stack` is the dataspace's stack as `to` will
/// see it below itself, `take` gives up the store once the checks passed.
pub fn hand_over_with(
    from: &dyn Manager,
    id: &DataspaceId,
    to: &dyn Manager,
    stack: Vec<ManagerKey>,
    take: impl FnOnce() -> Result<Box<dyn PageStore>, crate::OpenError>,
) -> Result<DataspaceId, TransferError> {
    if !to.interrogate().offers(Flavour::Stacked) {
        return Err(Unsupported {
            manager: to.name(),
            operation: Operation::Transfer,
            flavour: Some(Flavour::Stacked),
        }
        .into());
    }
    // Back to the manager right below, which takes its own store back:
    // the stack shrinks. Anywhere else in the stack: a cycle.
    let returning = stack.last() == Some(&to.key())
        && to.takes_back()
        && stack.iter().filter(|&&k| k == to.key()).count() == 1;
    if stack.contains(&to.key()) && !returning {
        return Err(TransferError::Cycle {
            id: id.clone(),
            to: to.key(),
            stack,
        });
    }
    if stack.len() >= MAX_STACK_DEPTH {
        return Err(TransferError::TooDeep {
            id: id.clone(),
            depth: stack.len() + 1,
        });
    }
    // The length, for `admit`: a manager that cannot say (its stack
    // answered, so it has the dataspace) is treated as having none.
    let len = from.identify(id).map_or(0, |i| i.len);
    to.admit(id, len)?;
    let store = take().map_err(|source| TransferError::Open {
        id: id.clone(),
        source: Box::new(source),
    })?;
    to.receive(Lower {
        id: id.clone(),
        store,
        stack,
    })
}
