//! The one budget of a compressed manager, shared by the tiers of all its
//! dataspaces: one clock, so that their least recently used pages compare,
//! the bytes they hold together, and the eviction that brings them back
//! under the budget by taking, each time, the oldest pages of whichever
//! tier holds the oldest page.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::tier::Tier;

/// Pages a tier gives up at most per turn of the pool's eviction: the
/// oldest page of the pool with its tier's next oldest ones that are older
/// than every other tier's, in one write down.
const EVICTION_BATCH_PAGES: usize = 32;

/// A compressed manager's budget and the tiers that share it.
pub(crate) struct TierPool {
    budget: usize,
    clock: AtomicU64,
    bytes: AtomicUsize,
    tiers: Mutex<Vec<Weak<Tier>>>,
    /// One eviction at a time: two would both see the pool over its budget
    /// and evict twice as much.
    evicting: Mutex<()>,
}

impl std::fmt::Debug for TierPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TierPool")
            .field("budget", &self.budget)
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl TierPool {
    /// A pool of `budget` bytes.
    pub fn new(budget: usize) -> Arc<Self> {
        Arc::new(TierPool {
            budget,
            clock: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
            tiers: Mutex::default(),
            evicting: Mutex::default(),
        })
    }

    /// The budget, bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes held by all its tiers.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The next stamp of the shared LRU order (never 0: 0 marks a page out
    /// of the order).
    pub fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A tier's pages grew by `n` bytes.
    pub fn grow(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// A tier's pages shrank by `n` bytes.
    pub fn shrink(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
    }

    /// Whether the tiers hold more than the budget.
    pub fn over(&self) -> bool {
        self.bytes() > self.budget
    }

    /// Adds `tier` to the pool (kept until it is dropped).
    pub fn join(&self, tier: &Arc<Tier>) {
        let mut tiers = self.tiers();
        tiers.retain(|t| t.strong_count() > 0);
        tiers.push(Arc::downgrade(tier));
    }

    fn tiers(&self) -> MutexGuard<'_, Vec<Weak<Tier>>> {
        self.tiers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Evicts the pool's least recently used pages, a batch of one tier at
    /// a time, until its tiers hold at most 7/8 of the budget (dirty pages
    /// are written down to their tier's lower dataspace first). A failed
    /// write down is returned at once; its pages stay in their tier, dirty.
    pub fn make_room(&self) -> io::Result<()> {
        let _one = self.evicting.lock().unwrap_or_else(|p| p.into_inner());
        let target = self.budget - self.budget / 8;
        while self.bytes() > target {
            let live: Vec<Arc<Tier>> = self.tiers().iter().filter_map(Weak::upgrade).collect();
            let mut by_age: Vec<(u64, &Arc<Tier>)> = live
                .iter()
                .filter_map(|t| t.oldest_stamp().map(|s| (s, t)))
                .collect();
            by_age.sort_by_key(|(s, _)| *s);
            let Some(&(_, tier)) = by_age.first() else {
                // Nothing left in any order (all being written down).
                break;
            };
            // Its pages older than every other tier's oldest.
            let until = by_age.get(1).map_or(u64::MAX, |(s, _)| *s);
            let want = self.bytes().saturating_sub(target).max(1);
            if tier.evict(want, EVICTION_BATCH_PAGES, until)? == 0 {
                break;
            }
        }
        Ok(())
    }
}
