//! Every raw system call and ioctl the pager makes: userfaultfd, memfd,
//! fallocate, madvise, mmap and positioned I/O. Nothing else in the crate
//! calls `libc` directly, and the benchmarks (`pagepilot bench`) use these
//! too (plus the few page-cache and resource-usage calls at the end), so the
//! workspace keeps its raw calls in this one module.
//!
//! The userfaultfd ABI (`linux/userfaultfd.h`) is defined here because the
//! `libc` crate does not carry it; the layouts below are checked against the
//! kernel's sizes by the `_IOWR` numbers they are encoded into.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The page size this pager works in.
pub const PAGE: usize = 4096;

const UFFD_API: u64 = 0xAA;
const UFFDIO: u64 = 0xAA;

const fn iowr(nr: u64, size: usize) -> u64 {
    (3 << 30) | ((size as u64) << 16) | (UFFDIO << 8) | nr
}
const fn ior(nr: u64, size: usize) -> u64 {
    (2 << 30) | ((size as u64) << 16) | (UFFDIO << 8) | nr
}

#[repr(C)]
#[derive(Default)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioContinue {
    range: UffdioRange,
    mode: u64,
    mapped: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioPoison {
    range: UffdioRange,
    mode: u64,
    updated: i64,
}

/// `struct uffdio_zeropage`.
#[repr(C)]
struct UffdioZeropage {
    range: UffdioRange,
    mode: u64,
    zeropage: i64,
}

