//! What one account may hold: a user over all its connections, or a group
//! whose members share one account. A hostile user may open as many
//! connections as it likes; what it may take from the machine is bounded
//! here, once for all of them.

use pagepilot_protocol::{Quotas, PPM};

use crate::config::{
    DEFAULT_CONNECTIONS, DEFAULT_DESCRIPTORS, DEFAULT_PROCESSOR_SHARE_PPM, DEFAULT_REGIONS,
};

/// Who a client's usage is counted against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccountId {
    /// A user: every connection of this uid adds up.
    User(u32),
    /// A group whose entry is `shared`: every member with no uid entry of
    /// its own adds up.
    Group(u32),
}

impl std::fmt::Display for AccountId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccountId::User(uid) => write!(f, "uid {uid}"),
            AccountId::Group(gid) => write!(f, "shared gid {gid}"),
        }
    }
}

/// The quotas of one account, summed over all its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Frames its regions may be committed to together (each the larger of
    /// what it holds and its `minFrame`).
    pub frames: u64,
    /// Of those, frames it may pin (at most `frames`).
    pub pinned_frames: u64,
    /// Faults per second its regions' limits may add up to.
    pub fault_rate: u64,
    /// Regions it may register.
    pub regions: u32,
    /// RAPHA processor reserve its regions may add up to, parts per
    /// million of one processor.
    pub cpu_reserve_ppm: u32,
    /// Connections it may hold open.
    pub connections: u32,
    /// Descriptors the daemon may hold for it: two per connection (the
    /// socket and the pidfd of its process), one per region file.
    pub descriptors: u32,
}

/// Descriptors the daemon holds per connection: the socket and a pidfd.
pub const DESCRIPTORS_PER_CONNECTION: u32 = 2;

impl Limits {
    /// The defaults for a machine of `budget` frames whose faults take
    /// `fault_unit_us` each: half the frames, no pins, 20% of a processor
    /// in fault limits and as much in reserves, 64 regions, 32 connections,
    /// 256 descriptors. Two users at their quotas leave room for a third.
    pub fn defaults(budget: u64, fault_unit_us: u64) -> Limits {
        let share = u64::from(DEFAULT_PROCESSOR_SHARE_PPM);
        Limits {
            frames: budget.div_ceil(2),
            pinned_frames: 0,
            // Faults/s whose handling takes `share` of a processor.
            fault_rate: share / fault_unit_us.max(1),
            regions: DEFAULT_REGIONS,
            cpu_reserve_ppm: DEFAULT_PROCESSOR_SHARE_PPM.min(PPM),
            connections: DEFAULT_CONNECTIONS,
            descriptors: DEFAULT_DESCRIPTORS,
        }
    }

    /// The part a client is told in `Welcome`.
    pub fn quotas(&self) -> Quotas {
        Quotas {
            frames: self.frames,
            pinned_frames: self.pinned_frames,
            fault_rate: self.fault_rate,
            regions: self.regions,
        }
    }
}
