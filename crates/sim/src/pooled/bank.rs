//! The frame manager as the simulated processes share it: one
//! [`FrameManager`] on the simulated clock, and each process's `Request` /
//! `Release` drawn from it ([`Draw`], the machine's [`FrameSource`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use pagepilot_frames::{Clock, FrameManager, HolderId};

use crate::engine::FrameSource;

/// Simulated time, in reference times, shared by the frame manager and the
/// rate controller (one clock nanosecond is one reference time).
#[derive(Clone, Debug, Default)]
pub(crate) struct SimClock(Rc<Cell<u64>>);

impl SimClock {
    /// Moves the clock to `now`.
    pub(crate) fn set(&self, now: u64) {
        self.0.set(now);
    }
}

impl Clock for SimClock {
    fn now_ns(&self) -> u64 {
        self.0.get()
    }
}

/// The shared frame manager, and whether a policy asked it something since
/// the engine last looked (a `Request` may ask other holders for frames back).
pub(crate) struct Bank {
    pub(crate) manager: FrameManager<SimClock>,
    pub(crate) touched: bool,
}

/// The shared bank.
pub(crate) type SharedBank = Rc<RefCell<Bank>>;

/// One process's access to the bank: its policy's `Request` and `Release`.
pub(crate) struct Draw {
    pub(crate) bank: SharedBank,
    pub(crate) holder: HolderId,
}

impl FrameSource for Draw {
    fn request(&mut self, count: usize) -> usize {
        let mut bank = self.bank.borrow_mut();
        bank.touched = true;
        // The reclamations a request sets off are the manager's pending
        // ones; the engine dispatches them after this reference.
        bank.manager
            .request(self.holder, count)
            .map_or(0, |(granted, _)| granted)
    }

    fn release(&mut self, count: usize) -> usize {
        let mut bank = self.bank.borrow_mut();
        bank.touched = true;
        bank.manager.release(self.holder, count).unwrap_or(0)
    }
}
