//! SIGTERM and SIGINT, taken by a thread that waits for them
//! (sigwait(3)) rather than ending the process where it stands.

use std::io;

/// The blocked signals, to wait for.
#[derive(Clone, Copy)]
pub struct Signals {
    set: libc::sigset_t,
}

impl Signals {
    /// Blocks SIGTERM and SIGINT in the calling thread and so in every
    /// thread it starts afterwards: call it before starting any.
    pub fn block() -> io::Result<Signals> {
        // SAFETY: an all-zero sigset_t is a valid value to hand to
        // sigemptyset, which initializes it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a live, writable sigset_t; the signal numbers
        // are valid; pthread_sigmask changes only this thread's mask and
        // accepts a null old-mask pointer.
        let rc = unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Signals { set })
    }

    /// Waits until one of them arrives; returns its number.
    pub fn wait(&self) -> io::Result<i32> {
        let mut signal = 0;
        // SAFETY: `set` was initialized in `block`; `signal` is a valid
        // place for the result.
        let rc = unsafe { libc::sigwait(&self.set, &mut signal) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(signal)
    }
}
