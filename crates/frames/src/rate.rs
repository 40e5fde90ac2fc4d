//! RAPHA, rate-based page-fault handling: each task and the system may
//! take a limited number of faults per period; a fault beyond a limit is
//! postponed to the next period (Figure 7). Tasks reserve processor
//! capacity; the system's fault limit is what the reserves leave (Eq. 1-4),
//! and a task whose reserve does not fit is refused (admission control).
//!
//! Notation as in the paper: `fault_unit` is the processor time one fault
//! takes; a task's `pc` its processor capacity (a share of one processor).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Clock;

/// A task admitted by the rate controller (a region live, a process in the
/// simulator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TaskId(pub u32);

/// Refusals of the rate controller.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateError {
    /// A period of zero.
    #[error("a fault period must be positive")]
    ZeroPeriod,
    /// A fault that costs no time.
    #[error("the processor time of one fault (fault_unit) must be positive")]
    ZeroFaultUnit,
    /// A processor capacity outside [0, 1].
    #[error("a processor reserve must lie in [0, 1], got {0}")]
    BadReserve(f64),
    /// Admission control: the reserves and the fault handling they need
    /// would take more than the processor (Eq. 2).
    #[error(
        "reserve refused: the tasks' processor capacity {reserved:.3}, this task's {pc:.3} and \
         the fault handling of every task's limit {fault_pc:.3} exceed 1 (RAPHA Eq. 2)"
    )]
    ReserveDoesNotFit {
        /// The admitted tasks' capacity.
        reserved: f64,
        /// This task's.
        pc: f64,
        /// What handling every task's fault limit would take (Eq. 1).
        fault_pc: f64,
    },
    /// Every task id was given out (ids are never reused).
    #[error("this rate controller has admitted 2^32 tasks: no id is left")]
    IdsExhausted,
    /// No such task.
    #[error("no task {0:?} in this rate controller")]
    UnknownTask(TaskId),
}

/// What to do with a fault now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Serve it.
    Now,
    /// Hold it until this time (the next period of the limit it hit), then
    /// ask again.
    Postpone {
        /// Clock nanoseconds.
        until_ns: u64,
    },
}

/// A task's faults and what the limits did to them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TaskStats {
    /// Faults served.
    pub faults: u64,
    /// Faults postponed (each postponement counted).
    pub postponed: u64,
    /// Delay the postponements added, nanoseconds.
    pub delay_ns: u64,
}

/// Fault counting in periods of a fixed length.
#[derive(Debug, Clone, Copy)]
struct Window {
    period_ns: u64,
    start_ns: u64,
    count: u64,
    limit: u64,
}

impl Window {
    /// Counts a fault at `now`: `Ok` if within the limit, else the end of
    /// the period (the fault is not counted).
    fn take(&mut self, now: u64) -> Result<(), u64> {
        if now >= self.start_ns + self.period_ns {
            self.start_ns = now - (now - self.start_ns) % self.period_ns;
            self.count = 0;
        }
        if self.count >= self.limit {
            return Err(self.start_ns + self.period_ns);
        }
        self.count += 1;
        Ok(())
    }

    fn give_back(&mut self) {
        self.count -= 1;
    }
}

#[derive(Debug)]
struct Task {
    pc: f64,
    window: Window,
    stats: TaskStats,
}

/// RAPHA's rate controller.
#[derive(Debug)]
pub struct RateControl<C: Clock> {
    clock: C,
    fault_unit_ns: u64,
    system: Window,
    /// The admitted tasks by id; ids are never reused, so the map's size
    /// is that of the live tasks however many came and went.
    tasks: BTreeMap<u32, Task>,
    /// The next task's id.
    next_id: u32,
}

impl<C: Clock> RateControl<C> {
    /// A controller whose faults take `fault_unit_ns` of processor time,
    /// counted for the system over periods of `system_period_ns`. With no
    /// task admitted, the whole processor is left for faults (Eq. 4).
    pub fn new(fault_unit_ns: u64, system_period_ns: u64, clock: C) -> Result<Self, RateError> {
        if system_period_ns == 0 {
            return Err(RateError::ZeroPeriod);
        }
        if fault_unit_ns == 0 {
            return Err(RateError::ZeroFaultUnit);
        }
        let start_ns = clock.now_ns();
        let mut rc = RateControl {
            clock,
            fault_unit_ns,
            system: Window {
                period_ns: system_period_ns,
                start_ns,
                count: 0,
                limit: 0,
            },
            tasks: BTreeMap::new(),
            next_id: 0,
        };
        rc.system.limit = rc.system_fault_limit();
        Ok(rc)
    }

    fn live(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }

