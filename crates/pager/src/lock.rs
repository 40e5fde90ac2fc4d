//! The region's lock: one mutex over the frame table, the policy and the
//! read-ahead state ([`RegionState`]), and the condition variable threads wait
//! on for a page to leave a transition state.
//!
//! The guard keeps two rules of the frame table for every holder: the PTEs
//! of pages whose referenced bit the policy cleared are zapped before the
//! lock is let go (the next access is a minor fault that sets the bit
//! again), and a transition that ends a page's Loading or Evicting state,
//! or a budget that grew, wakes the threads that wait, once the lock is
//! let go. Nobody has to remember either at a call site.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::region_state::RegionState;
use crate::sys::{self, PAGE};

/// The lock over a region's [`RegionState`], with its waiters.
pub struct RegionLock {
    inner: Mutex<RegionState>,
    /// Signalled when a page leaves a transition state.
    cv: Condvar,
    /// Threads waiting on `cv` (changed under the lock): a notification is
    /// a system call, made only when someone waits.
    waiting: AtomicUsize,
    /// The application's view, whose PTEs cleared pages are zapped from.
    app: usize,
}

/// A hold of the region's lock (see the module's rules on release).
pub struct Locked<'a> {
    lock: &'a RegionLock,
    /// `None` only while the hold is handed to the condition variable.
    guard: Option<MutexGuard<'a, RegionState>>,
}

impl RegionLock {
    /// The lock over `inner`, for a region whose application view is at `app`.
    pub fn new(inner: RegionState, app: usize) -> Self {
        RegionLock {
            inner: Mutex::new(inner),
            cv: Condvar::new(),
            waiting: AtomicUsize::new(0),
            app,
        }
    }

    /// Takes the lock, surviving a poisoned one (a panicking policy must
    /// not take the region's data down with it).
    pub fn lock(&self) -> Locked<'_> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Locked {
            lock: self,
            guard: Some(guard),
        }
    }

    /// Lets the lock go and waits for the next notification.
    pub fn wait<'a>(&'a self, held: Locked<'a>) -> Locked<'a> {
        self.wait_with(held, |cv, guard| {
            cv.wait(guard).unwrap_or_else(|p| p.into_inner())
        })
    }

    /// [`RegionLock::wait`], for at most `timeout`.
    pub fn wait_timeout<'a>(
        &'a self,
        held: Locked<'a>,
        timeout: std::time::Duration,
    ) -> Locked<'a> {
        self.wait_with(held, |cv, guard| {
            cv.wait_timeout(guard, timeout)
                .unwrap_or_else(|p| p.into_inner())
                .0
        })
    }

    /// Settles the hold (as its release would), then lets `wait` hand the
    /// guard to the condition variable, counted as a waiter meanwhile.
    fn wait_with<'a>(
        &'a self,
        mut held: Locked<'a>,
        wait: impl FnOnce(&Condvar, MutexGuard<'a, RegionState>) -> MutexGuard<'a, RegionState>,
    ) -> Locked<'a> {
        let mut guard = held.guard.take().expect("a hold has its guard");
        if self.settle(&mut guard) {
            self.notify();
        }
        self.waiting.fetch_add(1, SeqCst);
        let guard = wait(&self.cv, guard);
        self.waiting.fetch_sub(1, SeqCst);
        Locked {
            lock: self,
            guard: Some(guard),
        }
    }

    /// Wakes the threads waiting (for a change not made through the frame
    /// table: a prefetched window accounted, the region's mode).
    pub fn notify(&self) {
        if self.waiting.load(SeqCst) > 0 {
            self.cv.notify_all();
        }
    }

    /// Wakes every waiter, whether or not it is counted yet.
    pub fn notify_all(&self) {
        self.cv.notify_all();
    }

    /// Zaps the cleared pages' PTEs (under the lock); says whether the
    /// table asked for a wake-up.
    fn settle(&self, g: &mut RegionState) -> bool {
        g.table.drain_cleared(|first, n| {
            // A failed zap leaves the page mapped: its next access is not
            // seen, as if its referenced bit had not been cleared.
            let _ = sys::zap(self.app + first as usize * PAGE, n * PAGE);
        });
        g.table.take_wake()
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let wake = self.lock.settle(&mut guard);
            drop(guard);
            if wake {
                self.lock.notify();
            }
        }
    }
}

impl Deref for Locked<'_> {
    type Target = RegionState;
    fn deref(&self) -> &RegionState {
        self.guard.as_ref().expect("a hold has its guard")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut RegionState {
        self.guard.as_mut().expect("a hold has its guard")
    }
}
