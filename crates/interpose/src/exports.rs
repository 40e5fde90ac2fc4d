//! The C library's functions as the program calls them: each passes
//! straight on unless it concerns a taken-over file (`maps`, `io`).
//! `mremap`'s fifth argument is read only with `MREMAP_FIXED`, as the C
//! library does (on x86-64 an argument not passed is a register's garbage).

#![allow(missing_docs)]

use std::ffi::{c_int, c_void};

use libc::{off_t, size_t, ssize_t};

use crate::{fds, io, maps, real, remap, state};

/// # Safety
/// As mmap(2).
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    if state::bypass() {
        // SAFETY: the program's own call.
        return unsafe { real::mmap(addr, len, prot, flags, fd, off) };
    }
    match maps::mmap(addr as usize, len, prot, flags, fd, off) {
        maps::Mapped::Window(at) => at as *mut c_void,
        maps::Mapped::Kernel { watch } => {
            // SAFETY: the program's own call.
            let p = unsafe { real::mmap(addr, len, prot, flags, fd, off) };
            if watch && p != libc::MAP_FAILED {
                remap::watch(p as usize, len, prot, fd, off);
            }
            p
        }
    }
}

/// # Safety
/// As mmap(2).
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: the same call.
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}

/// # Safety
/// As munmap(2).
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    if !state::bypass() {
        remap::unwatch(addr as usize, (addr as usize).saturating_add(len));
        if let Some(r) = maps::munmap(addr as usize, len) {
            return r;
        }
    }
    // SAFETY: the program's own call.
    unsafe { real::munmap(addr, len) }
}

/// # Safety
/// As mremap(2).
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let new_addr = if flags & libc::MREMAP_FIXED != 0 {
        new_addr
    } else {
        std::ptr::null_mut()
    };
    if !state::bypass() {
        if let Some(p) = remap::mremap(old as usize, old_len, new_len, flags, new_addr as usize) {
            return p;
        }
    }
    // SAFETY: the program's own call.
    unsafe { real::mremap(old, old_len, new_len, flags, new_addr) }
}

/// # Safety
/// As msync(2).
#[no_mangle]
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    if !state::bypass() {
        if let Some(r) = maps::msync(addr as usize, len, flags) {
            return r;
        }
    }
    // SAFETY: the program's own call.
    unsafe { real::msync(addr, len, flags) }
}

/// # Safety
/// As madvise(2).
#[no_mangle]
pub unsafe extern "C" fn madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    if !state::bypass() {
        if let Some(r) = maps::madvise(addr as usize, len, advice) {
            return r;
        }
    }
    // SAFETY: the program's own call.
    unsafe { real::madvise(addr, len, advice) }
}

/// # Safety
/// As mprotect(2).
#[no_mangle]
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    if !state::bypass() {
        if let Some(r) = maps::mprotect(addr as usize, len, prot) {
            return r;
        }
    }
    // SAFETY: the program's own call.
    unsafe { real::mprotect(addr, len, prot) }
}

/// Runs `ours` unless the call is to be passed on or is not about a
/// taken-over file; then `theirs`. In a child after `fork` the regions are
/// the kernel's mappings of their files, and the page cache alone keeps
/// its I/O coherent (`state::took_here`).
fn route<T>(ours: impl FnOnce() -> Option<T>, theirs: impl FnOnce() -> T) -> T {
    if state::bypass() || !state::took_here() {
        return theirs();
    }
    ours().unwrap_or_else(theirs)
}

/// # Safety
/// As read(2).
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    // SAFETY: the program's own call.
    route(
        || io::read(fd, &io::one(buf, n), None),
        || unsafe { real::read(fd, buf, n) },
    )
}

/// # Safety
/// As pread(2).
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the program's own call.
    route(
        || io::read(fd, &io::one(buf, n), Some(off)),
        || unsafe { real::pread64(fd, buf, n, off) },
    )
}

/// # Safety
/// As pread(2).
#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the same call.
    unsafe { pread64(fd, buf, n, off) }
}

/// # Safety
/// As readv(2).
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
    // SAFETY: the program's own call; `iov` holds `cnt` entries.
    route(
        || io::read(fd, unsafe { iovecs(iov, cnt)? }, None),
        || unsafe { real::readv(fd, iov, cnt) },
    )
}