const UFFDIO_API: u64 = iowr(0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: u64 = iowr(0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_WAKE: u64 = ior(0x02, std::mem::size_of::<UffdioRange>());
const UFFDIO_WRITEPROTECT: u64 = iowr(0x06, std::mem::size_of::<UffdioWriteprotect>());
const UFFDIO_CONTINUE: u64 = iowr(0x07, std::mem::size_of::<UffdioContinue>());
const UFFDIO_COPY: u64 = iowr(0x03, std::mem::size_of::<UffdioCopy>());
const UFFDIO_POISON: u64 = iowr(0x08, std::mem::size_of::<UffdioPoison>());
const UFFDIO_ZEROPAGE: u64 = iowr(0x04, std::mem::size_of::<UffdioZeropage>());
const USERFAULTFD_IOC_NEW: u64 = 0xAA00;

/// Register mode: faults on pages absent from the page cache.
pub const MODE_MISSING: u64 = 1 << 0;
/// Register mode: write-protect faults.
pub const MODE_WP: u64 = 1 << 1;
/// Register mode: faults on pages present in the page cache but not mapped.
pub const MODE_MINOR: u64 = 1 << 2;

/// Feature: missing faults on shmem (memfd) mappings.
pub const FEATURE_MISSING_SHMEM: u64 = 1 << 5;
/// Feature: minor faults on shmem (memfd) mappings.
pub const FEATURE_MINOR_SHMEM: u64 = 1 << 10;
/// Feature: write-protect on shmem mappings.
pub const FEATURE_WP_SHMEM: u64 = 1 << 12;
/// Feature: faults raise SIGBUS in the faulting thread instead of an event.
pub const FEATURE_SIGBUS: u64 = 1 << 7;
/// Feature: poisoned ranges (an access raises SIGBUS).
pub const FEATURE_POISON: u64 = 1 << 14;

/// Fault flag: the access was a write.
pub const FLAG_WRITE: u64 = 1 << 0;
/// Fault flag: a write-protect fault.
pub const FLAG_WP: u64 = 1 << 1;
/// Fault flag: a minor fault (the page was in the memfd when it was raised).
pub const FLAG_MINOR: u64 = 1 << 2;

const EVENT_PAGEFAULT: u8 = 0x12;
const CONTINUE_MODE_WP: u64 = 1 << 1;
const COPY_MODE_WP: u64 = 1 << 1;
const WRITEPROTECT_MODE_WP: u64 = 1 << 0;
/// Pages of the static zero buffer write-protected zero pages are copied
/// from (64 KiB): [`Uffd::zero_range`] copies that many per call.
pub const ZERO_CHUNK: usize = 16;

/// One userfaultfd message (`struct uffd_msg`, 32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct UffdMsg {
    event: u8,
    _r1: u8,
    _r2: u16,
    _r3: u32,
    flags: u64,
    address: u64,
    _feat: u64,
}

impl UffdMsg {
    /// The faulting address and flags, if this is a page fault.
    pub fn pagefault(&self) -> Option<(usize, u64)> {
        (self.event == EVENT_PAGEFAULT).then_some((self.address as usize, self.flags))
    }
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// An open userfaultfd with the API handshake done.
pub struct Uffd {
    fd: OwnedFd,
}

impl Uffd {
    /// Opens a non-blocking userfaultfd asking for `features`; returns the
    /// features the kernel granted. Tries the syscall, then `/dev/userfaultfd`.
    pub fn open(features: u64) -> io::Result<(Uffd, u64)> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: userfaultfd takes one integer argument and returns a new fd or -1.
        let mut raw = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as libc::c_int;
        if raw < 0 {
            let dev = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/userfaultfd")?;
            // SAFETY: USERFAULTFD_IOC_NEW takes the open flags by value and returns a new fd.
            raw = check(unsafe { libc::ioctl(dev.as_raw_fd(), USERFAULTFD_IOC_NEW as _, flags) })?;
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes one `UffdioApi`, which outlives the call.
        check(unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API as _, &mut api) })?;
        Ok((Uffd { fd }, api.features))
    }

    /// Makes reads block until a message arrives (one handler thread reads
    /// without a poll: one system call less per fault).
    pub fn set_blocking(&self) -> io::Result<()> {
        // SAFETY: F_GETFL/F_SETFL on a descriptor this object owns.
        unsafe {
            let fl = check(libc::fcntl(self.raw(), libc::F_GETFL))?;
            check(libc::fcntl(
                self.raw(),
                libc::F_SETFL,
                fl & !libc::O_NONBLOCK,
            ))?;
        }
        Ok(())
    }

    /// The raw descriptor (for poll).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Registers `[start, start+len)` with `mode`; returns the ioctls allowed there.
    pub fn register(&self, start: usize, len: usize, mode: u64) -> io::Result<u64> {
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads and writes one `UffdioRegister` that outlives the call.
        check(unsafe { libc::ioctl(self.raw(), UFFDIO_REGISTER as _, &mut reg) })?;
        Ok(reg.ioctls)
    }

    /// Maps the page-cache pages of `[start, start+len)` into the registered
    /// range, write-protected if `wp`, and wakes the threads faulting there.
    /// Returns `EEXIST` if a page was already mapped.
    pub fn continue_range(&self, start: usize, len: usize, wp: bool) -> io::Result<()> {
        let mut c = UffdioContinue {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: if wp { CONTINUE_MODE_WP } else { 0 },
            mapped: 0,
        };
        // SAFETY: UFFDIO_CONTINUE reads and writes one `UffdioContinue` that outlives the call.
        check(unsafe { libc::ioctl(self.raw(), UFFDIO_CONTINUE as _, &mut c) })?;
        Ok(())
    }

    /// Fills the absent page at `dst` with zeros and maps it (write-protected
    /// if `wp`) in one call, waking the threads faulting there.
    pub fn zero_page(&self, dst: usize, wp: bool) -> io::Result<()> {
        self.zero_range(dst, PAGE, wp)
    }

    /// Fills the absent pages of `[dst, dst+len)` with zeros and maps them
    /// (write-protected if `wp`), waking the threads faulting there: one call
    /// for the whole range when writable, one per [`ZERO_CHUNK`] pages when
    /// write-protected. A writable page is allocated zeroed by the kernel
    /// (UFFDIO_ZEROPAGE: no 4 KiB copy, measured ~0.2 us faster); a
    /// write-protected one is copied from a static zero buffer (UFFDIO_ZEROPAGE
    /// has no WP mode, and protecting after mapping would leave a window where
    /// another thread's write is not seen). On an error some pages of the
    /// range may be mapped already (`EEXIST` for a page that was).
    pub fn zero_range(&self, dst: usize, len: usize, wp: bool) -> io::Result<()> {
        if !wp {
            let mut z = UffdioZeropage {
                range: UffdioRange {
                    start: dst as u64,
                    len: len as u64,
                },
                mode: 0,
                zeropage: 0,
            };
            // SAFETY: UFFDIO_ZEROPAGE reads and writes one `UffdioZeropage` that outlives the call.
            if unsafe { libc::ioctl(self.raw(), UFFDIO_ZEROPAGE as _, &mut z) } == 0 {
                return Ok(());
            }
            if z.zeropage > 0 {
                // Part of the range is mapped: a copy would fail there too.
                return Err(io::Error::last_os_error());
            }
        }
        #[repr(C, align(4096))]
        struct Zeros([u8; ZERO_CHUNK * PAGE]);
        static ZEROS: Zeros = Zeros([0; ZERO_CHUNK * PAGE]);
        let mut off = 0;
        while off < len {
            let n = (len - off).min(ZERO_CHUNK * PAGE);
            let mut c = UffdioCopy {
                dst: (dst + off) as u64,
                src: ZEROS.0.as_ptr() as u64,
                len: n as u64,
                mode: if wp { COPY_MODE_WP } else { 0 },
                copy: 0,
            };
            // SAFETY: UFFDIO_COPY reads one `UffdioCopy` and `n` <= ZERO_CHUNK
            // pages of the static zero buffer, and writes the `copy` field;
            // all outlive the call.
            check(unsafe { libc::ioctl(self.raw(), UFFDIO_COPY as _, &mut c) })?;
            off += n;
        }
        Ok(())
    }

    /// Write-protects (`wp`) or un-protects (and wakes) `[start, start+len)`.
    pub fn writeprotect(&self, start: usize, len: usize, wp: bool) -> io::Result<()> {
        let mut w = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: if wp { WRITEPROTECT_MODE_WP } else { 0 },
        };
        // SAFETY: UFFDIO_WRITEPROTECT reads one `UffdioWriteprotect` that outlives the call.
        check(unsafe { libc::ioctl(self.raw(), UFFDIO_WRITEPROTECT as _, &mut w) })?;
        Ok(())
    }

    /// Wakes the threads faulting in `[start, start+len)` so they retry.
    pub fn wake(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_WAKE reads one `UffdioRange` that outlives the call.
        check(unsafe { libc::ioctl(self.raw(), UFFDIO_WAKE as _, &mut r) })?;
        Ok(())
    }

    /// Poisons `[start, start+len)`: the faulting threads get SIGBUS instead
    /// of data the pager could not read.
    pub fn poison(&self, start: usize, len: usize) -> io::Result<()> {
        let mut p = UffdioPoison {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: 0,
            updated: 0,
        };
        // SAFETY: UFFDIO_POISON reads and writes one `UffdioPoison` that outlives the call.
        check(unsafe { libc::ioctl(self.raw(), UFFDIO_POISON as _, &mut p) })?;
        Ok(())
    }

    /// Waits up to `timeout_ms` for a message to be readable; `false` on timeout or
    /// interruption by a signal.
    pub fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd that outlives the call.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(n > 0)
    }

    /// Reads pending messages into `buf` without blocking; returns how many.
    pub fn read_msgs(&self, buf: &mut [UffdMsg]) -> io::Result<usize> {
        let bytes = std::mem::size_of_val(buf);
        // SAFETY: `buf` is valid for `bytes` bytes of writes and `UffdMsg` is plain data.
        let n = unsafe { libc::read(self.raw(), buf.as_mut_ptr().cast(), bytes) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize / std::mem::size_of::<UffdMsg>())
    }
}

