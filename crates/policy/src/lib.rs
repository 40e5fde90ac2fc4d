//! Replacement policies for pagepilot, written once against what a live
//! user-space pager can observe ([`Policy`]) and run unchanged by the
//! trace-driven simulator and the live pager. Policies that need every
//! reference or the future implement [`ReferencePolicy`] and run only in the
//! simulator.

pub mod builtin;
mod chain;
pub mod hash;
pub mod list;
mod memory;
mod page;
mod policy;
pub mod program;
pub mod registry;
pub mod stamp;

pub use chain::{chain, Chain};
pub use memory::Memory;
pub use page::{Page, SPACE_SHIFT};
pub use policy::{Fault, FaultKind, Policy, ReferencePolicy};
