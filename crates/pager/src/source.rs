//! Where a region's frames come from when its budget is not fixed at map
//! time: a frame pool in this process, or the pagepilot daemon, which
//! shares the machine's frames among processes. Either way the policy's
//! `Request`/`Release` go there, and the region's budget follows what the
//! source says it holds.

use std::sync::Arc;

use pagepilot_frames::{HolderId, HolderStats};

use crate::pool::{Membership, PoolShared};

/// A region's frame source.
pub(crate) enum Source {
    /// A [`crate::Pool`] of this process.
    Pool(Membership),
    /// The daemon, through this process's [`crate::Client`].
    Daemon(crate::daemon::Membership),
}

impl Source {
    /// HiPEC's `Request(n)`: frames granted now. The daemon answers later
    /// (faults never wait for a message): 0 now, the budget grows when
    /// the grant arrives.
    pub fn request(&self, n: usize) -> usize {
        match self {
            Source::Pool(m) => m.pool().request(m.holder, n),
            Source::Daemon(m) => {
                m.request(n);
                0
            }
        }
    }

    /// HiPEC's `Release(n)`: frames given back.
    pub fn release(&self, n: usize) -> usize {
        match self {
            Source::Pool(m) => m.pool().release(m.holder, n),
            Source::Daemon(m) => m.release(n),
        }
    }

    /// The pool whose reclaimer writes back the pages a policy asked to
    /// flush; `None`: the region writes them itself.
    pub fn flusher(&self) -> Option<(Arc<PoolShared>, HolderId)> {
        match self {
            Source::Pool(m) => Some((m.pool().clone(), m.holder)),
            Source::Daemon(_) => None,
        }
    }

    /// The daemon's handle of the region, if it is the daemon's.
    pub fn daemon(&self) -> Option<crate::daemon::DaemonRegion> {
        match self {
            Source::Pool(_) => None,
            Source::Daemon(m) => Some(m.handle()),
        }
    }

    /// What the region gave back when asked, and what was taken by force.
    pub fn holder_stats(&self) -> Option<HolderStats> {
        match self {
            Source::Pool(m) => m.held_stats(),
            Source::Daemon(m) => Some(m.holder_stats()),
        }
    }
}
