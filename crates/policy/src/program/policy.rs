//! A verified policy program behind the [`Policy`] interface, so the
//! simulator and the live pager run it like any built-in policy.
//!
//! Event semantics. The engine keeps HiPEC's free-frame list itself: while
//! the region has a free frame it loads the faulting page without asking, and
//! PageFault runs after the fact (from [`Policy::on_fault`]) with `free > 0`
//! so the program can queue the page; a victim named then is ignored (none is
//! needed). When no frame is free the engine asks [`Policy::victim`], which
//! runs PageFault with `free == 0`; the program names `victim` and queues the
//! faulting page, and the following missing-fault notice for that page does
//! not run PageFault again. ReclaimFrame runs once per frame taken back, with
//! `reclaim` = frames still to go, and names `victim` each time. Evicted pages
//! leave every queue. Minor faults (reference emulation) run no event: they
//! only set the referenced bit, which Ref reads.
//!
//! Trust. A named victim must be a resident page of the region other than the
//! faulting one; anything else is rejected (counted, and the engine chooses).
//! An event that exhausts its instruction budget or is stopped by the watchdog
//! ends the program's control of the region: by default a built-in policy
//! (CLOCK unless configured) takes over, seeded with the resident pages, and
//! serves the fault in progress; alternatively the program is detached and the
//! engine's own choice serves faults. Either way the run's report lists the
//! incident ([`Policy::incidents`]). Dirty pages are written back by the engine
//! on eviction whoever chooses, so none is lost.

use std::sync::Arc;
use std::time::Duration;

use crate::registry::{self, Setup};
use crate::{Fault, FaultKind, Memory, Page, Policy};

use super::interp::{EventInput, Outcome, Vm, NIL};
use super::verifier::Verified;
use super::watchdog::{Execution, Watchdog};

/// What happens when an event overruns its budget or time limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnOverrun {
    /// A built-in policy (by registry name) takes over the region.
    Fallback(String),
    /// The program is detached; the engine chooses victims from then on.
    Detach,
}

/// How a program is run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// Instruction budget per event; `None` scales it with the region.
    pub budget: Option<u64>,
    /// Time limit per event, enforced by the watchdog.
    pub timeout: Duration,
    /// What an overrun leads to.
    pub on_overrun: OnOverrun,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            budget: None,
            timeout: Duration::from_millis(100),
            on_overrun: OnOverrun::Fallback("clock".into()),
        }
    }
}

/// The default budget: enough for a few passes over every page of the region.
pub fn default_budget(slots: usize, frames: usize) -> u64 {
    4096 + 16 * slots.max(frames) as u64
}

/// Something the run's report must mention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incident {
    /// An event overran and the program lost control of the region.
    Overrun {
        /// The event.
        event: String,
        /// How it ended.
        outcome: Outcome,
        /// The built-in that took over, or `None` if detached.
        fallback: Option<String>,
    },
}

enum Mode {
    Program,
    Fallback(Box<dyn Policy>),
    Detached,
}

/// A policy program as a [`Policy`].
pub struct ProgramPolicy {
    name: String,
    vm: Vm,
    events: Vec<String>,
    page_fault: usize,
    reclaim_frame: usize,
    budget: u64,
    config: RunConfig,
    exec: Arc<Execution>,
    runs: u64,
    slots: usize,
    mode: Mode,
    pending: u32,
    incidents: Vec<Incident>,
    rejected: u64,
}

impl ProgramPolicy {
    /// Loads a verified program for a region of `slots` pages and `frames`
    /// frames, watched by the process-wide watchdog.
    pub fn new(
        name: &str,
        program: &Verified,
        config: RunConfig,
        slots: usize,
        frames: usize,
    ) -> Self {
        Self::with_watchdog(name, program, config, slots, frames, Watchdog::global())
    }

