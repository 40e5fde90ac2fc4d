//! A frame pool shared by regions: HiPEC's private frame pools drawn from
//! one global frame manager ([`pagepilot_frames::FrameManager`], the same
//! logic the simulator runs). A region mapped into a pool registers its
//! budget as its `minFrame`; its policy's `Request`/`Release`
//! ([`pagepilot_policy::Memory::request_frames`]) draw from the pool; when
//! the pool asks frames back (its `partition_burst`, or a newcomer short
//! of its minimum), the pool's reclaimer shrinks the holders first
//! allocated first: the region's policy names the pages (`ReclaimFrame`),
//! its fallback the rest, and dirty ones are written back before their
//! frames are freed, outside the faulting threads.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use pagepilot_frames::{FrameError, FrameManager, HolderId, HolderStats, Reclaim};
use serde::Serialize;

use crate::engine::Shared;
use crate::limit::{self, Monotonic, SharedRate};
use crate::sys::PAGE;

/// Frames shared by regions. Cheap to clone: clones name the same pool.
#[derive(Clone)]
pub struct Pool {
    shared: Arc<PoolShared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("stats", &self.stats())
            .finish()
    }
}

/// The pool's state, shared by its regions and its reclaimer.
pub(crate) struct PoolShared {
    manager: Mutex<FrameManager<Monotonic>>,
    /// The regions drawing from the pool.
    regions: Mutex<Vec<(HolderId, Weak<Shared>)>>,
    /// Reclamations for the reclaimer.
    orders: Mutex<Vec<Reclaim>>,
    wake: Condvar,
    /// RAPHA's controller of the pool's regions with fault limits: the
    /// system limit bounds them together.
    pub(crate) rate: SharedRate,
}

/// What a pool holds, and each region's part.
#[derive(Clone, Debug, Serialize)]
pub struct PoolStats {
    /// Frames in the pool.
    pub total_frames: usize,
    /// Frames no region holds.
    pub free_frames: usize,
    /// Each region's frames and history, in the order they joined.
    pub holders: Vec<HolderStats>,
}

/// A pool that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Its size is not one page or more.
    #[error("a frame pool needs at least one page ({PAGE} bytes), got {0} bytes")]
    TooSmall(usize),
    /// Its reclaimer thread could not be started.
    #[error("cannot start the pool's reclaimer thread: {0}")]
    Thread(std::io::Error),
}