/// An epoll instance waiting on a userfaultfd (exclusively: of several
/// handlers waiting on the same userfaultfd, one is woken per event, not all)
/// and on a stop eventfd.
pub struct Waiter {
    ep: OwnedFd,
    uffd: RawFd,
}

impl Waiter {
    /// Waits on `uffd` (exclusive wake-up) and `stop`.
    pub fn new(uffd: RawFd, stop: RawFd) -> io::Result<Waiter> {
        // SAFETY: epoll_create1 takes a flag and returns a new fd or -1.
        let raw = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `raw` is freshly created and owned by nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(raw) };
        for (fd, extra) in [(uffd, libc::EPOLLEXCLUSIVE), (stop, 0)] {
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | extra) as u32,
                u64: fd as u64,
            };
            // SAFETY: `ev` is a valid epoll_event for the call; both fds are open.
            check(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        }
        Ok(Waiter { ep, uffd })
    }

    /// Blocks until the userfaultfd or the stop fd is readable: (fault, stop).
    pub fn wait(&self) -> io::Result<(bool, bool)> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 2];
        // SAFETY: `evs` has room for the 2 events asked for.
        let n = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), evs.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok((false, false));
            }
            return Err(e);
        }
        let mut out = (false, false);
        for ev in &evs[..n as usize] {
            let fd = ev.u64 as RawFd;
            if fd == self.uffd {
                out.0 = true;
            } else {
                out.1 = true;
            }
        }
        Ok(out)
    }
}

