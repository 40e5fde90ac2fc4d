//! A client's process, held by a pidfd from its connection on: whether it
//! has exited is known without pid reuse in between. The daemon writes
//! back a departed client's pages only once its process has exited: the
//! memory of a process still running is its own (it writes back itself),
//! and a write-back racing with it could put an older copy of a page over
//! a newer one.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// How long a client whose connection ended is given to finish exiting:
/// a process killed closes its descriptors (so the daemon sees the
/// connection end) before the kernel marks it exited.
pub const EXIT_WAIT: Duration = Duration::from_secs(5);

/// The process `pid` (as `SO_PEERCRED` names it), if it can be held: not
/// when it is gone already, or outside the daemon's pid namespace (pid 0).
pub fn open(pid: u32) -> Option<OwnedFd> {
    let pid = Pid::from_raw(i32::try_from(pid).ok()?)?;
    pidfd_open(pid, PidfdFlags::empty()).ok()
}

/// Whether the process has exited, waiting for it at most `timeout`. A
/// process that could not be held counts as exited.
pub fn exited_within(process: Option<&OwnedFd>, timeout: Duration) -> bool {
    let Some(fd) = process else {
        return true;
    };
    let timeout = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // A pidfd is readable once its process has exited.
    let mut fds = [PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN)];
    loop {
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_has_not_exited_and_a_reaped_one_has() {
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let held = open(child.id());
        assert!(held.is_some());
        assert!(!exited_within(held.as_ref(), Duration::from_millis(50)));
        child.kill().unwrap();
        assert!(exited_within(held.as_ref(), Duration::from_secs(5)));
        child.wait().unwrap();
        assert!(exited_within(held.as_ref(), Duration::ZERO));
    }
}
