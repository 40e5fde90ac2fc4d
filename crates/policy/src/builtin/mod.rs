//! The built-in replacement policies.

mod arc;
mod car;
mod clock;
mod fifo;
mod lru;
mod mru;
mod opt;
#[cfg(test)]
mod oracle;
mod s3fifo;
mod seq;
mod sieve;
#[cfg(test)]
mod testbed;
mod two_queue;

pub use arc::Arc;
pub use car::Car;
pub use clock::Clock;
pub use fifo::Fifo;
pub use lru::ExactLru;
pub use mru::{ExactMru, FaultMru};
pub use opt::{next_references, Opt};
pub use s3fifo::S3Fifo;
pub use seq::{Decisions, Dir, Rule, Seq, SeqParams, SequenceView};
pub use sieve::Sieve;
pub use two_queue::TwoQueue;
