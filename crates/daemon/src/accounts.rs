//! What each account uses, summed over all its connections, checked against
//! its [`Limits`] before anything is granted; and the daemon's descriptors
//! across every account, checked against the budget the server found
//! (`RLIMIT_NOFILE`). Counts are kept as they change, so each check is
//! O(log accounts), whatever a user registered.

use std::collections::BTreeMap;

use crate::limits::{AccountId, Limits, DESCRIPTORS_PER_CONNECTION};

/// Why an account may not have more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// All the connections it may hold are open.
    #[error("{account} holds {limit} connections, its quota, over all its processes")]
    Connections {
        /// Whose.
        account: AccountId,
        /// Its quota.
        limit: u32,
    },
    /// All the regions it may register are registered.
    #[error("{account} has {limit} regions registered over all its connections, its quota")]
    Regions {
        /// Whose.
        account: AccountId,
        /// Its quota.
        limit: u32,
    },
    /// Frames beyond its quota.
    #[error("{asked} more frames bring {account}'s frames to {total}, its quota is {limit}")]
    Frames {
        /// Whose.
        account: AccountId,
        /// Frames asked (a `minFrame`).
        asked: u64,
        /// What it would be committed to.
        total: u64,
        /// Its quota.
        limit: u64,
    },
    /// Its regions hold all the frames its quota allows.
    #[error("{account}'s regions are committed to {committed} frames, its quota is {limit}")]
    NoFrameRoom {
        /// Whose.
        account: AccountId,
        /// Frames its regions are committed to.
        committed: u64,
        /// Its quota.
        limit: u64,
    },
    /// Fault limits beyond its quota.
    #[error("a limit of {asked} faults/s brings {account}'s to {total}, its quota is {limit}")]
    FaultRate {
        /// Whose.
        account: AccountId,
        /// This region's limit, faults/s.
        asked: u64,
        /// The account's limits with it.
        total: u64,
        /// Its quota.
        limit: u64,
    },
    /// Processor reserves beyond its quota.
    #[error(
        "a reserve of {asked} ppm brings {account}'s reserves to {total} ppm of a processor, \
         its quota is {limit}"
    )]
    CpuReserve {
        /// Whose.
        account: AccountId,
        /// This region's reserve.
        asked: u64,
        /// The account's reserves with it.
        total: u64,
        /// Its quota.
        limit: u32,
    },
    /// Pins beyond its quota.
    #[error("{total} pinned frames would pass {account}'s pin quota of {limit}")]
    Pins {
        /// Whose.
        account: AccountId,
        /// What it would pin.
        total: u64,
        /// Its quota.
        limit: u64,
    },
    /// Descriptors beyond its quota.
    #[error("{account} would hold {total} of the daemon's descriptors, its quota is {limit}")]
    Descriptors {
        /// Whose.
        account: AccountId,
        /// What it would hold.
        total: u64,
        /// Its quota.
        limit: u32,
    },
    /// The daemon's own descriptors are all spoken for.
    #[error(
        "the daemon holds {used} descriptors for its clients, {asked} more would pass its \
         budget of {budget} (RLIMIT_NOFILE less a reserve)"
    )]
    DaemonDescriptors {
        /// Held now for every account.
        used: u64,
        /// Asked.
        asked: u64,
        /// The budget.
        budget: u64,
    },
}

/// What an account uses now, over all its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Connections open.
    pub connections: u32,
    /// Regions registered.
    pub regions: u32,
    /// Frames its regions are committed to (each the larger of what it
    /// holds and its `minFrame`).
    pub frames: u64,
    /// Pages pinned.
    pub pinned_frames: u64,
    /// Faults/s its regions' limits add up to.
    pub fault_rate: u64,
    /// Processor reserves, ppm.
    pub cpu_reserve_ppm: u64,
    /// Descriptors the daemon holds for it.
    pub descriptors: u64,
}

/// What a region costs its account while registered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RegionCost {
    /// Its fault limit, faults/s.
    pub fault_rate: u64,
    /// Its processor reserve, ppm.
    pub cpu_reserve_ppm: u64,
    /// The descriptors that came with it.
    pub descriptors: u64,
}

