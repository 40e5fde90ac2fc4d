//! The pagepilot daemon's core: the system resource manager of the Cache
//! Kernel, running HiPEC's global frame manager and RAPHA's system limit
//! across processes. Pure logic, no sockets, no system calls: the I/O loop
//! (a Unix socket, `SO_PEERCRED`, `SCM_RIGHTS`) feeds it events and sends
//! what it returns.
//!
//! - [`Config`]: the machine's frame budget, reclamation deadline,
//!   `partition_burst`, RAPHA's timing, and quotas per uid, per gid and by
//!   default (frames, pinned frames, fault rate, processor reserve,
//!   regions, connections, descriptors), from TOML.
//! - Quotas are per account ([`AccountId`]: a user over all its
//!   connections, or a shared group), never per connection: a user that
//!   opens eight connections holds what one may.
//! - [`Core`]: [`Core::connect`] a process with its [`Credentials`];
//!   [`Core::on_message`] each protocol message it sends;
//!   [`Core::tick`] when time passes (deadlines missed become `Forced`);
//!   [`Core::disconnect`] when it leaves or dies (its regions unloaded
//!   before it, their frames back to the pool). Each returns the
//!   [`Outgoing`] messages to send.
//! - [`PinSet`]: a region's pinned (locked) pages, never victims.
//!
//! Faults never reach the daemon: each client serves its own; only
//! registrations, grants, reclaims, pins and status cross the socket.
//!
//! ```
//! use pagepilot_daemon::{Config, Core, Credentials};
//! use pagepilot_frames::ManualClock;
//! use pagepilot_protocol::{Message, RegisterRegion, RegionId};
//!
//! let clock = ManualClock::at(0);
//! let mut core = Core::new(Config::with_budget(1000).unwrap(), &clock).unwrap();
//! let db = core.connect(Credentials { pid: 42, uid: 1000, gid: 1000 }).unwrap();
//! core.on_message(db, Message::Hello { versions: vec![1], pid: Some(42) }).unwrap();
//! let register = RegisterRegion { region: RegionId(1), min_frames: 100, budget_frames: 400, ..Default::default() };
//! let out = core.on_message(db, Message::RegisterRegion(register)).unwrap();
//! assert!(matches!(out[0].message, Message::Registered { granted_frames: 100, .. }));
//! core.disconnect(db).unwrap();
//! assert_eq!(core.free_frames(), 1000);
//! ```

mod accounts;
mod client;
mod config;
mod core;
mod error;
mod limits;
mod pins;
mod requests;
pub mod server;
mod status;

pub use crate::accounts::{QuotaError, Usage};
pub use crate::client::{Credentials, Session};
pub use crate::config::{
    Config, ConfigError, Machine, DEFAULT_CONNECTIONS, DEFAULT_DEADLINE_MS, DEFAULT_DESCRIPTORS,
    DEFAULT_FAULT_PERIOD_MS, DEFAULT_FAULT_UNIT_US, DEFAULT_PROCESSOR_SHARE_PPM, DEFAULT_REGIONS,
    MAX_CONNECTIONS, MAX_FAULT_PERIOD_MS, MAX_FAULT_UNIT_US,
};
pub use crate::core::{Core, Outgoing};
pub use crate::error::CoreError;
pub use crate::limits::{AccountId, Limits, DESCRIPTORS_PER_CONNECTION};
pub use crate::pins::{pages, PinError, PinSet, MAX_PIN_RANGES, PAGE_SIZE};