    /// As [`ProgramPolicy::new`], watched by `watchdog`.
    pub fn with_watchdog(
        name: &str,
        program: &Verified,
        config: RunConfig,
        slots: usize,
        frames: usize,
        watchdog: &Watchdog,
    ) -> Self {
        let exec = Execution::new(config.timeout);
        watchdog.watch(&exec);
        ProgramPolicy {
            name: name.into(),
            vm: Vm::new(program, slots),
            events: program
                .program()
                .events
                .iter()
                .map(|e| e.name.clone())
                .collect(),
            page_fault: program.page_fault(),
            reclaim_frame: program.reclaim_frame(),
            budget: config
                .budget
                .unwrap_or_else(|| default_budget(slots, frames)),
            config,
            exec,
            runs: 0,
            slots,
            mode: Mode::Program,
            pending: NIL,
            incidents: Vec::new(),
            rejected: 0,
        }
    }

    /// The same program run without the load-time optimiser (the plain
    /// decoded commands), for measuring what the optimiser gains.
    pub fn without_optimiser(mut self, program: &Verified) -> Self {
        self.vm = Vm::with_optimiser(program, self.slots, false);
        self
    }

    /// Typed incidents so far.
    pub fn incident_log(&self) -> &[Incident] {
        &self.incidents
    }

    /// Victims rejected so far (not resident pages of the region).
    pub fn rejected_victims(&self) -> u64 {
        self.rejected
    }

    /// Whether the program still controls the region.
    pub fn in_control(&self) -> bool {
        matches!(self.mode, Mode::Program)
    }

    /// Runs an event; on overrun hands the region over and returns `false`.
    #[inline(always)]
    fn run(&mut self, event: usize, input: EventInput, mem: &mut dyn Memory, exclude: u32) -> bool {
        self.exec.begin(self.runs);
        let outcome = self
            .vm
            .run(event, input, mem, self.budget, self.exec.stop_flag());
        self.exec.end(self.runs);
        self.runs += 1;
        if let Outcome::Returned { .. } = outcome {
            return true;
        }
        self.exec.rearm();
        self.take_over(event, outcome, mem, exclude);
        false
    }

    /// Hands the region to the fallback (or detaches), seeding the fallback
    /// with the resident pages, queued ones first in queue order, except
    /// `exclude` (a page whose missing fault is being delivered).
    #[cold]
    #[inline(never)]
    fn take_over(&mut self, event: usize, outcome: Outcome, mem: &mut dyn Memory, exclude: u32) {
        let name = match &self.config.on_overrun {
            OnOverrun::Fallback(n) => Some(n.clone()),
            OnOverrun::Detach => None,
        };
        let setup = Setup {
            slots: mem.slots(),
            frames: mem.capacity(),
            future: None,
        };
        let built = name
            .as_deref()
            .and_then(|n| registry::build_live(n, &setup).ok());
        self.incidents.push(Incident::Overrun {
            event: self.events[event].clone(),
            outcome,
            fallback: built.as_ref().map(|p| p.name()),
        });
        self.mode = match built {
            Some(mut p) => {
                let mut seeded = vec![false; mem.slots()];
                let order = self.vm.queued().into_iter().chain(0..mem.slots() as u32);
                for s in order {
                    let si = s as usize;
                    if si < seeded.len() && !seeded[si] && s != exclude && mem.is_resident(s) {
                        seeded[si] = true;
                        let fault = Fault {
                            page: mem.page(s),
                            kind: FaultKind::Missing,
                            write: false,
                            time: 0,
                        };
                        p.on_fault(fault, mem);
                    }
                }
                Mode::Fallback(p)
            }
            None => Mode::Detached,
        };
    }

    /// The program's victim if it is a resident page other than `incoming`.
    #[inline(always)]
    fn checked_victim(&mut self, incoming: u32, mem: &dyn Memory) -> Option<Page> {
        let v = self.vm.victim();
        if v == NIL {
            return None;
        }
        // Pages come from the engine, so `v < slots` except when the region
        // grew; only then ask the engine again.
        if (v as usize) >= self.slots {
            self.slots = mem.slots();
        }
        if v != incoming && (v as usize) < self.slots && mem.is_resident(v) {
            Some(mem.page(v))
        } else {
            self.rejected += 1;
            None
        }
    }
}

