//! RAPHA's fault limits, live: a region allowed so many missing faults per
//! period has the faults beyond them wait for the next period, in the
//! thread that serves them (the faulting thread waits on its fault).
//! Pooled regions share their pool's controller, whose system limit bounds
//! them all; a region alone has its own.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pagepilot_frames::{Admit, Clock, RateControl, TaskId, TaskStats};

/// The monotonic clock of the live frame manager and rate controller.
#[derive(Debug)]
pub(crate) struct Monotonic(pub Instant);

impl Clock for Monotonic {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// A rate controller shared by regions.
pub(crate) type SharedRate = Arc<Mutex<RateControl<Monotonic>>>;

/// Processor time of one fault the controllers assume (RAPHA's
/// `fault_unit`): a missing fault served from the disk on these machines.
pub(crate) const FAULT_UNIT: Duration = Duration::from_micros(20);
/// The system's fault period.
pub(crate) const SYSTEM_PERIOD: Duration = Duration::from_millis(100);

/// A controller whose faults take `fault_unit` of processor time, over the
/// system period above.
pub(crate) fn rate_control(
    fault_unit: Duration,
) -> Result<RateControl<Monotonic>, pagepilot_frames::RateError> {
    RateControl::new(
        fault_unit.as_nanos().min(u64::MAX as u128) as u64,
        SYSTEM_PERIOD.as_nanos() as u64,
        Monotonic(Instant::now()),
    )
}

/// A new controller with the defaults above.
pub(crate) fn controller() -> SharedRate {
    let rc = rate_control(FAULT_UNIT).expect("positive constants");
    Arc::new(Mutex::new(rc))
}

/// A region's place in a rate controller.
pub(crate) struct FaultLimit {
    control: SharedRate,
    task: TaskId,
}

impl FaultLimit {
    /// Admits a region reserving `pc` of the processor, allowed `faults`
    /// per `period`, into `control` (RAPHA's admission control, Eq. 2).
    pub fn admit(
        control: SharedRate,
        pc: f64,
        faults: u64,
        period: Duration,
    ) -> Result<FaultLimit, pagepilot_frames::RateError> {
        let period_ns = period.as_nanos().min(u64::MAX as u128) as u64;
        let task = control
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(pc, faults, period_ns)?;
        Ok(FaultLimit { control, task })
    }

    /// Waits until the next missing fault may be served (Figure 7); the
    /// controller counts the postponements and the delay they add.
    pub fn wait_turn(&self) {
        loop {
            let wait = {
                let mut control = self.control.lock().unwrap_or_else(|p| p.into_inner());
                match control.on_fault(self.task) {
                    Ok(Admit::Postpone { until_ns }) => until_ns.saturating_sub(control.now_ns()),
                    _ => return,
                }
            };
            std::thread::sleep(Duration::from_nanos(wait));
        }
    }

    /// The region's faults and postponements, as the controller counted them.
    pub fn stats(&self) -> TaskStats {
        let control = self.control.lock().unwrap_or_else(|p| p.into_inner());
        control.stats(self.task).cloned().unwrap_or_default()
    }
}

impl Drop for FaultLimit {
    fn drop(&mut self) {
        let _ = self
            .control
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .leave(self.task);
    }
}