/// A new eventfd (used to stop handler threads).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes two integers and returns a new fd or -1.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` is freshly created and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Signals an eventfd.
pub fn eventfd_signal(fd: RawFd) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    let n = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A sealed-size memfd of `len` bytes: the region's frames.
pub fn memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: `cname` is a valid NUL-terminated string for the call.
    let raw = check(unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: `raw` is freshly created and owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ftruncate on a descriptor we own.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) })?;
    Ok(fd)
}

/// Maps `len` bytes of `fd` shared; `write` decides PROT_WRITE.
pub fn map_shared(fd: RawFd, len: usize, write: bool) -> io::Result<usize> {
    let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
    // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust object.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// One page of private anonymous memory (a handler's doorbell).
pub fn map_anon_page() -> io::Result<usize> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust object.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// Unmaps a mapping made by [`map_shared`].
///
/// # Safety
/// `[addr, addr+len)` must be a mapping this crate made and nothing may use it afterwards.
pub unsafe fn unmap(addr: usize, len: usize) {
    // SAFETY: the caller guarantees the range is ours and unused from now on.
    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
}

/// Zaps the PTEs of `[addr, addr+len)` (MADV_DONTNEED). On a shared memfd
/// mapping the pages stay in the memfd; the next access faults again.
pub fn zap(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: MADV_DONTNEED on a shared file mapping drops PTEs only; no data is lost
    // and no Rust reference points into the region.
    check(unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) })?;
    Ok(())
}

/// Frees the memfd's frames in `[off, off+len)` and unmaps them everywhere.
pub fn punch_hole(fd: RawFd, off: usize, len: usize) -> io::Result<()> {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate on a descriptor we own; no memory is passed.
    restarting(|| unsafe { libc::fallocate(fd, mode, off as libc::off_t, len as libc::off_t) })?;
    Ok(())
}

/// Runs a system call again while a signal interrupts it (EINTR): the
/// application's signals (a timer) reach the threads that serve faults in
/// the faulting-thread service.
fn restarting(mut call: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
    loop {
        match check(call()) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Bytes of `fd` actually allocated (st_blocks * 512).
pub fn allocated_bytes(fd: RawFd) -> io::Result<u64> {
    // SAFETY: an all-zero stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat struct we own.
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st.st_blocks as u64 * 512)
}

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

/// Tells the kernel `[addr, addr+len)` is read at random (MADV_RANDOM: no read-around).
pub fn advise_random(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the advice changes no contents and no Rust reference's validity.
    check(unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_RANDOM) })?;
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

