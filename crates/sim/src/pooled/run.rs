//! The pooled run: processes scheduled round-robin, their frames managed
//! by the shared frame manager, their faults by the rate controller.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use pagepilot_frames::{Admit, FrameManager, HolderId};
use pagepilot_policy::registry::{self, Setup};

use super::bank::{Bank, Draw, SharedBank, SimClock};
use super::setup::{admit, check, Rate};
use super::{PoolConfig, PooledError, PooledRun, ProcessReport, ProcessSpec, Sample};
use crate::{Access, Machine, Trace};

/// One process while it runs.
struct Proc<'t> {
    machine: Machine<'t>,
    holder: HolderId,
    next: usize,
    ready_at: u64,
    done: bool,
    report: ProcessReport,
}

/// The whole run's state.
struct Pooled<'t> {
    clock: SimClock,
    bank: SharedBank,
    procs: Vec<Proc<'t>>,
    rate: Option<Rate>,
    now: u64,
    /// The earliest deadline of a pending reclamation.
    next_deadline: Option<u64>,
    sample_every: u64,
    next_sample: u64,
    samples: Vec<Sample>,
}

/// Runs `traces` as processes described by `processes` (one each, in the
/// same order) in one frame pool.
pub fn run(
    traces: &[Trace],
    processes: &[ProcessSpec],
    config: &PoolConfig,
) -> Result<PooledRun, PooledError> {
    check(traces, processes, config)?;
    let clock = SimClock::default();
    let mut manager = FrameManager::new(config.frames, clock.clone())
        .map_err(|_| PooledError::EmptyPool)?
        .with_deadline_ns(config.reclaim_deadline);
    if let Some(burst) = config.partition_burst {
        manager = manager.with_partition_burst(burst);
    }
    let mut holders = Vec::with_capacity(processes.len());
    for (p, spec) in processes.iter().enumerate() {
        let (holder, _) =
            manager
                .register(spec.min_frames)
                .map_err(|source| PooledError::Frames {
                    process: p,
                    name: spec.name.clone(),
                    source,
                })?;
        holders.push(holder);
    }
    let rate = match &config.rate {
        Some(r) => Some(admit(r, processes, &clock)?),
        None => None,
    };
    let burst = manager.partition_burst();
    let bank = Rc::new(RefCell::new(Bank {
        manager,
        touched: false,
    }));
    let mut procs = Vec::with_capacity(processes.len());
    for ((p, spec), (trace, holder)) in processes.iter().enumerate().zip(traces.iter().zip(holders))
    {
        let frames = spec.min_frames - spec.readahead_frames;
        let setup = Setup {
            slots: trace.distinct(),
            frames,
            future: Some(&trace.refs),
        };
        let policy =
            registry::build(&spec.policy, &setup).map_err(|source| PooledError::Policy {
                process: p,
                name: spec.name.clone(),
                source,
            })?;
        let draw = Draw {
            bank: bank.clone(),
            holder,
        };
        procs.push(Proc {
            machine: Machine::with_source(trace, policy, frames, Box::new(draw)),
            holder,
            next: 0,
            ready_at: 0,
            done: false,
            report: ProcessReport {
                name: spec.name.clone(),
                policy: spec.policy.clone(),
                min_frames: spec.min_frames,
                readahead_frames: spec.readahead_frames,
                held_max: spec.min_frames,
                fault_limit: spec.fault_limit.filter(|_| config.rate.is_some()),
                ..ProcessReport::default()
            },
        });
    }
    let total: u64 = traces.iter().map(|t| t.len() as u64).sum();
    let sample_every = config.sample_every.unwrap_or(total / 200).max(1);
    let mut sim = Pooled {
        clock,
        bank,
        procs,
        rate,
        now: 0,
        next_deadline: None,
        sample_every,
        next_sample: 0,
        samples: Vec::new(),
    };
    let (elapsed, idle) = sim.schedule(traces, config)?;
    Ok(sim.finish(config, burst, elapsed, idle))
}