#[derive(Debug)]
struct Account {
    limits: Limits,
    usage: Usage,
}

/// Every account with a connection or a region, and the daemon's
/// descriptors.
#[derive(Debug)]
pub(crate) struct Accounts {
    accounts: BTreeMap<AccountId, Account>,
    descriptors: u64,
    descriptor_budget: u64,
}

impl Accounts {
    /// No account yet; descriptors bounded only by their quotas.
    pub fn new() -> Accounts {
        Accounts {
            accounts: BTreeMap::new(),
            descriptors: 0,
            descriptor_budget: u64::MAX,
        }
    }

    /// Sets the daemon's descriptor budget (what `RLIMIT_NOFILE` leaves
    /// once the daemon's own are counted).
    pub fn set_descriptor_budget(&mut self, budget: u64) {
        self.descriptor_budget = budget;
    }

    /// What `id` uses now (zero when it has nothing).
    pub fn usage(&self, id: AccountId) -> Usage {
        self.accounts.get(&id).map(|a| a.usage).unwrap_or_default()
    }

    fn account(&mut self, id: AccountId) -> Option<&mut Account> {
        self.accounts.get_mut(&id)
    }

    fn descriptors_fit(&self, a: &Account, id: AccountId, asked: u64) -> Result<(), QuotaError> {
        let total = a.usage.descriptors.saturating_add(asked);
        if total > u64::from(a.limits.descriptors) {
            return Err(QuotaError::Descriptors {
                account: id,
                total,
                limit: a.limits.descriptors,
            });
        }
        if self.descriptors.saturating_add(asked) > self.descriptor_budget {
            return Err(QuotaError::DaemonDescriptors {
                used: self.descriptors,
                asked,
                budget: self.descriptor_budget,
            });
        }
        Ok(())
    }

    /// A connection of `id` opens; returns the quotas in force for it:
    /// `limits` for a new account, else those the account was opened with
    /// (a user whose processes run with different primary groups has one
    /// account, not one per group).
    pub fn connect(&mut self, id: AccountId, limits: Limits) -> Result<Limits, QuotaError> {
        let asked = u64::from(DESCRIPTORS_PER_CONNECTION);
        let fresh = Account {
            limits,
            usage: Usage::default(),
        };
        let a = self.accounts.get(&id).unwrap_or(&fresh);
        if a.usage.connections >= a.limits.connections {
            return Err(QuotaError::Connections {
                account: id,
                limit: a.limits.connections,
            });
        }
        self.descriptors_fit(a, id, asked)?;
        let a = self.accounts.entry(id).or_insert(fresh);
        a.usage.connections += 1;
        a.usage.descriptors += asked;
        self.descriptors += asked;
        Ok(a.limits)
    }

    /// A connection of `id` closed (its regions gone first).
    pub fn disconnect(&mut self, id: AccountId) {
        let asked = u64::from(DESCRIPTORS_PER_CONNECTION);
        if let Some(a) = self.account(id) {
            a.usage.connections = a.usage.connections.saturating_sub(1);
            a.usage.descriptors = a.usage.descriptors.saturating_sub(asked);
            self.descriptors = self.descriptors.saturating_sub(asked);
        }
        self.forget_if_idle(id);
    }

    fn forget_if_idle(&mut self, id: AccountId) {
        if self
            .accounts
            .get(&id)
            .is_some_and(|a| a.usage.connections == 0 && a.usage.regions == 0)
        {
            self.accounts.remove(&id);
        }
    }

