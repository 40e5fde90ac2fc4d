//! Trace-driven simulation of pagepilot's replacement policies.

pub mod engine;
pub mod plot;
pub mod synthetic;
pub mod trace;

pub use engine::{simulate, Access, Counters, Machine};
pub use trace::Trace;
