//! Trace-driven simulation of pagepilot's replacement policies.

pub mod curve;
pub mod engine;
pub mod global;
pub mod param_sweep;
pub mod plot;
pub mod pooled;
pub mod report;
pub mod sweep;
pub mod synthetic;
pub mod trace;

pub use engine::{simulate, simulate_reporting, Access, Counters, FrameSource, Machine};
pub use trace::Trace;
