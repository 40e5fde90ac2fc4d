//! What an anonymous manager holds for a dataspace: a swap file of its own,
//! or a dataspace transferred to it, whose store keeps the pages instead
//! (SawMill, Figure 5: persistence added by a persistent dataspace below an
//! anonymous one).

use std::any::Any;
use std::sync::Arc;

use crate::{ManagerKey, PageStore, SwapStore};

/// An anonymous dataspace over a transferred one: the pages live in the
/// lower store (read-write; zero where nothing was ever written, as the
/// lower dataspace reads). Everything is passed through.
pub(crate) struct OverStore {
    lower: Box<dyn PageStore>,
    /// The lower dataspace's stack, bottom first.
    below: Vec<ManagerKey>,
    /// Held while open from the manager (see [`SwapStore`]'s).
    attached: Option<Arc<()>>,
}

/// A closed anonymous dataspace, as its manager keeps it.
pub(crate) enum Held {
    /// A swap file of the manager's own.
    Swap(SwapStore),
    /// A transferred dataspace's store.
    Over(OverStore),
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::Swap(s) => s.fmt(f),
            Held::Over(o) => f
                .debug_struct("OverStore")
                .field("len", &o.lower.size())
                .field("below", &o.below)
                .finish(),
        }
    }
}

impl Held {
    /// Over `lower`, a dataspace served through `below` (bottom first).
    pub fn over(lower: Box<dyn PageStore>, below: Vec<ManagerKey>) -> Self {
        Held::Over(OverStore {
            lower,
            below,
            attached: None,
        })
    }

    /// The dataspace's length.
    pub fn size(&self) -> u64 {
        match self {
            Held::Swap(s) => s.size(),
            Held::Over(o) => o.lower.size(),
        }
    }

    /// The managers below the anonymous one (none for its own swap file).
    pub fn below(&self) -> &[ManagerKey] {
        match self {
            Held::Swap(_) => &[],
            Held::Over(o) => &o.below,
        }
    }

    /// The store, handed out open: `alive` tells the manager it is.
    pub fn open(self, alive: Arc<()>) -> Box<dyn PageStore> {
        match self {
            Held::Swap(mut s) => {
                s.attached = Some(alive);
                Box::new(s)
            }
            Held::Over(mut o) => {
                o.attached = Some(alive);
                Box::new(o)
            }
        }
    }

    /// A store handed out by [`Held::open`], taken back: it and the token
    /// it was handed out with (`None`: not one of these, or not open).
    pub fn take_back(store: Box<dyn Any>) -> Option<(Held, Arc<()>)> {
        match store.downcast::<SwapStore>() {
            Ok(mut s) => {
                let alive = s.attached.take()?;
                Some((Held::Swap(*s), alive))
            }
            Err(other) => {
                let mut o = other.downcast::<OverStore>().ok()?;
                let alive = o.attached.take()?;
                Some((Held::Over(*o), alive))
            }
        }
    }
}

impl PageStore for OverStore {
    crate::store::forward_pages!(self => self.lower);

    fn pinned(&self) -> bool {
        self.lower.pinned()
    }

    fn persistent(&self) -> bool {
        // The pages go to the lower dataspace, which outlives the region.
        true
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