impl Pool {
    /// A pool of `budget_bytes` (whole pages), its `partition_burst` half
    /// of it, regions given 10 ms to give frames back.
    pub fn new(budget_bytes: usize) -> Result<Pool, PoolError> {
        let frames = budget_bytes / PAGE;
        let manager = FrameManager::new(frames, Monotonic(Instant::now()))
            .map_err(|_| PoolError::TooSmall(budget_bytes))?;
        let shared = Arc::new(PoolShared {
            manager: Mutex::new(manager),
            regions: Mutex::new(Vec::new()),
            orders: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            rate: limit::controller(),
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("pp-pool".into())
            .spawn(move || reclaimer(weak))
            .map_err(PoolError::Thread)?;
        Ok(Pool { shared })
    }

    /// Sets the `partition_burst` watermark: when the regions hold more than
    /// this above their minimums, the excess is reclaimed.
    pub fn with_partition_burst(self, bytes: usize) -> Self {
        self.shared.manager().set_partition_burst(bytes / PAGE);
        self
    }

    /// The pool's frames and each region's part.
    pub fn stats(&self) -> PoolStats {
        let m = self.shared.manager();
        let regions = self
            .shared
            .regions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        PoolStats {
            total_frames: m.total(),
            free_frames: m.free(),
            holders: regions
                .iter()
                .filter_map(|(id, _)| m.stats(*id).ok().cloned())
                .collect(),
        }
    }

    /// The statistics as JSON.
    pub fn stats_json(&self) -> String {
        serde_json::to_string(&self.stats()).unwrap_or_else(|_| "{}".into())
    }

    pub(crate) fn shared(&self) -> &Arc<PoolShared> {
        &self.shared
    }
}

impl PoolShared {
    fn manager(&self) -> MutexGuard<'_, FrameManager<Monotonic>> {
        self.manager.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a region guaranteed `min` frames: its part of the pool,
    /// which it leaves when the part is dropped. What free frames cannot
    /// cover comes as others give frames back.
    pub(crate) fn membership(self: &Arc<Self>, min: usize) -> Result<Membership, FrameError> {
        let (holder, held, orders) = {
            let mut m = self.manager();
            let (holder, orders) = m.register(min)?;
            (holder, m.stats(holder).map_or(0, |s| s.held), orders)
        };
        self.dispatch(orders);
        Ok(Membership {
            pool: self.clone(),
            holder,
            held,
        })
    }

    /// Names the region of holder `id`, once it is mapped.
    pub(crate) fn attach(&self, id: HolderId, region: &Arc<Shared>) {
        let mut regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.push((id, Arc::downgrade(region)));
    }

    /// Region `id` left: its frames return to the pool.
    pub(crate) fn leave(&self, id: HolderId) {
        let _ = self.manager().unregister(id);
        let mut regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.retain(|(h, _)| *h != id);
        drop(regions);
        self.wake.notify_one();
    }

    /// `Request(n)` of region `id`: the frames granted.
    pub(crate) fn request(&self, id: HolderId, n: usize) -> usize {
        let Ok((granted, orders)) = self.manager().request(id, n) else {
            return 0;
        };
        self.dispatch(orders);
        granted
    }

    /// `Release(n)` of region `id`: the frames given back.
    pub(crate) fn release(&self, id: HolderId, n: usize) -> usize {
        let released = self.manager().release(id, n).unwrap_or(0);
        self.wake.notify_one();
        released
    }

    fn dispatch(&self, orders: Vec<Reclaim>) {
        if orders.is_empty() {
            return;
        }
        self.orders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(orders);
        self.wake.notify_one();
    }

    fn region(&self, id: HolderId) -> Option<Arc<Shared>> {
        let regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.iter().find(|(h, _)| *h == id)?.1.upgrade()
    }

    /// One round of the reclaimer: shrinks the regions asked to give frames
    /// back, takes by force what is overdue, then grows the regions the
    /// pool gave frames to (a minimum reached).
    fn reclaim_round(&self) {
        let orders = std::mem::take(&mut *self.orders.lock().unwrap_or_else(|p| p.into_inner()));
        for order in orders {
            if let Some(region) = self.region(order.holder) {
                let shrunk = region.shrink_budget(order.frames);
                let _ = self.manager().returned(order.holder, shrunk);
            }
        }
        // A region gone, or one that could not shrink (pinned pages), is
        // past its deadline: the manager takes the frames back.
        let late = self.manager().overdue();
        for late in late {
            if let Some(region) = self.region(late.holder) {
                region.shrink_budget(late.frames);
            }
        }
        let regions: Vec<(HolderId, Weak<Shared>)> = self
            .regions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (id, weak) in regions {
            let held = self.manager().stats(id).map_or(0, |s| s.held);
            if let Some(region) = weak.upgrade() {
                region.grow_budget_to(held);
            }
        }
    }
}

/// The pool's reclaimer: runs while the pool or one of its regions lives.
fn reclaimer(pool: Weak<PoolShared>) {
    while let Some(pool) = pool.upgrade() {
        pool.reclaim_round();
        // Deadlines are checked every 5 ms while reclamations are pending.
        let idle = pool.manager().pending().is_empty();
        let orders = pool.orders.lock().unwrap_or_else(|p| p.into_inner());
        if orders.is_empty() {
            let wait = Duration::from_millis(if idle { 100 } else { 5 });
            let _ = pool.wake.wait_timeout(orders, wait);
        }
    }
}

/// A region's place in a pool: its holder, and the frames it held when it
/// joined. The region leaves the pool, its frames with it, when this drops.
pub(crate) struct Membership {
    pool: Arc<PoolShared>,
    /// The region's holder.
    pub holder: HolderId,
    /// Frames held when it joined (its minimum, or less until others give
    /// frames back).
    pub held: usize,
}

impl Membership {
    /// The pool it belongs to.
    pub fn pool(&self) -> &Arc<PoolShared> {
        &self.pool
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.pool.leave(self.holder);
    }
}
