//! Several processes, each with its own policy and its own frames drawn
//! from one global frame manager (HiPEC section 4), with RAPHA's fault
//! limits: the simulator's side of issue 14. The frame manager and the
//! rate controller are [`pagepilot_frames`]' [`FrameManager`] and
//! [`RateControl`], the code the live pool runs (`pagepilot_pager`'s
//! `Pool`), here on a simulated clock.
//!
//! Time and scheduling are those of [`crate::global`]: one unit per
//! reference, processes round-robin by a quantum, a missing fault blocking
//! its process for the service time. The frame manager's rules, as live:
//!
//! - Allocation: each process registers with its `minFrame` before the
//!   run; a minimum that does not fit is refused with a clear error.
//! - `Request` / `Release` of a policy (a policy program's commands) go to
//!   the manager, granted from free frames, partially when few are free.
//! - Balance: past `partition_burst` (frames held above minimums) the
//!   excess is asked back, FAFR (first allocated, first reclaimed).
//! - Reclamation: a process asked for frames gives them back through its
//!   policy's `ReclaimFrame` event ([`Machine::shrink`]) as soon as it runs:
//!   at once if it is running, else when it is next dispatched. One still
//!   blocked (on a fault's service, or postponed by its fault limit) when
//!   the deadline passes is reclaimed by force ([`Machine::force`], the
//!   engine's fallback picks the victims), and the incident is counted.
//! - A process that ends leaves the pool: its frames go to whoever is owed
//!   frames, or back to the free ones.
//!
//! RAPHA (Figure 7): with fault limits, every missing fault asks the rate
//! controller first; a fault beyond the process's limit or the system's
//! waits for the next period, its process blocked meanwhile, and the
//! postponement and the delay it added are counted. Processes are admitted
//! with their processor reserves (Eq. 2, refused when they do not fit) and
//! the system limit follows from them (Eq. 4).
//!
//! A process may set some of its frames aside for read-ahead windows
//! ([`ProcessSpec::readahead_frames`]): the live pager's windows hold
//! frames outside the policy's resident set (docs/pager.md, "Clustered
//! reads"), which the simulator, page by page, has no other way to see.

mod bank;
mod report;
mod run;
mod setup;

use pagepilot_frames::{FrameError, RateError};
use pagepilot_policy::registry::RegistryError;
use thiserror::Error;

pub use report::{PooledRun, ProcessReport, Sample};
pub use run::run;

use crate::global::Schedule;

#[cfg(doc)]
use crate::Machine;
#[cfg(doc)]
use pagepilot_frames::{FrameManager, RateControl};

/// One process of a pooled run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSpec {
    /// Its name in reports (the trace's file name).
    pub name: String,
    /// Its policy: a registry spec or a policy program's path.
    pub policy: String,
    /// Frames guaranteed to it (HiPEC's `minFrame`).
    pub min_frames: usize,
    /// Of its frames, those held by read-ahead windows, outside its
    /// policy's resident set (0 in the simulator's own runs).
    pub readahead_frames: usize,
    /// RAPHA: missing faults it may take per fault period (needs
    /// [`PoolConfig::rate`]).
    pub fault_limit: Option<u64>,
    /// RAPHA: its processor reserve, a share of one processor in [0, 1].
    pub reserve: f64,
}

impl ProcessSpec {
    /// A process named `name` under `policy` guaranteed `min_frames`, with
    /// no read-ahead frames, fault limit or reserve.
    pub fn new(name: impl Into<String>, policy: impl Into<String>, min_frames: usize) -> Self {
        ProcessSpec {
            name: name.into(),
            policy: policy.into(),
            min_frames,
            readahead_frames: 0,
            fault_limit: None,
            reserve: 0.0,
        }
    }
}

/// RAPHA's parameters, in reference times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateConfig {
    /// Every process's fault period.
    pub fault_period: u64,
    /// The system's fault period.
    pub system_period: u64,
    /// Processor time one fault takes (RAPHA's `fault_unit`).
    pub fault_unit: u64,
}