    /// Whether `id` may register a region of `cost` whose `minFrame` is
    /// `min_frames`.
    pub fn check_region(
        &self,
        id: AccountId,
        min_frames: u64,
        cost: RegionCost,
    ) -> Result<(), QuotaError> {
        let Some(a) = self.accounts.get(&id) else {
            return Ok(());
        };
        let (l, u) = (&a.limits, &a.usage);
        if u.regions >= l.regions {
            return Err(QuotaError::Regions {
                account: id,
                limit: l.regions,
            });
        }
        let frames = u.frames.saturating_add(min_frames);
        if frames > l.frames {
            return Err(QuotaError::Frames {
                account: id,
                asked: min_frames,
                total: frames,
                limit: l.frames,
            });
        }
        let rate = u.fault_rate.saturating_add(cost.fault_rate);
        if rate > l.fault_rate {
            return Err(QuotaError::FaultRate {
                account: id,
                asked: cost.fault_rate,
                total: rate,
                limit: l.fault_rate,
            });
        }
        let reserve = u.cpu_reserve_ppm.saturating_add(cost.cpu_reserve_ppm);
        if reserve > u64::from(l.cpu_reserve_ppm) {
            return Err(QuotaError::CpuReserve {
                account: id,
                asked: cost.cpu_reserve_ppm,
                total: reserve,
                limit: l.cpu_reserve_ppm,
            });
        }
        self.descriptors_fit(a, id, cost.descriptors)
    }

    /// A region of `cost` registered, committed to `frames`.
    pub fn add_region(&mut self, id: AccountId, cost: RegionCost, frames: u64) {
        if let Some(a) = self.accounts.get_mut(&id) {
            let u = &mut a.usage;
            u.regions += 1;
            u.frames = u.frames.saturating_add(frames);
            u.fault_rate = u.fault_rate.saturating_add(cost.fault_rate);
            u.cpu_reserve_ppm = u.cpu_reserve_ppm.saturating_add(cost.cpu_reserve_ppm);
            u.descriptors = u.descriptors.saturating_add(cost.descriptors);
            self.descriptors = self.descriptors.saturating_add(cost.descriptors);
        }
    }

    /// A region of `cost`, committed to `frames` with `pinned` pages
    /// pinned, unregistered.
    pub fn remove_region(&mut self, id: AccountId, cost: RegionCost, frames: u64, pinned: u64) {
        if let Some(a) = self.accounts.get_mut(&id) {
            let u = &mut a.usage;
            u.regions = u.regions.saturating_sub(1);
            u.frames = u.frames.saturating_sub(frames);
            u.pinned_frames = u.pinned_frames.saturating_sub(pinned);
            u.fault_rate = u.fault_rate.saturating_sub(cost.fault_rate);
            u.cpu_reserve_ppm = u.cpu_reserve_ppm.saturating_sub(cost.cpu_reserve_ppm);
            u.descriptors = u.descriptors.saturating_sub(cost.descriptors);
            self.descriptors = self.descriptors.saturating_sub(cost.descriptors);
        }
        self.forget_if_idle(id);
    }

    /// Frames `id` may still be granted; an error when none.
    pub fn frame_room(&self, id: AccountId) -> Result<u64, QuotaError> {
        let Some(a) = self.accounts.get(&id) else {
            return Ok(0);
        };
        match a.limits.frames.saturating_sub(a.usage.frames) {
            0 => Err(QuotaError::NoFrameRoom {
                account: id,
                committed: a.usage.frames,
                limit: a.limits.frames,
            }),
            room => Ok(room),
        }
    }

    /// A region of `id` went from being committed to `before` frames to
    /// `after`.
    pub fn recommit(&mut self, id: AccountId, before: u64, after: u64) {
        if let Some(a) = self.account(id) {
            a.usage.frames = a.usage.frames.saturating_sub(before).saturating_add(after);
        }
    }

    /// Whether `id` may pin `added` more pages.
    pub fn check_pins(&self, id: AccountId, added: u64) -> Result<(), QuotaError> {
        let Some(a) = self.accounts.get(&id) else {
            return Ok(());
        };
        let total = a.usage.pinned_frames.saturating_add(added);
        if total > a.limits.pinned_frames {
            return Err(QuotaError::Pins {
                account: id,
                total,
                limit: a.limits.pinned_frames,
            });
        }
        Ok(())
    }

    /// `id` pinned `added` pages and unpinned `removed`.
    pub fn repin(&mut self, id: AccountId, added: u64, removed: u64) {
        if let Some(a) = self.account(id) {
            let u = &mut a.usage;
            u.pinned_frames = u
                .pinned_frames
                .saturating_add(added)
                .saturating_sub(removed);
        }
    }
}