/// The signature of a SA_SIGINFO handler.
pub type SigHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for SIGBUS (SA_SIGINFO | SA_NODEFER); returns the previous action.
pub fn install_sigbus(handler: SigHandler) -> io::Result<libc::sigaction> {
    // SAFETY: all-zero sigaction structs are valid; sigaction reads `new` and
    // writes `old`, both live for the call.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        check(libc::sigaction(libc::SIGBUS, &new, &mut old))?;
        Ok(old)
    }
}

/// Restores a SIGBUS action saved by [`install_sigbus`].
pub fn restore_sigbus(old: &libc::sigaction) {
    // SAFETY: `old` is a valid sigaction returned by the kernel.
    unsafe { libc::sigaction(libc::SIGBUS, old, std::ptr::null_mut()) };
}

/// The faulting address and whether the access was a write (x86-64: bit 1 of
/// the page-fault error code; elsewhere unknown, reported as a read).
///
/// # Safety
/// `info` and `ctx` must be the arguments of a SA_SIGINFO handler invocation.
pub unsafe fn fault_of(info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> (usize, bool) {
    // SAFETY: the kernel passes a valid siginfo for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    #[cfg(target_arch = "x86_64")]
    let write = {
        let uc = ctx as *const libc::ucontext_t;
        // SAFETY: the kernel passes a valid ucontext for SA_SIGINFO handlers.
        unsafe { (*uc).uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0 }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let write = {
        let _ = ctx;
        false
    };
    (addr, write)
}

/// A shared mapping of a file or memfd ([`map_shared`]), unmapped on drop.
pub struct Mapping {
    addr: usize,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; users read it concurrently or write disjoint
// bytes through raw pointers.
unsafe impl Send for Mapping {}
// SAFETY: as above: no interior state besides the memory itself.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from offset 0, `MAP_SHARED`, readable and optionally writable.
    pub fn shared(fd: RawFd, len: usize, writable: bool) -> io::Result<Mapping> {
        let addr = map_shared(fd, len, writable)?;
        Ok(Mapping { addr, len })
    }

    /// `len` bytes of private anonymous memory (read-write), unmapped on drop.
    pub fn private_anon(len: usize) -> io::Result<Mapping> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust object.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: p as usize,
            len,
        })
    }

    /// First byte of the mapping (valid until the Mapping is dropped).
    pub fn ptr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (it never is: `mmap` refuses length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Allocates (zeroed, if new) the pages of `[off, off+len)` of the mapping without
    /// touching them from user space ([`populate`]).
    pub fn populate_write(&self, off: usize, len: usize) -> io::Result<()> {
        if off.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        populate(self.addr + off, len)
    }

    /// Tells the kernel the mapping is read at random ([`advise_random`]).
    pub fn advise_random(&self) -> io::Result<()> {
        advise_random(self.addr, self.len)
    }

    /// Zaps the page table entries of the whole mapping ([`zap`]); shared pages stay in the
    /// page cache, so the next access is a minor fault.
    pub fn dontneed(&self) -> io::Result<()> {
        zap(self.addr, self.len)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: addr/len came from a successful mmap and are unmapped once; pointers from
        // `ptr()` are documented to die with the Mapping.
        unsafe { unmap(self.addr, self.len) };
    }
}

/// Writes back dirty pages and drops the whole page cache (`sync; echo 3 > drop_caches`;
/// needs root).
pub fn drop_page_cache() -> io::Result<()> {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
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

/// Major and minor faults of the whole process so far (`getrusage`).
pub fn faults_self() -> (u64, u64) {
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_majflt as u64, ru.ru_minflt as u64)
}

/// CPU time of this thread, ns: unlike wall time it excludes the time the
/// thread waits for a core, which on a shared 2-core machine is most noise.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This thread's CPU affinity, to put back with [`set_affinity`].
pub fn affinity() -> io::Result<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is an empty set; the kernel writes at
    // most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        check(libc::sched_getaffinity(
            0,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ))?;
        Ok(set)
    }
}

