//! The mapping calls as system calls, not the C library's functions of the
//! same names: a library interposed on those (`pagepilot run`'s) sees only
//! the program's own calls, never the pager's. Same arguments and results
//! as the C functions.

use libc::{c_int, c_long, c_void, off_t, size_t};

/// mmap(2).
///
/// # Safety
/// As mmap(2).
pub unsafe fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: forwarded from the caller; the kernel returns an address or -errno.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mmap,
            addr,
            len,
            prot as c_long,
            flags as c_long,
            fd as c_long,
            off,
        )
    };
    if r < 0 {
        libc::MAP_FAILED
    } else {
        r as *mut c_void
    }
}

/// munmap(2).
///
/// # Safety
/// As munmap(2).
pub unsafe fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int }
}

/// madvise(2).
///
/// # Safety
/// As madvise(2).
pub unsafe fn madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { libc::syscall(libc::SYS_madvise, addr, len, advice as c_long) as c_int }
}

/// mprotect(2).
///
/// # Safety
/// As mprotect(2).
pub unsafe fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot as c_long) as c_int }
}

/// msync(2).
///
/// # Safety
/// As msync(2).
pub unsafe fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { libc::syscall(libc::SYS_msync, addr, len, flags as c_long) as c_int }
}