/// The pool and the machine the processes share.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolConfig {
    /// Frames in the pool.
    pub frames: usize,
    /// HiPEC's `partition_burst`: frames held above the minimums beyond
    /// which the excess is reclaimed (`None`: half the pool, HiPEC's).
    pub partition_burst: Option<usize>,
    /// Reference times a process has to give frames back.
    pub reclaim_deadline: u64,
    /// Quantum and fault service time.
    pub schedule: Schedule,
    /// RAPHA's fault limits, if any.
    pub rate: Option<RateConfig>,
    /// Time between samples of the frames held (`None`: about 200 over
    /// the run).
    pub sample_every: Option<u64>,
}

/// Errors setting up a pooled run.
#[derive(Debug, Error)]
pub enum PooledError {
    /// No traces were given.
    #[error("pooled mode needs at least one trace")]
    NoTraces,
    /// Not one process description per trace.
    #[error("{processes} process settings for {traces} traces: give one per trace")]
    CountMismatch {
        /// Process settings given.
        processes: usize,
        /// Traces given.
        traces: usize,
    },
    /// A process's trace holds no references.
    #[error("process {0}: the trace holds no references")]
    EmptyTrace(usize),
    /// The quantum is zero.
    #[error("the quantum must be at least one reference")]
    ZeroQuantum,
    /// A pool of no frames.
    #[error("the pool needs at least one frame")]
    EmptyPool,
    /// The minimums do not fit in the pool together.
    #[error(
        "the pool of {pool} frames is smaller than the sum of the minFrames, {sum} ({list}): \
         enlarge the pool or lower the minimums"
    )]
    PoolTooSmall {
        /// Frames in the pool.
        pool: usize,
        /// The minimums' sum.
        sum: usize,
        /// The minimums, comma-separated.
        list: String,
    },
    /// A minimum too small to hold a page beside its read-ahead frames.
    #[error(
        "process {process} ({name}): minFrame {min} leaves no frame for its policy beside \
         {readahead} read-ahead frames; it needs at least {need}"
    )]
    MinTooSmall {
        /// The process.
        process: usize,
        /// Its name.
        name: String,
        /// Its minimum.
        min: usize,
        /// Its read-ahead frames.
        readahead: usize,
        /// The least minimum it needs.
        need: usize,
    },
    /// The frame manager refused a process's minimum.
    #[error("process {process} ({name})")]
    Frames {
        /// The process.
        process: usize,
        /// Its name.
        name: String,
        /// The manager's refusal.
        source: FrameError,
    },
    /// A fault limit of zero: the process could never fault.
    #[error("process {process} ({name}): a fault limit must be at least one fault per period")]
    ZeroFaultLimit {
        /// The process.
        process: usize,
        /// Its name.
        name: String,
    },
    /// Under RAPHA, a process without a fault limit.
    #[error("process {process} ({name}): no fault limit; with RAPHA every process needs one")]
    MissingFaultLimit {
        /// The process.
        process: usize,
        /// Its name.
        name: String,
    },
    /// Fault limits without RAPHA's periods.
    #[error("fault limits need a fault period")]
    NoFaultPeriod,
    /// The rate controller refused its parameters or a process.
    #[error("{}", .process.as_ref().map_or_else(|| "the fault-rate controller".into(), |(p, n)| format!("process {p} ({n})")))]
    Rate {
        /// The process refused, if it was one.
        process: Option<(usize, String)>,
        /// The controller's refusal.
        source: RateError,
    },
    /// The reserves leave no fault per system period (Eq. 4).
    #[error(
        "the processor reserves leave a system fault limit of 0 per period of {period} \
         (fault unit {unit}): no fault could ever be served; lower the reserves or lengthen \
         the system period"
    )]
    NoSystemFaults {
        /// The system period.
        period: u64,
        /// The fault unit.
        unit: u64,
    },
    /// A policy spec was not accepted.
    #[error("process {process} ({name})")]
    Policy {
        /// The process.
        process: usize,
        /// Its name.
        name: String,
        /// The registry's refusal.
        source: RegistryError,
    },
}

#[cfg(test)]
mod tests;
