//! The built-in replacement policies.

mod clock;
mod fifo;
mod lru;
mod mru;
mod opt;
mod seq;

pub use clock::Clock;
pub use fifo::Fifo;
pub use lru::ExactLru;
pub use mru::{ExactMru, FaultMru};
pub use opt::{next_references, Opt};
pub use seq::{Decisions, Dir, Rule, Seq, SeqParams, SequenceView};
