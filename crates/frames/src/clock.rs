//! Time as the frame manager and the rate controller see it.

use std::cell::Cell;

/// A source of time in nanoseconds from an arbitrary origin: the
/// simulator's reference clock, or a monotonic clock live.
pub trait Clock {
    /// Now, nanoseconds.
    fn now_ns(&self) -> u64;
}

/// A borrowed clock: the caller keeps it and moves it.
impl<T: Clock + ?Sized> Clock for &T {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

/// A clock that moves only when told: for the simulator and tests.
#[derive(Debug, Default)]
pub struct ManualClock(Cell<u64>);

impl ManualClock {
    /// A clock at `ns`.
    pub fn at(ns: u64) -> Self {
        ManualClock(Cell::new(ns))
    }

    /// Sets the clock to `ns`.
    pub fn set(&self, ns: u64) {
        self.0.set(ns);
    }

    /// Moves the clock `ns` forward.
    pub fn advance(&self, ns: u64) {
        self.0.set(self.0.get() + ns);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.0.get()
    }
}
