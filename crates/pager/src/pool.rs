//! A frame pool shared by regions: HiPEC's private frame pools drawn from
//! one global frame manager ([`pagepilot_frames::FrameManager`], the same
//! logic the simulator runs). A region mapped into a pool registers its
//! `min_frames` (its budget unless set) as its `minFrame` and requests the
//! rest of its budget; its policy's `Request`/`Release`
//! ([`pagepilot_policy::Memory::request_frames`]) draw from the pool; when
//! the pool asks frames back (its `partition_burst`, or a newcomer short
//! of its minimum), the pool's reclaimer asks the holders first allocated
//! first (normal reclamation: free frames, then the pages the region's
//! policy names, a program's `ReclaimFrame` event); what a region has not
//! given back by the deadline is taken by force (the engine's fallback
//! names the pages) and reported. Dirty pages are written back by the
//! reclaimer before their frames are freed, outside the faulting threads
//! (HiPEC's I/O handling).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use pagepilot_frames::{FrameError, FrameManager, HolderId, HolderStats, RateError, Reclaim};
use serde::Serialize;

use crate::limit::{self, Monotonic, SharedRate};
use crate::shared::Shared;
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
    /// Reclamations of regions not attached yet (still being mapped).
    deferred: Mutex<Vec<Reclaim>>,
    /// Pages the regions' policies asked to flush (HiPEC's Flush), for the
    /// reclaimer to write back; pushed under the `orders` lock, so that
    /// the reclaimer, which checks both under it, misses no wake-up.
    flushes: Mutex<Vec<(HolderId, Vec<u32>)>>,
    wake: Condvar,
    /// RAPHA's controller of the pool's regions with fault limits: the
    /// system limit bounds them together.
    pub(crate) rate: SharedRate,
    /// Its budget fitted in the memory cgroup.
    fitted: Box<crate::cgroup::Fitted>,
}

