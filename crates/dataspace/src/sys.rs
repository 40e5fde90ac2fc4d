//! Every raw system call the page stores make: opens with O_DIRECT (or
//! O_TMPFILE), positioned reads and writes that finish what they start, the
//! page cache's occupancy (`cachestat`), populating a mapping with zero
//! frames, `copy_file_range`, and `splice` through a pipe of each thread's. Nothing else in the crate calls `libc`
//! for a system call; the pager's own `sys` re-exports these instead of
//! making them again.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

/// The page size page stores are addressed in.
pub const PAGE: usize = 4096;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens `path` for direct I/O. Falls back to buffered I/O where the file
/// system refuses O_DIRECT; the second value says which one it got.
pub fn open_direct(path: &Path, write: bool, create: bool) -> io::Result<(std::fs::File, bool)> {
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
pub fn tmpfile_direct(dir: &Path) -> io::Result<(std::fs::File, bool)> {
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

/// A pipe of this thread's for [`splice_range`], as large as the kernel
/// lets it be (1 MiB asked: fewer round trips through it per call).
struct Pipe {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
    /// Bytes it holds at most.
    capacity: usize,
    /// The process that made it: a child after `fork` inherits the
    /// thread's pipe, and the two processes must not share it (one could
    /// take the other's bytes, and the other then wait for them forever).
    owner: u32,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 returns.
        check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
        // SAFETY: both descriptors were just made and are owned by nobody else.
        let (read, write) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        // SAFETY: fcntl on a descriptor we own; a refusal leaves the default size.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        let size = if size > 0 {
            size
        } else {
            // SAFETY: fcntl on a descriptor we own; no memory is passed.
            unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) }
        };
        Ok(Pipe {
            read,
            write,
            capacity: check(size)? as usize,
            owner: std::process::id(),
        })
    }
}

thread_local! {
    static PIPE: std::cell::RefCell<Option<Pipe>> = const { std::cell::RefCell::new(None) };
}

/// Moves up to `len` bytes at `src_off` of `src` to `dst_off` of `dst`
/// through this thread's pipe (`splice` in, `splice` out): from the page
/// cache straight into `dst`'s pages, no user-space buffer and, for a shmem
/// `dst`, no clearing of its new pages first. Returns the bytes moved (less
/// than `len` only at the end of `src`). A call that fails leaves the pipe
/// to be made again, never holding another call's bytes.
pub fn splice_range(
    src: RawFd,
    src_off: u64,
    dst: RawFd,
    dst_off: u64,
    len: usize,
) -> io::Result<usize> {
    PIPE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|p| p.owner != std::process::id()) {
            *slot = Some(Pipe::new()?);
        }
        let pipe = slot.as_ref().expect("made above");
        let (mut at, mut to) = (src_off as i64, dst_off as i64);
        let mut moved = || -> io::Result<usize> {
            let mut done = 0;
            while done < len {
                let want = (len - done).min(pipe.capacity);
                let k = splice(src, Some(&mut at), pipe.write.as_raw_fd(), None, want)?;
                if k == 0 {
                    break;
                }
                let mut out = 0;
                while out < k {
                    let w = splice(pipe.read.as_raw_fd(), None, dst, Some(&mut to), k - out)?;
                    if w == 0 {
                        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                    }
                    out += w;
                }
                done += k;
            }
            Ok(done)
        };
        let moved = moved();
        if moved.is_err() {
            *slot = None;
        }
        moved
    })
}

/// One `splice(2)` of up to `n` bytes, retried when interrupted; `None`
/// offsets for a pipe's end.
fn splice(
    from: RawFd,
    from_off: Option<&mut i64>,
    to: RawFd,
    to_off: Option<&mut i64>,
    n: usize,
) -> io::Result<usize> {
    let (fp, tp) = (
        from_off.map_or(std::ptr::null_mut(), |o| o as *mut i64),
        to_off.map_or(std::ptr::null_mut(), |o| o as *mut i64),
    );
    loop {
        // SAFETY: the offsets are live locals of the caller (or null for a
        // pipe's end); the descriptors are open for the call.
        let k = unsafe { libc::splice(from, fp, to, tp, n, libc::SPLICE_F_MOVE) };
        if k >= 0 {
            return Ok(k as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Copies all `len` bytes of `from` into `to` (both from offset 0) with
/// `copy_file_range`: in the kernel, shared extents where the file system
/// can (a reflink), no user-space buffer.
pub fn copy_range(from: &std::fs::File, to: &std::fs::File, len: u64) -> io::Result<()> {
    let (mut src, mut dst) = (0i64, 0i64);
    while (src as u64) < len {
        let want = (len - src as u64).min(1 << 30) as usize;
        // SAFETY: both offsets are live locals the call updates; the
        // descriptors are open for the call.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut src,
                to.as_raw_fd(),
                &mut dst,
                want,
                0,
            )
        };
        match n {
            n if n < 0 => match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::Interrupted => continue,
                e => return Err(e),
            },
            0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            _ => {}
        }
    }
    Ok(())
}

/// Allocates the frames behind `[addr, addr+len)` of a shared mapping
/// (MADV_POPULATE_WRITE): zero pages for a memfd hole.
pub fn populate(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: populating a shared memfd mapping allocates zeroed frames in
    // holes and leaves existing data untouched.
    check(unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) })?;
    Ok(())
}

/// The `read_ahead_kb` of the block device holding `path` (its disk's, for
/// a partition): how much the kernel reads around a fault on a mapping of
/// it. `None` where there is no such device (tmpfs) or it cannot be read.
pub fn device_readahead_kb(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let dir = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    ["queue/read_ahead_kb", "../queue/read_ahead_kb"]
        .iter()
        .find_map(|f| std::fs::read_to_string(Path::new(&dir).join(f)).ok())
        .and_then(|s| s.trim().parse().ok())
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

/// Locks `file` for this open file description with `flock`, shared or
/// exclusive, without waiting: `Ok(false)` if another holds a conflicting
/// lock. Released when the descriptor is closed (also when the process
/// dies).
pub fn try_flock(file: &std::fs::File, exclusive: bool) -> io::Result<bool> {
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    loop {
        // SAFETY: flock on a descriptor `file` keeps open for the call; no
        // memory is passed.
        let r = unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) };
        if r == 0 {
            return Ok(true);
        }
        match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::EWOULDBLOCK) => return Ok(false),
            e if e.kind() == io::ErrorKind::Interrupted => continue,
            e => return Err(e),
        }
    }
}
