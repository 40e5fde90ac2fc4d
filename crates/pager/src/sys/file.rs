//! Backing files: direct and buffered opens, positioned I/O that finishes
//! what it starts, and the kernel's page cache (what it holds, dropping it).

use std::io;
use std::os::fd::AsRawFd;

use super::check;

/// The page stores' raw calls, made once, in `pagepilot-dataspace`.
pub use pagepilot_dataspace::sys::{
    cached_pages, device_readahead_kb, open_direct, pread_full, pwrite_all, tmpfile_direct,
};

/// The file that drops the page cache.
pub const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// Writes back dirty pages and drops the whole page cache (`sync; echo 3 > drop_caches`;
/// needs root).
pub fn drop_page_cache() -> io::Result<()> {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write(DROP_CACHES, "3\n")
}

/// Asks the kernel to drop the cached pages of `file` (`POSIX_FADV_DONTNEED`).
pub fn fadvise_dontneed(file: &std::fs::File) -> io::Result<()> {
    drop_cached(file.as_raw_fd())
}

/// Asks the kernel to drop the clean, unmapped cached pages of the file
/// `fd` names (`POSIX_FADV_DONTNEED`).
pub fn drop_cached(fd: std::os::fd::RawFd) -> io::Result<()> {
    // SAFETY: fadvise on a descriptor the caller holds only affects the page cache.
    let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Whether `dir` lives on tmpfs (so not on a block device).
pub fn is_tmpfs(dir: &std::path::Path) -> io::Result<bool> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: statfs is plain data; zeroed is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL terminated and st is a valid out-pointer.
    check(unsafe { libc::statfs(c.as_ptr(), &mut st) })?;
    Ok(st.f_type as i64 == TMPFS_MAGIC)
}

/// Whether the file system of `file` takes `RWF_NOWAIT` reads (a read of
/// one byte that would block answers EAGAIN; one it does not support,
/// EOPNOTSUPP).
pub fn supports_nowait(file: &std::fs::File) -> io::Result<bool> {
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: one iovec over a live local byte; the call writes at most one byte.
    let r = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, 0, libc::RWF_NOWAIT) };
    match r {
        n if n >= 0 => Ok(true),
        _ => match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::EAGAIN) => Ok(true),
            e if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(false),
            e => Err(e),
        },
    }
}

/// Whether this process may write in `path` (`access(2)`, `W_OK`).
pub fn writable(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}
