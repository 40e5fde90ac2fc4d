//! Backing files: direct and buffered opens, positioned I/O that finishes
//! what it starts, and the kernel's page cache (what it holds, dropping it).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use super::check;

/// Opens `path` for direct I/O. Falls back to buffered I/O where the file
/// system refuses O_DIRECT; the second value says which one it got.
pub fn open_direct(
    path: &std::path::Path,
    write: bool,
    create: bool,
) -> io::Result<(std::fs::File, bool)> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |direct: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .create(create)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(path)
    };
    direct_or_buffered(open)
}

/// An unnamed file in `dir` (O_TMPFILE), direct I/O if the file system allows.
pub fn tmpfile_direct(dir: &std::path::Path) -> io::Result<(std::fs::File, bool)> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |direct: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE | if direct { libc::O_DIRECT } else { 0 })
            .open(dir)
    };
    direct_or_buffered(open)
}

/// Opens with O_DIRECT (`open(true)`), or buffered where the file system
/// refuses it (EINVAL); the second value says which one it got.
fn direct_or_buffered(
    open: impl Fn(bool) -> io::Result<std::fs::File>,
) -> io::Result<(std::fs::File, bool)> {
    match open(true) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open(false).map(|f| (f, false)),
        Err(e) => Err(e),
    }
}

/// Reads up to `len` bytes at `off` into `dst`, looping over short reads;
/// returns the bytes read (less than `len` only at end of file).
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes and not aliased by a Rust reference.
pub unsafe fn pread_full(fd: RawFd, dst: *mut u8, len: usize, off: u64) -> io::Result<usize> {
    positioned(len, off, |done, at| {
        // SAFETY: the caller guarantees `dst..dst+len` is writable; `done < len` keeps us inside.
        unsafe { libc::pread(fd, dst.add(done).cast(), len - done, at) }
    })
}

/// Writes all `len` bytes from `src` at `off`.
///
/// # Safety
/// `src` must be valid for `len` bytes of reads.
pub unsafe fn pwrite_all(fd: RawFd, src: *const u8, len: usize, off: u64) -> io::Result<()> {
    let done = positioned(len, off, |done, at| {
        // SAFETY: the caller guarantees `src..src+len` is readable; `done < len` keeps us inside.
        unsafe { libc::pwrite(fd, src.add(done).cast(), len - done, at) }
    })?;
    if done < len {
        // A write that makes no progress: the file system is full.
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    Ok(())
}

/// Loops `io(done, file offset)` (one pread or pwrite of the rest) until `len`
/// bytes are done or a call returns 0, retrying interrupted calls; returns the
/// bytes done.
fn positioned(
    len: usize,
    off: u64,
    mut io: impl FnMut(usize, libc::off_t) -> isize,
) -> io::Result<usize> {
    let mut done = 0;
    while done < len {
        let n = io(done, (off + done as u64) as libc::off_t);
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n as usize;
    }
    Ok(done)
}

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
    // SAFETY: fadvise on a valid descriptor only affects the page cache.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// The `read_ahead_kb` of the block device holding `path` (its disk's, for
/// a partition): how much the kernel reads around a fault on a mapping of
/// it. `None` where there is no such device (tmpfs) or it cannot be read.
pub fn device_readahead_kb(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let dir = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    ["queue/read_ahead_kb", "../queue/read_ahead_kb"]
        .iter()
        .find_map(|f| std::fs::read_to_string(std::path::Path::new(&dir).join(f)).ok())
        .and_then(|s| s.trim().parse().ok())
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

/// `struct cachestat_range` (Linux 6.5).
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `struct cachestat` (Linux 6.5).
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

const SYS_CACHESTAT: libc::c_long = 451;

/// Pages of `fd`'s `[off, off+len)` the kernel's page cache holds now
/// (`cachestat`, which reads nothing and starts no I/O).
pub fn cached_pages(fd: RawFd, off: u64, len: u64) -> io::Result<u64> {
    let range = CachestatRange { off, len };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat reads one range and writes one cachestat struct,
    // both alive for the call.
    let rc = unsafe { libc::syscall(SYS_CACHESTAT, fd, &range, &mut stat, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.nr_cache)
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