impl<'t> Pooled<'t> {
    /// Round-robin by the quantum until every trace has run; returns the
    /// elapsed and idle time.
    fn schedule(
        &mut self,
        traces: &[Trace],
        config: &PoolConfig,
    ) -> Result<(u64, u64), PooledError> {
        let k = traces.len();
        let mut queue: VecDeque<usize> = (0..k).collect();
        let mut idle = 0;
        self.sample();
        while !queue.is_empty() {
            let ready = queue
                .iter()
                .position(|&p| self.procs[p].ready_at <= self.now);
            let Some(pick) = ready else {
                // Nobody ready: the clock jumps to the next wake-up, or to a
                // deadline before it (a reclamation to force meanwhile).
                let wake = queue
                    .iter()
                    .map(|&p| self.procs[p].ready_at)
                    .min()
                    .unwrap_or(self.now);
                let to = self.next_deadline.map_or(wake, |d| d.clamp(self.now, wake));
                idle += to - self.now;
                self.advance_to(to);
                continue;
            };
            let Some(p) = queue.remove(pick) else { break };
            self.turn(
                p,
                &traces[p],
                config.schedule.quantum,
                config.schedule.service,
            );
            if self.procs[p].next < traces[p].len() {
                queue.push_back(p);
            } else {
                self.end(p);
            }
        }
        self.sample();
        Ok((self.now, idle))
    }

    /// Process `p` runs until its quantum ends, it faults, or a fault of
    /// it is postponed.
    fn turn(&mut self, p: usize, trace: &Trace, quantum: u64, service: u64) {
        // First the reclamations it was asked for while it did not run.
        self.give_back(p);
        let writes = trace.has_writes();
        let mut ran = 0;
        while ran < quantum && self.procs[p].next < trace.len() {
            let i = self.procs[p].next;
            let slot = trace.refs[i];
            if !self.procs[p].machine.is_resident(slot) && !self.admit_fault(p) {
                break;
            }
            let access = self.procs[p]
                .machine
                .access(slot, writes && trace.is_write(i), i as u64);
            self.procs[p].next += 1;
            ran += 1;
            let missing = matches!(access, Access::Missing { .. });
            if missing {
                if let Some(rate) = &mut self.rate {
                    rate.per_process[p].add(self.now);
                    rate.system.add(self.now);
                }
            }
            if std::mem::take(&mut self.bank.borrow_mut().touched) {
                // Its own policy asked the manager something: it gives back
                // what it was asked for within this reference, others when
                // they run.
                self.give_back(p);
            }
            self.advance_to(self.now + 1);
            if missing {
                self.procs[p].ready_at = self.now + service;
                break;
            }
        }
    }

    /// RAPHA: whether `p`'s missing fault may be served now; if not, `p`
    /// waits for the period the controller names.
    fn admit_fault(&mut self, p: usize) -> bool {
        let Some(rate) = &mut self.rate else {
            return true;
        };
        match rate.control.on_fault(rate.tasks[p]) {
            Ok(Admit::Postpone { until_ns }) => {
                self.procs[p].ready_at = until_ns;
                false
            }
            _ => true,
        }
    }

    /// Moves the clock to `to`, forcing the reclamations whose deadline
    /// passed and sampling the frames held.
    fn advance_to(&mut self, to: u64) {
        self.now = to;
        self.clock.set(to);
        if self.next_deadline.is_some_and(|d| d <= to) {
            self.force_overdue();
        }
        if to >= self.next_sample {
            self.sample();
        }
    }

    /// `p` gives back what it was asked for, through its policy's
    /// `ReclaimFrame` event.
    fn give_back(&mut self, p: usize) {
        let holder = self.procs[p].holder;
        let asked = self.bank.borrow().manager.asked_of(holder);
        if asked > 0 {
            let proc = &mut self.procs[p];
            let given = proc.machine.shrink(asked);
            proc.report.reclaims += 1;
            let _ = self.bank.borrow_mut().manager.returned(holder, given);
            self.bank.borrow_mut().touched = false;
        }
        self.settled();
    }