/// # Safety
/// As preadv(2).
#[no_mangle]
pub unsafe extern "C" fn preadv64(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    // SAFETY: as `readv`.
    route(
        || io::read(fd, unsafe { iovecs(iov, cnt)? }, Some(off)),
        || unsafe { real::preadv64(fd, iov, cnt, off) },
    )
}

/// # Safety
/// As preadv(2).
#[no_mangle]
pub unsafe extern "C" fn preadv(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    // SAFETY: the same call.
    unsafe { preadv64(fd, iov, cnt, off) }
}

/// # Safety
/// As write(2).
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    // SAFETY: the program's own call.
    route(
        || io::write(fd, &io::one(buf, n), None),
        || unsafe { real::write(fd, buf, n) },
    )
}

/// # Safety
/// As pwrite(2).
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the program's own call.
    route(
        || io::write(fd, &io::one(buf, n), Some(off)),
        || unsafe { real::pwrite64(fd, buf, n, off) },
    )
}

/// # Safety
/// As pwrite(2).
#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
    // SAFETY: the same call.
    unsafe { pwrite64(fd, buf, n, off) }
}

/// # Safety
/// As writev(2).
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
    // SAFETY: as `readv`.
    route(
        || io::write(fd, unsafe { iovecs(iov, cnt)? }, None),
        || unsafe { real::writev(fd, iov, cnt) },
    )
}

/// # Safety
/// As pwritev(2).
#[no_mangle]
pub unsafe extern "C" fn pwritev64(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    // SAFETY: as `readv`.
    route(
        || io::write(fd, unsafe { iovecs(iov, cnt)? }, Some(off)),
        || unsafe { real::pwritev64(fd, iov, cnt, off) },
    )
}

/// # Safety
/// As pwritev(2).
#[no_mangle]
pub unsafe extern "C" fn pwritev(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: off_t,
) -> ssize_t {
    // SAFETY: the same call.
    unsafe { pwritev64(fd, iov, cnt, off) }
}

/// # Safety
/// As ftruncate(2).
#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    // SAFETY: the program's own call.
    route(
        || io::ftruncate(fd, len),
        || unsafe { real::ftruncate64(fd, len) },
    )
}

/// # Safety
/// As ftruncate(2).
#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    // SAFETY: the same call.
    unsafe { ftruncate64(fd, len) }
}

/// # Safety
/// As fallocate(2).
#[no_mangle]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: the program's own call.
    route(
        || io::fallocate(fd, mode, off, len),
        || unsafe { real::fallocate64(fd, mode, off, len) },
    )
}

/// # Safety
/// As fallocate(2).
#[no_mangle]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
    // SAFETY: the same call.
    unsafe { fallocate64(fd, mode, off, len) }
}

/// # Safety
/// As fsync(2).
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    if route(|| io::sync(fd), || true) {
        // SAFETY: the program's own call.
        unsafe { real::fsync(fd) }
    } else {
        -1
    }
}

/// # Safety
/// As fdatasync(2).
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    if route(|| io::sync(fd), || true) {
        // SAFETY: the program's own call.
        unsafe { real::fdatasync(fd) }
    } else {
        -1
    }
}

/// # Safety
/// As close(2).
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    fds::forget(fd);
    // SAFETY: the program's own call.
    unsafe { real::close(fd) }
}

/// # Safety
/// As dup2(2).
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    fds::forget(new);
    // SAFETY: the program's own call.
    unsafe { real::dup2(old, new) }
}

/// # Safety
/// As dup3(2).
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    fds::forget(new);
    // SAFETY: the program's own call.
    unsafe { real::dup3(old, new, flags) }
}

/// The program's `iovec` array, if it is one.
///
/// # Safety
/// `iov` points to `cnt` entries when `cnt` is in 1..=IOV_MAX.
unsafe fn iovecs<'a>(iov: *const libc::iovec, cnt: c_int) -> Option<&'a [libc::iovec]> {
    if iov.is_null() || !(1..=1024).contains(&cnt) {
        return None;
    }
    // SAFETY: the caller's promise.
    Some(unsafe { std::slice::from_raw_parts(iov, cnt as usize) })
}
