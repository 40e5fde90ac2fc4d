//! Open file description locks on a memfd: the leases by which a parent
//! knows whether a child still shares its regions (`crate::lease`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::check;

/// A new open file description of what `fd` names (opened again through
/// `/proc/self/fd`), close-on-exec: locks taken on it are its own.
pub fn reopen(fd: RawFd) -> io::Result<OwnedFd> {
    open_path(&format!("/proc/self/fd/{fd}"))
}

/// Opens `path` read-write, close-on-exec (a lease another process named).
pub fn open_path(path: &str) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let raw = check(unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: `raw` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value; the fields set below
    // make it the whole file (l_len 0: to the end and beyond).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l
}

/// Takes a shared lock on the whole file for `fd`'s open file description
/// (`F_OFD_SETLK`): held until every descriptor of that description, in
/// any process, is closed.
pub fn lock_shared(fd: impl AsFd) -> io::Result<()> {
    let mut l = whole_file(libc::F_RDLCK);
    // SAFETY: F_OFD_SETLK reads one flock that outlives the call.
    check(unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_OFD_SETLK, &mut l) })?;
    Ok(())
}

/// Whether another open file description than `fd`'s holds a lock on the
/// file (`F_OFD_GETLK` of an exclusive lock).
pub fn locked_by_others(fd: impl AsFd) -> io::Result<bool> {
    let mut l = whole_file(libc::F_WRLCK);
    // SAFETY: F_OFD_GETLK reads and writes one flock that outlives the call.
    check(unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_OFD_GETLK, &mut l) })?;
    Ok(l.l_type != libc::F_UNLCK as libc::c_short)
}

/// Sets the length of the file `fd` names (`ftruncate`).
pub fn set_len(fd: RawFd, len: usize) -> io::Result<()> {
    // SAFETY: ftruncate on a descriptor the caller holds.
    check(unsafe { libc::ftruncate(fd, len as libc::off_t) })?;
    Ok(())
}

/// When process `pid` started, in clock ticks since boot
/// (`/proc/<pid>/stat`, field 22): with the id, names one process.
pub fn process_start_time(pid: u32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // "pid (comm) state ...": comm may hold spaces and parentheses.
    let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    after
        .split_whitespace()
        .nth(19)
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed /proc stat"))
}
