//! What a pooled run checks and sets up before it runs: the processes'
//! settings, and RAPHA's admission of each.

use pagepilot_frames::{RateControl, TaskId};

use super::bank::SimClock;
use super::{PoolConfig, PooledError, ProcessSpec, RateConfig};
use crate::Trace;

/// Faults counted in fixed periods from time 0, for the reports' maxima.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PeriodCount {
    period: u64,
    index: u64,
    count: u64,
    /// The most faults in one period so far.
    pub(super) max: u64,
}

impl PeriodCount {
    pub(super) fn new(period: u64) -> Self {
        PeriodCount {
            period: period.max(1),
            ..PeriodCount::default()
        }
    }

    pub(super) fn add(&mut self, now: u64) {
        let index = now / self.period;
        if index != self.index {
            self.index = index;
            self.count = 0;
        }
        self.count += 1;
        self.max = self.max.max(self.count);
    }
}

/// RAPHA's controller and each process's task in it.
pub(super) struct Rate {
    /// The controller, on the simulated clock.
    pub(super) control: RateControl<SimClock>,
    /// The system limit with every process admitted (Eq. 4).
    pub(super) system_limit: u64,
    /// Each process's task.
    pub(super) tasks: Vec<TaskId>,
    /// Each process's faults per fault period.
    pub(super) per_process: Vec<PeriodCount>,
    /// All processes' faults per system period.
    pub(super) system: PeriodCount,
}

/// Refuses what cannot run, before anything runs.
pub(super) fn check(
    traces: &[Trace],
    processes: &[ProcessSpec],
    config: &PoolConfig,
) -> Result<(), PooledError> {
    if traces.is_empty() {
        return Err(PooledError::NoTraces);
    }
    if processes.len() != traces.len() {
        return Err(PooledError::CountMismatch {
            processes: processes.len(),
            traces: traces.len(),
        });
    }
    if let Some(p) = traces.iter().position(Trace::is_empty) {
        return Err(PooledError::EmptyTrace(p));
    }
    if config.schedule.quantum == 0 {
        return Err(PooledError::ZeroQuantum);
    }
    if config.frames == 0 {
        return Err(PooledError::EmptyPool);
    }
    let sum: usize = processes.iter().map(|p| p.min_frames).sum();
    if sum > config.frames {
        let list: Vec<String> = processes.iter().map(|p| p.min_frames.to_string()).collect();
        return Err(PooledError::PoolTooSmall {
            pool: config.frames,
            sum,
            list: list.join(" + "),
        });
    }
    for (p, spec) in processes.iter().enumerate() {
        if spec.min_frames <= spec.readahead_frames {
            return Err(PooledError::MinTooSmall {
                process: p,
                name: spec.name.clone(),
                min: spec.min_frames,
                readahead: spec.readahead_frames,
                need: spec.readahead_frames + 1,
            });
        }
        match (spec.fault_limit, config.rate) {
            (Some(0), _) => {
                return Err(PooledError::ZeroFaultLimit {
                    process: p,
                    name: spec.name.clone(),
                })
            }
            (None, Some(_)) => {
                return Err(PooledError::MissingFaultLimit {
                    process: p,
                    name: spec.name.clone(),
                })
            }
            (Some(_), None) => return Err(PooledError::NoFaultPeriod),
            _ => {}
        }
    }
    Ok(())
}

/// RAPHA's admission: each process with its reserve and fault limit (Eq. 2),
/// then the system limit (Eq. 4), which must allow a fault.
pub(super) fn admit(
    r: &RateConfig,
    processes: &[ProcessSpec],
    clock: &SimClock,
) -> Result<Rate, PooledError> {
    let refused =
        |process: Option<(usize, String)>| move |source| PooledError::Rate { process, source };
    let mut control =
        RateControl::new(r.fault_unit, r.system_period, clock.clone()).map_err(refused(None))?;
    let mut tasks = Vec::with_capacity(processes.len());
    for (p, spec) in processes.iter().enumerate() {
        let limit = spec.fault_limit.unwrap_or(0);
        let task = control
            .admit(spec.reserve, limit, r.fault_period)
            .map_err(refused(Some((p, spec.name.clone()))))?;
        tasks.push(task);
    }
    let system_limit = control.system_fault_limit();
    if system_limit == 0 {
        return Err(PooledError::NoSystemFaults {
            period: r.system_period,
            unit: r.fault_unit,
        });
    }
    Ok(Rate {
        control,
        system_limit,
        tasks,
        per_process: vec![PeriodCount::new(r.fault_period); processes.len()],
        system: PeriodCount::new(r.system_period),
    })
}
