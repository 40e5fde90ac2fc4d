//! `UFFD_FEATURE_EVENT_FORK`: a child made by `fork` keeps the registered
//! ranges of a userfaultfd with this feature, under a userfaultfd of its
//! own, which the parent's handler receives in a fork event (`fork()`
//! waits until the event is read). Only `pagepilot bench fork-ways` uses
//! it: the price of serving a child's faults from the parent's handler
//! (docs/lifecycle.md, "Why children share the kernel's mapping").

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::{check, Uffd, UffdMsg};

/// Feature: a fork event, and the child's copy of each registered range
/// registered with a new userfaultfd.
pub const FEATURE_EVENT_FORK: u64 = 1 << 1;

const EVENT_FORK: u8 = 0x13;

impl UffdMsg {
    /// If this is a fork event: the descriptor of the child's userfaultfd,
    /// opened in this process by the read that returned the message.
    pub fn forked_uffd(&self) -> Option<RawFd> {
        // `arg.fork.ufd`, a u32 at the start of the union, where a page
        // fault's flags are.
        (self.event == EVENT_FORK).then_some(self.flags as u32 as RawFd)
    }
}

impl Uffd {
    /// The userfaultfd a fork event delivered ([`UffdMsg::forked_uffd`]):
    /// its API is the parent's, its features and flags too (non-blocking,
    /// close-on-exec).
    ///
    /// # Safety
    ///
    /// `fd` must be a descriptor of a fork event that nothing else owns or closes.
    pub unsafe fn from_forked(fd: RawFd) -> Uffd {
        // SAFETY: the caller passes a descriptor only this object owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Uffd { fd }
    }
}

/// Most descriptors [`poll_readable`] waits on.
pub const POLL_MAX: usize = 64;

/// Marks in `ready` which of `fds` are readable (negative ones are left
/// out), waiting up to `timeout_ms` for one (none on a timeout or a
/// signal). Allocates nothing: a handler may call it while another thread
/// forks (glibc holds its allocator's locks across `fork()`, which waits
/// for the handler to read the fork event). At most [`POLL_MAX`] descriptors.
pub fn poll_readable(fds: &[RawFd], ready: &mut [bool], timeout_ms: i32) -> io::Result<()> {
    if fds.len() > POLL_MAX || ready.len() < fds.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; POLL_MAX];
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
    }
    // SAFETY: `pfds` holds `fds.len()` <= POLL_MAX valid pollfds and outlives the call.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    let interrupted = n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted;
    if n < 0 && !interrupted {
        return Err(io::Error::last_os_error());
    }
    for (r, p) in ready.iter_mut().zip(&pfds[..fds.len()]) {
        *r = n > 0 && p.revents & libc::POLLIN != 0;
    }
    Ok(())
}

/// Lets a child copy `[addr, addr+len)` again (MADV_DOFORK), undoing
/// [`crate::sys::dont_fork`].
pub fn do_fork(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the advice only changes what fork copies, never this process's memory.
    check(unsafe {
        crate::sys::direct::madvise(addr as *mut libc::c_void, len, libc::MADV_DOFORK)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn test_a_fork_event_names_the_childs_descriptor_and_a_fault_does_not() {
        let fork = UffdMsg {
            event: EVENT_FORK,
            flags: 42,
            ..UffdMsg::default()
        };
        assert_eq!(fork.forked_uffd(), Some(42));
        assert_eq!(fork.pagefault(), None);
        let fault = UffdMsg {
            event: 0x12,
            flags: 42,
            ..UffdMsg::default()
        };
        assert_eq!(fault.forked_uffd(), None);
    }

    #[test]
    fn test_poll_marks_only_the_readable_descriptors() {
        let (quiet, rung) = (
            crate::sys::eventfd().unwrap(),
            crate::sys::eventfd().unwrap(),
        );
        crate::sys::eventfd_signal(rung.as_raw_fd()).unwrap();
        let mut ready = [true; 3];
        poll_readable(&[quiet.as_raw_fd(), -1, rung.as_raw_fd()], &mut ready, 0).unwrap();
        assert_eq!(ready, [false, false, true]);
        let too_many = [-1; POLL_MAX + 1];
        assert!(poll_readable(&too_many, &mut [false; POLL_MAX + 1], 0).is_err());
    }
}