    /// The reclamations past their deadline are taken by force: the
    /// engine's fallback picks the victims.
    fn force_overdue(&mut self) {
        let late = self.bank.borrow_mut().manager.overdue();
        for order in late {
            if let Some(proc) = self.procs.iter_mut().find(|q| q.holder == order.holder) {
                proc.machine.force(order.frames);
            }
        }
        self.settled();
    }

    /// Process `p` ended: it leaves the pool and the rate controller.
    fn end(&mut self, p: usize) {
        let proc = &mut self.procs[p];
        proc.done = true;
        proc.report.finished_at = self.now;
        {
            let bank = self.bank.borrow();
            if let Ok(s) = bank.manager.stats(proc.holder) {
                let r = &mut proc.report;
                (r.requested, r.granted, r.released) = (s.requested, s.granted, s.released);
                (r.reclaimed_frames, r.forced_frames) = (s.reclaimed, s.forced);
                r.forced_reclaims = s.forced_incidents;
            }
        }
        let _ = self.bank.borrow_mut().manager.unregister(proc.holder);
        if let Some(rate) = &mut self.rate {
            if let Ok(s) = rate.control.stats(rate.tasks[p]) {
                (proc.report.postponed, proc.report.postponed_delay) = (s.postponed, s.delay_ns);
            }
            let _ = rate.control.leave(rate.tasks[p]);
        }
        self.settled();
    }

    /// After the manager changed: frames it gave to a process owed them
    /// reach its policy, held maxima and the next deadline are updated.
    fn settled(&mut self) {
        let bank = self.bank.borrow();
        for proc in self.procs.iter_mut().filter(|q| !q.done) {
            let Ok(s) = bank.manager.stats(proc.holder) else {
                continue;
            };
            let target = s.held.saturating_sub(proc.report.readahead_frames).max(1);
            let capacity = proc.machine.capacity();
            if target > capacity {
                proc.machine.grow(target - capacity);
            }
            proc.report.held_max = proc.report.held_max.max(s.held);
        }
        self.next_deadline = bank.manager.next_deadline_ns();
    }

    /// Records the frames each process holds now.
    fn sample(&mut self) {
        let bank = self.bank.borrow();
        let held = self
            .procs
            .iter()
            .map(|q| {
                if q.done {
                    0
                } else {
                    bank.manager.stats(q.holder).map_or(0, |s| s.held)
                }
            })
            .collect();
        if self.samples.last().is_some_and(|s| s.time == self.now) {
            self.samples.pop();
        }
        self.samples.push(Sample {
            time: self.now,
            held,
        });
        self.next_sample = (self.now / self.sample_every + 1) * self.sample_every;
    }

    /// The run's report.
    fn finish(self, config: &PoolConfig, burst: usize, elapsed: u64, idle: u64) -> PooledRun {
        let mut processes = Vec::with_capacity(self.procs.len());
        for (p, mut proc) in self.procs.into_iter().enumerate() {
            let mut r = std::mem::take(&mut proc.report);
            r.incidents = proc.machine.incidents();
            r.counters = proc.machine.finish();
            if let Some(rate) = &self.rate {
                r.max_faults_per_period = Some(rate.per_process[p].max);
            }
            r.postponed_delay_mean = if r.postponed > 0 {
                r.postponed_delay as f64 / r.postponed as f64
            } else {
                0.0
            };
            processes.push(r);
        }
        PooledRun {
            pool_frames: config.frames,
            partition_burst: burst,
            reclaim_deadline: config.reclaim_deadline,
            quantum: config.schedule.quantum,
            service: config.schedule.service,
            system_fault_limit: self.rate.as_ref().map(|r| r.system_limit),
            max_system_faults_per_period: self.rate.as_ref().map(|r| r.system.max),
            elapsed,
            idle,
            processes,
            samples: self.samples,
        }
    }
}
