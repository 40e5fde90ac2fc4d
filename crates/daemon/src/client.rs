//! What the daemon keeps per client (an application kernel, in the Cache
//! Kernel's words) and per region (a holder in the frame manager, a task in
//! RAPHA's controller).

use std::collections::BTreeMap;

use pagepilot_frames::{HolderId, TaskId};
use pagepilot_protocol::{RegionFiles, RegionId};

use crate::accounts::RegionCost;
use crate::limits::{AccountId, Limits};
use crate::pins::PinSet;

/// Who is at the other end of a connection, as the kernel reports it
/// (`SO_PEERCRED`), never as the client claims.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Credentials {
    /// Its process.
    pub pid: u32,
    /// Its user: the first key of the quota lookup.
    pub uid: u32,
    /// Its primary group: the second key.
    pub gid: u32,
}

/// Where a client is in its conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Session {
    /// Connected, `Hello` not received yet.
    Connected,
    /// `Welcome` sent: the version both speak.
    Welcomed {
        /// The version negotiated.
        version: u16,
    },
}

/// A region registered by a client.
#[derive(Clone, Debug)]
pub(crate) struct Region {
    /// Its holder in the frame manager.
    pub holder: HolderId,
    /// Its task in RAPHA's controller, when it declared a fault limit or a
    /// processor reserve.
    pub task: Option<TaskId>,
    /// Its `minFrame`.
    pub min_frames: u64,
    /// The most frames it asks for.
    pub budget_frames: u64,
    /// What it costs its account besides frames: its fault limit
    /// (faults/s), its processor reserve, its descriptors.
    pub cost: RegionCost,
    /// Frames it is committed to as its account last counted them: the
    /// larger of what it holds and its `minFrame`.
    pub committed: u64,
    /// Its pinned pages.
    pub pins: PinSet,
    /// The descriptors that came with it (kept by the I/O loop).
    pub files: RegionFiles,
    /// The fault counts its client reported (`Report`), for status.
    pub reports: FaultReports,
}

/// A region's cumulative fault counts as its client reports them: the
/// last two reports, so that status can give a rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FaultReports {
    /// The report before the last (registration counts as a report of no
    /// faults, so that the first report already gives a rate).
    pub previous: FaultCount,
    /// The last report.
    pub last: FaultCount,
}

/// One report: faults and postponed faults since registration, and when
/// (clock nanoseconds) it arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FaultCount {
    pub faults: u64,
    pub postponed: u64,
    pub at_ns: u64,
}

impl FaultReports {
    /// No faults yet, at `now_ns` (the registration).
    pub fn starting(now_ns: u64) -> FaultReports {
        let zero = FaultCount {
            at_ns: now_ns,
            ..FaultCount::default()
        };
        FaultReports {
            previous: zero,
            last: zero,
        }
    }

    /// A report received at `now_ns`. Two reports at the same instant
    /// make one (the later counts), so the rate never divides by zero.
    pub fn record(&mut self, faults: u64, postponed: u64, now_ns: u64) {
        if now_ns > self.last.at_ns {
            self.previous = self.last;
        }
        self.last = FaultCount {
            faults,
            postponed,
            at_ns: now_ns.max(self.last.at_ns),
        };
    }

    /// Faults per second between the last two reports, rounded down; 0
    /// when no time passed between them or the count went backwards (a
    /// client's counters are not trusted to be monotonic).
    pub fn faults_per_sec(&self) -> u64 {
        let faults = self.last.faults.saturating_sub(self.previous.faults);
        let ns = self.last.at_ns.saturating_sub(self.previous.at_ns);
        if ns == 0 {
            return 0;
        }
        let rate = u128::from(faults) * 1_000_000_000 / u128::from(ns);
        u64::try_from(rate).unwrap_or(u64::MAX)
    }
}

/// A connected client.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    /// Who it is.
    pub peer: Credentials,
    /// Whose usage it adds to.
    pub account: AccountId,
    /// What its account may hold.
    pub quotas: Limits,
    /// Hello received or not.
    pub session: Session,
    /// Its regions, by its own names.
    pub regions: BTreeMap<RegionId, Region>,
}

impl Client {
    pub fn new(peer: Credentials, account: AccountId, quotas: Limits) -> Client {
        Client {
            peer,
            account,
            quotas,
            session: Session::Connected,
            regions: BTreeMap::new(),
        }
    }

    /// Pages pinned over all its regions.
    pub fn pinned(&self) -> u64 {
        self.regions.values().map(|r| r.pins.pages()).sum()
    }
}

/// Faults per second a limit of `limit` faults per `period_us` allows,
/// rounded up.
pub(crate) fn faults_per_sec(limit: u64, period_us: u64) -> u64 {
    if limit == 0 || period_us == 0 {
        return 0;
    }
    let rate = (u128::from(limit) * 1_000_000).div_ceil(u128::from(period_us));
    u64::try_from(rate).unwrap_or(u64::MAX)
}
