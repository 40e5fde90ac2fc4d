//! The interposer's one lock, a `pthread_mutex_t` held across `fork` by
//! the forking thread (`pthread_atfork`), so that the child's copy is never
//! locked by a thread it does not have.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// A value behind a fork-safe mutex.
pub struct ForkLock<T> {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, which holds the mutex.
unsafe impl<T: Send> Sync for ForkLock<T> {}

/// The lock held.
pub struct Guard<'a, T> {
    lock: &'a ForkLock<T>,
}

impl<T> ForkLock<T> {
    /// An unlocked lock around `value`.
    pub const fn new(value: T) -> Self {
        ForkLock {
            mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks it.
    pub fn lock(&self) -> Guard<'_, T> {
        self.raw_lock();
        Guard { lock: self }
    }

    /// Locks without a guard (before `fork`).
    pub fn raw_lock(&self) {
        // SAFETY: the mutex was initialized statically and never moves
        // (the lock lives in a static).
        unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
    }

    /// Unlocks what `raw_lock` locked (after `fork`, in parent and child).
    ///
    /// # Safety
    /// The calling thread holds the mutex through `raw_lock`, with no guard.
    pub unsafe fn raw_unlock(&self) {
        // SAFETY: held by this thread (the caller's promise).
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex: no other reference exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard was made by `lock`, which locked the mutex.
        unsafe { libc::pthread_mutex_unlock(self.lock.mutex.get()) };
    }
}