/// What a pool holds, and each region's part.
#[derive(Clone, Debug, Serialize)]
pub struct PoolStats {
    /// Frames in the pool.
    pub total_frames: usize,
    /// Frames no region holds.
    pub free_frames: usize,
    /// Each region's frames and history, in the order they joined
    /// (`forced` and `forced_incidents`: reclamations a region did not
    /// complete by the deadline, taken by force).
    pub holders: Vec<HolderStats>,
    /// RAPHA: the pool's system fault limit per system period, what the
    /// regions' processor reserves leave (Eq. 4).
    pub system_fault_limit: u64,
    /// RAPHA: the processor share the pool's regions reserve together.
    pub reserved_pc: f64,
    /// The budget asked, if it was cut to what the memory cgroup left.
    pub budget_cut: Option<crate::cgroup::BudgetCut>,
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
    /// Its rate controller refused a setting (a fault unit of zero).
    #[error("the pool's fault-rate controller refused")]
    Rate(#[from] RateError),
    /// A setting that only a pool no region has joined yet can take.
    #[error("{0} is set before any region joins the pool")]
    InUse(&'static str),
}

impl Pool {
    /// A pool of `budget_bytes` (whole pages), its `partition_burst` half
    /// of it, regions given 10 ms to give frames back.
    pub fn new(budget_bytes: usize) -> Result<Pool, PoolError> {
        if budget_bytes < PAGE {
            return Err(PoolError::TooSmall(budget_bytes));
        }
        let (frames, fitted) = crate::cgroup::fit(budget_bytes / PAGE);
        let manager = FrameManager::new(frames, Monotonic(Instant::now()))
            .map_err(|_| PoolError::TooSmall(budget_bytes))?;
        let shared = Arc::new(PoolShared {
            manager: Mutex::new(manager),
            regions: Mutex::new(Vec::new()),
            orders: Mutex::new(Vec::new()),
            deferred: Mutex::new(Vec::new()),
            flushes: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            rate: limit::controller(),
            fitted,
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

    /// Sets the processor time one fault takes (RAPHA's `fault_unit`,
    /// 20 us by default): with the regions' reserves it sets the pool's
    /// system fault limit (Eq. 4) and what admission control lets in (Eq.
    /// 2). Only before a region joins.
    pub fn with_fault_unit(self, unit: Duration) -> Result<Self, PoolError> {
        if !self.stats().holders.is_empty() {
            return Err(PoolError::InUse("the fault unit"));
        }
        let control = limit::rate_control(unit)?;
        *self.shared.rate.lock().unwrap_or_else(|p| p.into_inner()) = control;
        Ok(self)
    }

    /// Sets how long a region has to give frames back before they are
    /// taken by force (10 ms by default).
    pub fn with_deadline(self, deadline: Duration) -> Self {
        let ns = deadline.as_nanos().min(u64::MAX as u128) as u64;
        self.shared.manager().set_deadline_ns(ns);
        self
    }

    /// The pool's frames and each region's part.
    pub fn stats(&self) -> PoolStats {
        let (system_fault_limit, reserved_pc) = {
            let rate = self.shared.rate.lock().unwrap_or_else(|p| p.into_inner());
            // + 0.0: an empty sum of reserves is -0.0.
            (rate.system_fault_limit(), rate.reserved_pc() + 0.0)
        };
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
            system_fault_limit,
            reserved_pc,
            budget_cut: self.shared.fitted.cut,
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

    /// Registers a region guaranteed `min` frames that starts with up to
    /// `start`: its part of the pool, which it leaves when the part is
    /// dropped. What free frames cannot cover of the minimum comes as others
    /// give frames back; above it, the region `Request`s what it starts
    /// with beyond, granted from free frames only.
    pub(crate) fn membership(
        self: &Arc<Self>,
        min: usize,
        start: usize,
    ) -> Result<Membership, FrameError> {
        let (holder, held, orders) = {
            let mut m = self.manager();
            let (holder, mut orders) = m.register(min)?;
            let reached = m.stats(holder).is_ok_and(|s| s.held == min);
            if start > min && reached {
                orders.extend(m.request(holder, start - min)?.1);
            }
            (holder, m.stats(holder).map_or(0, |s| s.held), orders)
        };
        // An order to this region itself (a start above the partition
        // burst) waits until it is attached.
        self.dispatch(orders);
        Ok(Membership {
            pool: self.clone(),
            holder,
            held,
        })
    }

    /// Names the region of holder `id`, once it is mapped. Its budget
    /// becomes what it holds now: frames given to it (its minimum reached)
    /// or taken by force while it was being mapped are counted.
    pub(crate) fn attach(&self, id: HolderId, region: &Arc<Shared>) {
        let m = self.manager();
        if let Ok(s) = m.stats(id) {
            // No fault has reached the region yet: nobody else holds its
            // lock, so taking it under the manager's cannot deadlock.
            region.lock().table.set_budget(s.held.max(1));
        }
        let mut regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.push((id, Arc::downgrade(region)));
        drop(regions);
        drop(m);
        let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        let (mine, others) = std::mem::take(&mut *deferred)
            .into_iter()
            .partition(|r| r.holder == id);
        *deferred = others;
        drop(deferred);
        self.dispatch(mine);
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

    /// HiPEC's I/O handling: the pages region `id`'s policy asked to flush
    /// are written back by the reclaimer, so that the thread serving the
    /// fault does not wait for the disk. They stay dirty in memory until then.
    pub(crate) fn flush_later(&self, id: HolderId, pages: Vec<u32>) {
        let orders = self.orders.lock().unwrap_or_else(|p| p.into_inner());
        let mut flushes = self.flushes.lock().unwrap_or_else(|p| p.into_inner());
        flushes.push((id, pages));
        drop(flushes);
        drop(orders);
        self.wake.notify_one();
    }

    fn has_flushes(&self) -> bool {
        !self
            .flushes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// What holder `id` holds, and its history.
    pub(crate) fn holder_stats(&self, id: HolderId) -> Option<HolderStats> {
        self.manager().stats(id).ok().cloned()
    }

    /// Frames holder `id` is still asked to give back.
    fn due(&self, id: HolderId) -> usize {
        self.manager().asked_of(id)
    }

    fn region(&self, id: HolderId) -> Option<Arc<Shared>> {
        let regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.iter().find(|(h, _)| *h == id)?.1.upgrade()
    }

    /// One round of the reclaimer: asks the regions to give frames back
    /// (normal reclamation), takes by force what is overdue, then grows the
    /// regions the pool gave frames to (a minimum reached).
    fn reclaim_round(&self) {
        let flushes = std::mem::take(&mut *self.flushes.lock().unwrap_or_else(|p| p.into_inner()));
        for (id, pages) in flushes {
            // A region gone was flushed whole as it was unmapped.
            if let Some(region) = self.region(id) {
                // A page whose write-back fails stays dirty in memory.
                let _ = region.flush(Some(&pages));
            }
        }
        let orders = std::mem::take(&mut *self.orders.lock().unwrap_or_else(|p| p.into_inner()));
        let mut unattached = Vec::new();
        for mut order in orders {
            // Only what is still due: an order that waited may have been
            // taken by force meanwhile, or its region gone.
            order.frames = order.frames.min(self.due(order.holder));
            if order.frames == 0 {
                continue;
            }
            match self.region(order.holder) {
                Some(region) => {
                    let given = region.give_back(order.frames);
                    let _ = self.manager().returned(order.holder, given);
                }
                // Still being mapped: asked once it is attached (the
                // deadline runs); gone: its frames are back already.
                None => unattached.push(order),
            }
        }
        // What was not given back in time (a policy that named too few
        // pages, pages whose write-back failed) is taken by force: the
        // engine's fallback names the pages.
        let late = self.manager().overdue();
        for late in &late {
            if let Some(region) = self.region(late.holder) {
                region.take_back(late.frames);
            }
        }
        unattached.retain(|o| self.due(o.holder) > 0);
        if !unattached.is_empty() {
            let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
            deferred.extend(unattached);
        }
        // A region attached meanwhile finds its orders in `deferred`: move
        // the ones of attached regions back.
        let attached: Vec<HolderId> = self
            .regions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(h, _)| *h)
            .collect();
        let moved: Vec<Reclaim> = {
            let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
            let (moved, still) = std::mem::take(&mut *deferred)
                .into_iter()
                .partition(|r| attached.contains(&r.holder));
            *deferred = still;
            moved
        };
        self.dispatch(moved);
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
        let idle = pool.manager().next_deadline_ns().is_none();
        let orders = pool.orders.lock().unwrap_or_else(|p| p.into_inner());
        if orders.is_empty() && !pool.has_flushes() {
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

    /// What the region holds in the pool, and its history.
    pub fn held_stats(&self) -> Option<HolderStats> {
        self.pool.holder_stats(self.holder)
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.pool.leave(self.holder);
    }
}