/// Sets this thread's CPU affinity.
pub fn set_affinity(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) })?;
    Ok(())
}

/// Pins this thread to the CPU it runs on now. Threads it creates afterwards
/// inherit the affinity (a region's handler thread, for example).
pub fn pin_to_current_cpu() -> io::Result<()> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET writes inside it
    // for any cpu below CPU_SETSIZE, which sched_getcpu's answer is.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        set
    };
    set_affinity(&set)
}

/// Leaves `[addr, addr+len)` out of a child's copy of the address space
/// (MADV_DONTFORK): the range is unmapped in the child.
pub fn dont_fork(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the advice only changes what fork copies, never this process's memory.
    check(unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTFORK) })?;
    Ok(())
}

/// Maps `len` bytes of `fd` from offset 0 shared at exactly `addr`
/// (MAP_FIXED), replacing whatever is there.
///
/// # Safety
/// `[addr, addr+len)` must be a range nothing else in the process uses.
pub unsafe fn map_shared_at(addr: usize, fd: RawFd, len: usize, write: bool) -> io::Result<()> {
    let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
    let flags = libc::MAP_SHARED | libc::MAP_FIXED;
    // SAFETY: the caller guarantees the range is ours to replace.
    let p = unsafe { libc::mmap(addr as *mut libc::c_void, len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes the dirty pages of a shared file mapping back (msync MS_SYNC).
pub fn msync(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: msync reads the mapping's page-cache state; no memory is written.
    check(unsafe { libc::msync(addr as *mut libc::c_void, len, libc::MS_SYNC) })?;
    Ok(())
}

/// Blocks every asynchronous signal in the calling thread, so that the
/// application's signals (a timer, a Ctrl-C) go to its own threads and never
/// interrupt a pager thread; faults' signals (SIGBUS, SIGSEGV, ...) stay open.
pub fn block_async_signals() {
    // SAFETY: sigset_t is plain data set up by sigfillset/sigdelset before
    // use; pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for sig in [
            libc::SIGBUS,
            libc::SIGSEGV,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
            libc::SIGABRT,
        ] {
            libc::sigdelset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Runs `f` when the process exits normally (`atexit`).
pub fn at_exit(f: extern "C" fn()) -> io::Result<()> {
    // SAFETY: registers a function with no arguments; it lives for the program.
    if unsafe { libc::atexit(f) } != 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOMEM));
    }
    Ok(())
}

/// Runs `prepare` in the forking thread before `fork`, `parent` in the parent
/// and `child` in the child after it (`pthread_atfork`).
pub fn at_fork(
    prepare: unsafe extern "C" fn(),
    parent: unsafe extern "C" fn(),
    child: unsafe extern "C" fn(),
) -> io::Result<()> {
    // SAFETY: registers three functions with no arguments that live for the program.
    let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Whether a SIGBUS was raised by userfaultfd for a missing page
/// (`BUS_ADRERR`), not by a poisoned page or anything else.
///
/// # Safety
/// `info` must be the siginfo of a SIGBUS handler invocation.
pub unsafe fn is_userfault(info: *const libc::siginfo_t) -> bool {
    // SAFETY: the kernel passes a valid siginfo.
    unsafe { (*info).si_code == libc::BUS_ADRERR }
}

/// Makes `[addr, addr+len)` inaccessible (PROT_NONE): any access raises SIGSEGV.
pub fn protect_none(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: only the protection of a mapping this crate made changes; no
    // Rust reference points into region memory.
    check(unsafe { libc::mprotect(addr as *mut libc::c_void, len, libc::PROT_NONE) })?;
    Ok(())
}

/// Forks a child that exits at once (`_exit(0)`, no exit handler) and
/// waits for it: the cost of a `fork` to the process that makes it, as
/// `pagepilot bench fork` measures it.
pub fn fork_and_reap() -> io::Result<()> {
    // SAFETY: the child calls only `_exit`, which is async-signal-safe.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    restarting(|| unsafe { libc::waitpid(pid, &mut status, 0) })?;
    Ok(())
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