impl Policy for ProgramPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        match &mut self.mode {
            Mode::Fallback(p) => return p.on_fault(fault, mem),
            Mode::Detached => return,
            Mode::Program => {}
        }
        if fault.kind != FaultKind::Missing {
            return;
        }
        let slot = fault.page.slot;
        if std::mem::replace(&mut self.pending, NIL) == slot {
            return;
        }
        let (capacity, resident) = (mem.capacity(), mem.resident());
        let input = EventInput {
            fault: slot,
            free: (capacity + 1).saturating_sub(resident) as i64,
            reclaim: 0,
            write: fault.write,
            resident: resident as i64,
            capacity: capacity as i64,
        };
        if !self.run(self.page_fault, input, mem, slot) {
            if let Mode::Fallback(p) = &mut self.mode {
                p.on_fault(fault, mem);
            }
        }
    }

    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        match &mut self.mode {
            Mode::Fallback(p) => return p.victim(incoming, mem),
            Mode::Detached => return None,
            Mode::Program => {}
        }
        // The engine asks for a victim only when no frame is free; counts are
        // fetched only if the program reads them, or for the engine's
        // reclaim-time requests (no incoming page).
        let (capacity, resident) = if self.vm.needs_counts() || incoming.slot == NIL {
            (mem.capacity(), mem.resident())
        } else {
            (0, 0)
        };
        let input = EventInput {
            fault: incoming.slot,
            free: capacity.saturating_sub(resident) as i64,
            reclaim: 0,
            write: false,
            resident: resident as i64,
            capacity: capacity as i64,
        };
        self.pending = incoming.slot;
        if self.run(self.page_fault, input, mem, incoming.slot) {
            return self.checked_victim(incoming.slot, mem);
        }
        self.pending = NIL;
        match &mut self.mode {
            Mode::Fallback(p) => p.victim(incoming, mem),
            _ => None,
        }
    }

    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        match &mut self.mode {
            Mode::Program => self.vm.forget(page.slot),
            Mode::Fallback(p) => p.on_evict(page, mem),
            Mode::Detached => {}
        }
    }

    fn on_forget(&mut self, page: Page) {
        if let Mode::Fallback(p) = &mut self.mode {
            p.on_forget(page);
        }
    }

    fn reclaim(&mut self, count: usize, mem: &mut dyn Memory) -> Vec<Page> {
        let mut chosen: Vec<Page> = Vec::with_capacity(count.min(mem.resident()));
        for i in 0..count {
            if let Mode::Fallback(p) = &mut self.mode {
                chosen.extend(p.reclaim(count - i, mem));
                break;
            }
            if !self.in_control() {
                break;
            }
            let (capacity, resident) = (mem.capacity(), mem.resident());
            let input = EventInput {
                fault: NIL,
                free: capacity.saturating_sub(resident) as i64,
                reclaim: (count - i) as i64,
                write: false,
                resident: resident as i64,
                capacity: capacity as i64,
            };
            if !self.run(self.reclaim_frame, input, mem, NIL) {
                if let Mode::Fallback(p) = &mut self.mode {
                    chosen.extend(p.reclaim(count - i, mem));
                }
                break;
            }
            match self.checked_victim(NIL, mem) {
                Some(v) if !chosen.contains(&v) => {
                    self.vm.forget(v.slot);
                    chosen.push(v);
                }
                Some(_) => {
                    self.rejected += 1;
                    break;
                }
                None => break,
            }
        }
        chosen
    }

    fn incidents(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .incidents
            .iter()
            .map(|i| match i {
                Incident::Overrun {
                    event,
                    outcome,
                    fallback,
                } => {
                    let why = match outcome {
                        Outcome::Budget { steps } => {
                            format!("ran out of its instruction budget ({steps} commands)")
                        }
                        Outcome::Stopped { steps } => format!(
                            "was stopped by the watchdog after {steps} commands (time limit {} ms)",
                            self.config.timeout.as_millis()
                        ),
                        Outcome::Returned { .. } => "returned".into(),
                    };
                    let then = match fallback {
                        Some(f) => format!("built-in `{f}` took over the region"),
                        None => "the program was detached; the engine chooses victims".into(),
                    };
                    format!(
                        "policy program `{}`: event {event} {why}; {then}",
                        self.name
                    )
                }
            })
            .collect();
        if self.rejected > 0 {
            out.push(format!(
                "policy program `{}`: {} victim(s) rejected (not a resident page of the region)",
                self.name, self.rejected
            ));
        }
        out
    }
}
