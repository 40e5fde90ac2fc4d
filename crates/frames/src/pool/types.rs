//! The frame manager's public types: holders, refusals, orders, stats.

use serde::Serialize;

/// A holder of frames: a region live, a process in the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HolderId(pub u32);

/// Refusals of the frame manager.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A pool needs at least one frame.
    #[error("a frame pool needs at least one frame")]
    EmptyPool,
    /// The minimum does not fit beside the other holders' minimums.
    #[error(
        "minFrame of {asked} frames does not fit: the pool holds {total} frames, \
         {reserved} of them other holders' minimums"
    )]
    MinDoesNotFit {
        /// The minimum asked for.
        asked: usize,
        /// Frames in the pool.
        total: usize,
        /// The other holders' minimums.
        reserved: usize,
    },
    /// Every holder id was given out (ids are never reused).
    #[error("this frame pool has registered 2^32 holders: no id is left")]
    IdsExhausted,
    /// No such holder (never registered, or gone).
    #[error("no holder {0:?} in this frame pool")]
    UnknownHolder(HolderId),
}

/// Frames asked back from a holder by a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Reclaim {
    /// Who gives them back.
    pub holder: HolderId,
    /// How many (still) to give back.
    pub frames: usize,
    /// When they are taken by force, clock nanoseconds.
    pub deadline_ns: u64,
}

/// What a holder holds and what happened to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HolderStats {
    /// Its guaranteed minimum.
    pub min: usize,
    /// Frames it holds now.
    pub held: usize,
    /// Frames it asked for with `Request`.
    pub requested: u64,
    /// Of those, frames granted.
    pub granted: u64,
    /// Frames it gave back with `Release`.
    pub released: u64,
    /// Frames it gave back when asked (normal reclamation).
    pub reclaimed: u64,
    /// Frames taken from it by force after a deadline passed.
    pub forced: u64,
    /// Reclamations it did not complete in time.
    pub forced_incidents: u64,
}

/// One pass of forced reclamation ([`FrameManager::force_overdue`]).
///
/// [`FrameManager::force_overdue`]: super::FrameManager::force_overdue
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Overdue {
    /// The orders whose deadline passed, each once, oldest first, with the
    /// frames they still asked for.
    pub late: Vec<Reclaim>,
    /// Per holder with a late order, in the order of its first late order:
    /// the frames taken from it now. Fewer than its late orders asked when
    /// it holds fewer (it released frames meanwhile); possibly 0.
    pub forced: Vec<(HolderId, usize)>,
}
