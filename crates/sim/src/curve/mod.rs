//! Whole fault-rate curves in one pass for the stack algorithms (LRU, OPT).
//!
//! Both LRU and Belady's OPT have the inclusion property (Mattson et al.
//! 1970): the pages resident with `c` frames are always a subset of those
//! resident with `c + 1`. One pass over the trace then yields each
//! reference's *stack distance*, the smallest memory that holds the page when
//! it is referenced, and every memory size's fault count follows from the
//! distance histogram.

mod lru;
mod opt;

pub use lru::lru;
pub use opt::{opt, opt_upto};

use serde::Serialize;

/// The stack algorithms whose whole curve is computed in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum StackPolicy {
    /// Exact least-recently-used.
    Lru,
    /// Belady's optimum (next reference furthest in the future).
    Opt,
}

impl StackPolicy {
    /// The stack policy a registry spec names, if it is one: `lru` or `opt`
    /// without parameters.
    pub fn of_spec(spec: &str) -> Option<StackPolicy> {
        let parsed = pagepilot_policy::registry::Spec::parse(spec).ok()?;
        if !parsed.params.is_empty() {
            return None;
        }
        match parsed.name.as_str() {
            "lru" => Some(StackPolicy::Lru),
            "opt" => Some(StackPolicy::Opt),
            _ => None,
        }
    }

    /// The registry name.
    pub fn name(self) -> &'static str {
        match self {
            StackPolicy::Lru => "lru",
            StackPolicy::Opt => "opt",
        }
    }

    /// The whole curve of this policy over a reference string of `slots`
    /// distinct pages.
    pub fn curve(self, refs: &[u32], slots: usize) -> Curve {
        self.curve_upto(refs, slots, slots)
    }

    /// The curve for memory sizes up to `limit` frames (larger ones are
    /// answered as `limit`); OPT is faster for smaller limits.
    pub fn curve_upto(self, refs: &[u32], slots: usize, limit: usize) -> Curve {
        match self {
            StackPolicy::Lru => lru(refs, slots),
            StackPolicy::Opt => opt_upto(refs, slots, limit),
        }
    }
}

/// Fault counts of one stack algorithm for every memory size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Curve {
    references: u64,
    cold: u64,
    /// `beyond[c]`: references to already-seen pages at stack distance
    /// greater than `c`, for `c` in `0..=limit`; they fault with `c` frames.
    beyond: Vec<u64>,
    /// The largest memory size the curve knows.
    limit: usize,
}

/// One point of a curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Point {
    /// Frames of memory.
    pub frames: usize,
    /// References in the trace.
    pub references: u64,
    /// Missing faults, first touches included.
    pub faults: u64,
    /// First-touch faults.
    pub cold_faults: u64,
    /// Pages evicted.
    pub evictions: u64,
}

impl Curve {
    /// Builds a curve from a histogram of stack distances: `hist[d]` counts
    /// the references to already-seen pages at (1-based) distance `d`.
    fn from_histogram(references: u64, cold: u64, hist: &[u64], limit: usize) -> Curve {
        let mut beyond = vec![0; hist.len().max(1)];
        let mut acc = 0;
        for c in (0..beyond.len()).rev() {
            beyond[c] = acc;
            acc += hist[c];
        }
        Curve {
            references,
            cold,
            beyond,
            limit,
        }
    }

    /// Distinct pages referenced (the footprint).
    pub fn distinct(&self) -> u64 {
        self.cold
    }

    /// References in the trace.
    pub fn references(&self) -> u64 {
        self.references
    }

    /// The largest memory size the curve knows; at least the footprint
    /// unless the curve was built for fewer frames.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Missing faults with `frames` frames, first touches included. Like the
    /// engine, zero frames behave as one; sizes above [`Curve::limit`] are
    /// answered as the limit.
    pub fn faults(&self, frames: usize) -> u64 {
        let c = frames
            .clamp(1, self.limit.max(1))
            .min(self.beyond.len() - 1);
        self.cold + self.beyond[c]
    }

    /// The point of the curve at `frames` frames.
    pub fn point(&self, frames: usize) -> Point {
        let faults = self.faults(frames);
        let filled = (frames.max(1) as u64).min(self.cold);
        Point {
            frames,
            references: self.references,
            faults,
            cold_faults: self.cold,
            evictions: faults - filled,
        }
    }
}

#[cfg(test)]
mod tests;
