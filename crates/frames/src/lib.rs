//! Sharing memory among regions, as pure logic: no system calls, time from a
//! [`Clock`], so that the simulator and the live pager run the same code.
//!
//! - [`FrameManager`]: HiPEC's global frame manager (section 4): holders
//!   registered with a minimum (`minFrame`), `Request`/`Release`, the
//!   `partition_burst` watermark, FAFR reclamation with deadlines and forced
//!   reclamation when a holder does not give frames back in time.
//! - [`RateControl`]: RAPHA's rate-based fault handling: fault limits per
//!   task and for the system per period, faults beyond them postponed to the
//!   next period, the system limit recomputed from the tasks' processor
//!   reserves (Eq. 1-4), and admission control.

mod clock;
mod pool;
mod rate;

pub use clock::{Clock, ManualClock};
pub use pool::{FrameError, FrameManager, HolderId, HolderStats, Overdue, Reclaim};
pub use rate::{Admit, RateControl, RateError, TaskId, TaskStats};