    /// The admitted tasks' processor capacity, `sum task_i.pc`.
    pub fn reserved_pc(&self) -> f64 {
        self.live().map(|t| t.pc).sum()
    }

    /// Eq. 1: the processor capacity that `limit` faults per system period
    /// take, `limit / system.fault_period * fault_unit`.
    pub fn fault_pc(&self, limit: u64) -> f64 {
        limit as f64 * self.fault_unit_ns as f64 / self.system.period_ns as f64
    }

    /// Eq. 4: the system's fault limit per period, what the reserves leave:
    /// `(1 - sum task_i.pc) / fault_unit * system.fault_period`.
    pub fn system_fault_limit(&self) -> u64 {
        let left = (1.0 - self.reserved_pc()).max(0.0);
        // Rounding slack: 1 - 0.8 is 0.19999999999999996 in binary.
        (left * self.system.period_ns as f64 / self.fault_unit_ns as f64 + 1e-9).floor() as u64
    }

    /// The task limits, in faults per system period.
    fn task_limits_per_system_period(&self) -> f64 {
        let p = self.system.period_ns as f64;
        self.live()
            .map(|t| t.window.limit as f64 * p / t.window.period_ns as f64)
            .sum()
    }

    /// Admits a task reserving `pc` of the processor, allowed `fault_limit`
    /// faults per `period_ns`, if Eq. 2 holds with it: the reserves plus the
    /// processor capacity every task's limit needs (Eq. 1) stay within 1.
    /// A `pc` of 0 reserves no processor time, only the faults.
    /// The system limit is then recomputed (Eq. 4).
    pub fn admit(
        &mut self,
        pc: f64,
        fault_limit: u64,
        period_ns: u64,
    ) -> Result<TaskId, RateError> {
        if period_ns == 0 {
            return Err(RateError::ZeroPeriod);
        }
        if !(0.0..=1.0).contains(&pc) {
            return Err(RateError::BadReserve(pc));
        }
        let reserved = self.reserved_pc();
        let limits = self.task_limits_per_system_period()
            + fault_limit as f64 * self.system.period_ns as f64 / period_ns as f64;
        let fault_pc = limits * self.fault_unit_ns as f64 / self.system.period_ns as f64;
        // A little slack for rounding: shares given as decimals sum inexactly.
        if reserved + pc + fault_pc > 1.0 + 1e-9 {
            return Err(RateError::ReserveDoesNotFit {
                reserved,
                pc,
                fault_pc,
            });
        }
        let id = TaskId(self.next_id);
        self.next_id = self.next_id.checked_add(1).ok_or(RateError::IdsExhausted)?;
        self.tasks.insert(
            id.0,
            Task {
                pc,
                window: Window {
                    period_ns,
                    start_ns: self.clock.now_ns(),
                    count: 0,
                    limit: fault_limit,
                },
                stats: TaskStats::default(),
            },
        );
        self.system.limit = self.system_fault_limit();
        Ok(id)
    }

    /// Removes task `id`; the system limit grows back (Eq. 4).
    pub fn leave(&mut self, id: TaskId) -> Result<(), RateError> {
        self.tasks.remove(&id.0).ok_or(RateError::UnknownTask(id))?;
        self.system.limit = self.system_fault_limit();
        Ok(())
    }

    /// Figure 7: counts a fault of task `id` in the system's period and the
    /// task's; past either limit it is postponed to the end of that period
    /// (the later one if both), and not counted.
    pub fn on_fault(&mut self, id: TaskId) -> Result<Admit, RateError> {
        let now = self.clock.now_ns();
        let task = self
            .tasks
            .get_mut(&id.0)
            .ok_or(RateError::UnknownTask(id))?;
        let admit = match (self.system.take(now), task.window.take(now)) {
            (Ok(()), Ok(())) => Admit::Now,
            (system, own) => {
                if system.is_ok() {
                    self.system.give_back();
                }
                if own.is_ok() {
                    task.window.give_back();
                }
                let until_ns = system.err().max(own.err()).unwrap_or(now);
                Admit::Postpone { until_ns }
            }
        };
        match admit {
            Admit::Now => task.stats.faults += 1,
            Admit::Postpone { until_ns } => {
                task.stats.postponed += 1;
                task.stats.delay_ns += until_ns - now;
            }
        }
        Ok(admit)
    }

    /// Now, on the controller's clock.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Task `id`'s faults and postponements.
    pub fn stats(&self, id: TaskId) -> Result<&TaskStats, RateError> {
        self.tasks
            .get(&id.0)
            .map(|t| &t.stats)
            .ok_or(RateError::UnknownTask(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    const MS: u64 = 1_000_000;

    #[test]
    fn test_equations_one_to_four_give_the_hand_computed_values() {
        // fault_unit 100 us, system period 100 ms: the whole processor
        // handles 1,000 faults per period (Eq. 4 with no reserve).
        let mut rc = RateControl::new(100_000, 100 * MS, ManualClock::at(0)).unwrap();
        assert_eq!(rc.system_fault_limit(), 1000);
        // Eq. 1: 250 faults per period take 250 * 0.1 ms / 100 ms = 0.25.
        assert!((rc.fault_pc(250) - 0.25).abs() < 1e-12);
        // Reserves of 0.3 and 0.2: Eq. 3 leaves 0.5 for faults, Eq. 4 500 faults.
        rc.admit(0.3, 100, 100 * MS).unwrap();
        rc.admit(0.2, 50, 50 * MS).unwrap();
        assert!((rc.reserved_pc() - 0.5).abs() < 1e-12);
        assert_eq!(rc.system_fault_limit(), 500);
        // Eq. 2 holds: 0.5 + fault_pc(100 + 100) = 0.7 <= 1.
        assert!(rc.reserved_pc() + rc.fault_pc(200) <= 1.0);
    }

    #[test]
    fn test_admission_is_refused_just_past_the_boundary_of_eq_2() {
        let mut rc = RateControl::new(100_000, 100 * MS, ManualClock::at(0)).unwrap();
        rc.admit(0.5, 100, 100 * MS).unwrap();
        // 0.5 + 0.4 + fault_pc(100 + 100) = 0.5 + 0.4 + 0.2 > 1: refused.
        let err = rc.admit(0.4, 100, 100 * MS).unwrap_err();
        assert!(matches!(err, RateError::ReserveDoesNotFit { .. }), "{err}");
        assert!(err.to_string().contains("Eq. 2"));
        // 0.5 + 0.3 + 0.2 = 1: accepted at the boundary.
        rc.admit(0.3, 100, 100 * MS).unwrap();
        assert_eq!(rc.system_fault_limit(), 200);
        assert_eq!(
            rc.admit(-0.1, 1, MS).unwrap_err(),
            RateError::BadReserve(-0.1)
        );
        assert_eq!(rc.admit(0.1, 1, 0).unwrap_err(), RateError::ZeroPeriod);
    }

    #[test]
    fn test_a_tasks_faults_per_period_never_pass_its_limit_and_wait_for_the_next() {
        let clock = ManualClock::at(0);
        let mut rc = RateControl::new(10_000, 10 * MS, clock).unwrap();
        let t = rc.admit(0.1, 5, 10 * MS).unwrap();
        let mut served_per_period = vec![0u32; 4];
        let mut postponed_until = Vec::new();
        for step in 0..40u64 {
            // A fault every millisecond, 40 ms: 10 per period wanted, 5 allowed.
            let now = step * MS;
            rc.clock.set(now);
            match rc.on_fault(t).unwrap() {
                Admit::Now => served_per_period[(now / (10 * MS)) as usize] += 1,
                Admit::Postpone { until_ns } => postponed_until.push(until_ns),
            }
        }
        assert_eq!(served_per_period, vec![5, 5, 5, 5]);
        assert_eq!(postponed_until[..5], [10 * MS; 5]);
        let s = rc.stats(t).unwrap();
        assert_eq!((s.faults, s.postponed), (20, 20));
        // Postponed at 5..9 ms until 10 ms: 5+4+3+2+1 ms, in each of 4 periods.
        assert_eq!(s.delay_ns, 4 * 15 * MS);
    }

    #[test]
    fn test_the_system_limit_holds_every_task_back_once_reached() {
        // fault_unit 1 ms, period 10 ms: reserves of 0.7 leave 3 faults.
        let mut rc = RateControl::new(MS, 10 * MS, ManualClock::at(0)).unwrap();
        let a = rc.admit(0.4, 2, 10 * MS).unwrap();
        let b = rc.admit(0.3, 1, 10 * MS).unwrap();
        assert_eq!(rc.system_fault_limit(), 3);
        assert_eq!(rc.on_fault(a).unwrap(), Admit::Now);
        assert_eq!(rc.on_fault(a).unwrap(), Admit::Now);
        assert_eq!(rc.on_fault(b).unwrap(), Admit::Now);
        assert_eq!(
            rc.on_fault(b).unwrap(),
            Admit::Postpone { until_ns: 10 * MS }
        );
        rc.leave(b).unwrap();
        assert_eq!(rc.system_fault_limit(), 6);
        assert_eq!(rc.on_fault(b).unwrap_err(), RateError::UnknownTask(b));
    }
}
