//! The userfaultfd ABI (`linux/userfaultfd.h`, which the `libc` crate does
//! not carry; the layouts are checked against the kernel's sizes by the
//! `_IOWR` numbers they are encoded into), the ioctls on one, and waiting
//! for its events.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{check, PAGE};

mod fork;
pub use fork::*;

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
/// `UFFD_FEATURE_MOVE`: `UFFDIO_MOVE` (Linux 6.8).
pub const FEATURE_MOVE: u64 = 1 << 16;

/// Fault flag: the access was a write.
pub const FLAG_WRITE: u64 = 1 << 0;

/// Fault flag: a write-protect fault.
pub const FLAG_WP: u64 = 1 << 1;

/// Fault flag: a minor fault (the page was in the memfd when it was raised).
pub const FLAG_MINOR: u64 = 1 << 2;

const EVENT_PAGEFAULT: u8 = 0x12;

const CONTINUE_MODE_WP: u64 = 1 << 1;
/// `UFFDIO_CONTINUE_MODE_DONTWAKE` and `UFFDIO_COPY_MODE_DONTWAKE`.
const MODE_DONTWAKE: u64 = 1 << 0;

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

/// How a userfaultfd was obtained: the three ways Linux offers, best first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UffdAccess {
    /// `userfaultfd(2)` with every feature: root, `CAP_SYS_PTRACE`, or
    /// everyone where `vm.unprivileged_userfaultfd = 1`.
    #[default]
    Syscall,
    /// `/dev/userfaultfd` (`USERFAULTFD_IOC_NEW`), every feature: whoever
    /// may open the device.
    Device,
    /// `userfaultfd(2)` with `UFFD_USER_MODE_ONLY`, allowed to every user:
    /// faults from user space are served as usual, but the kernel's own
    /// accesses to a page not mapped yet fail with `EFAULT` (a `read(2)`
    /// into such a page), as in faulting-thread service.
    UserModeOnly,
}

/// Why no userfaultfd could be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Every way in was refused.
    #[error(
        "this user may not use userfaultfd: \
         userfaultfd(2): {syscall} (allowed to root, to holders of CAP_SYS_PTRACE, \
         or to every user with `sysctl -w vm.unprivileged_userfaultfd=1`); \
         /dev/userfaultfd: {device} (an administrator can grant it to a group: \
         `chgrp pagepilot /dev/userfaultfd && chmod 660 /dev/userfaultfd`, \
         kept across boots by packaging/99-pagepilot-userfaultfd.rules); \
         userfaultfd(2) in user mode only: {user_mode} (a seccomp filter, as \
         containers have by default, blocks the system call: allow userfaultfd \
         in the container's profile)"
    )]
    Denied {
        /// What `userfaultfd(2)` answered.
        syscall: io::Error,
        /// What opening `/dev/userfaultfd` answered.
        device: io::Error,
        /// What `userfaultfd(2)` with `UFFD_USER_MODE_ONLY` answered.
        user_mode: io::Error,
    },
    /// The API handshake (`UFFDIO_API`) failed.
    #[error("UFFDIO_API failed: {0}")]
    Api(io::Error),
}

/// `UFFD_USER_MODE_ONLY`, a flag of `userfaultfd(2)`.
const UFFD_USER_MODE_ONLY: libc::c_int = 1;

/// A new userfaultfd, the best way this process may.
fn create() -> Result<(OwnedFd, UffdAccess), OpenError> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    let syscall = |flags: libc::c_int| {
        // SAFETY: userfaultfd takes one integer argument and returns a new
        // descriptor or -1.
        let raw = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as libc::c_int;
        // SAFETY: a descriptor the call just created, which nothing else owns.
        check(raw).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let syscall_error = match syscall(flags) {
        Ok(fd) => return Ok((fd, UffdAccess::Syscall)),
        Err(e) => e,
    };
    let device = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/userfaultfd")
        .and_then(|dev| {
            // SAFETY: USERFAULTFD_IOC_NEW takes the open flags by value and
            // returns a new descriptor or -1.
            check(unsafe { libc::ioctl(dev.as_raw_fd(), USERFAULTFD_IOC_NEW as _, flags) })
                // SAFETY: a descriptor the ioctl just created, which nothing else owns.
                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        });
    let device_error = match device {
        Ok(fd) => return Ok((fd, UffdAccess::Device)),
        Err(e) => e,
    };
    match syscall(flags | UFFD_USER_MODE_ONLY) {
        Ok(fd) => Ok((fd, UffdAccess::UserModeOnly)),
        Err(user_mode) => Err(OpenError::Denied {
            syscall: syscall_error,
            device: device_error,
            user_mode,
        }),
    }
}

/// An open userfaultfd with the API handshake done.
pub struct Uffd {
    fd: OwnedFd,
}

impl Uffd {
    /// Opens a non-blocking userfaultfd asking for `features`, the best way
    /// this process may (`UffdAccess`, best first); returns the features
    /// the kernel granted and the way taken.
    pub fn open(features: u64) -> Result<(Uffd, u64, UffdAccess), OpenError> {
        let (fd, access) = create()?;
        let mut api = UffdioApi {
            api: UFFD_API,
            features,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes one `UffdioApi`, which outlives the call.
        check(unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API as _, &mut api) })
            .map_err(OpenError::Api)?;
        Ok((Uffd { fd }, api.features, access))
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
        self.continue_waking(start, len, wp, true)
    }

    /// [`Uffd::continue_range`], waking the threads faulting there only if
    /// `wake`.
    pub fn continue_waking(
        &self,
        start: usize,
        len: usize,
        wp: bool,
        wake: bool,
    ) -> io::Result<()> {
        let mut c = UffdioContinue {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: if wp { CONTINUE_MODE_WP } else { 0 } | if wake { 0 } else { MODE_DONTWAKE },
            mapped: 0,
        };
        // SAFETY: UFFDIO_CONTINUE reads and writes one `UffdioContinue` that outlives the call.
        check(unsafe { libc::ioctl(self.raw(), UFFDIO_CONTINUE as _, &mut c) })?;
        Ok(())
    }

    /// Copies `len` bytes from `src` into the absent pages at `dst` and maps
    /// them (write-protected if `wp`) in one call, without waking the
    /// threads faulting there (their faults are served, and they woken, by
    /// the handlers their events reach): for a shmem range, the frames are
    /// allocated by the copy, never cleared first. On an error, the bytes
    /// copied before it (whole pages) and the error.
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes.
    pub unsafe fn copy_range(
        &self,
        dst: usize,
        src: *const u8,
        len: usize,
        wp: bool,
    ) -> Result<(), (usize, io::Error)> {
        let mode = if wp { COPY_MODE_WP } else { 0 } | MODE_DONTWAKE;
        let mut done = 0;
        while done < len {
            // SAFETY: `src + done` is readable for `len - done` bytes (the
            // caller's guarantee).
            let (copied, result) =
                unsafe { self.copy_once(dst + done, src.add(done), len - done, mode) };
            let Err(err) = result else {
                return Ok(());
            };
            // A partial copy (`EAGAIN`: the address space changed under it)
            // goes on from where it stopped.
            if copied > 0 && err.raw_os_error() == Some(libc::EAGAIN) {
                done += copied;
                continue;
            }
            return Err((done + copied, err));
        }
        Ok(())
    }

    /// One `UFFDIO_COPY` of `len` bytes from `src` to `dst` with `mode`:
    /// the bytes it copied, and its outcome.
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes.
    unsafe fn copy_once(
        &self,
        dst: usize,
        src: *const u8,
        len: usize,
        mode: u64,
    ) -> (usize, io::Result<()>) {
        let mut c = UffdioCopy {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode,
            copy: 0,
        };
        // SAFETY: UFFDIO_COPY reads one `UffdioCopy` and `len` bytes from
        // `src` (readable: the caller's guarantee), and writes the `copy`
        // field; all outlive the call.
        let result =
            check(unsafe { libc::ioctl(self.raw(), UFFDIO_COPY as _, &mut c) }).map(|_| ());
        (usize::try_from(c.copy).unwrap_or(0), result)
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
            let mode = if wp { COPY_MODE_WP } else { 0 };
            // SAFETY: `n` <= ZERO_CHUNK pages of the static zero buffer.
            unsafe { self.copy_once(dst + off, ZEROS.0.as_ptr(), n, mode) }.1?;
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

/// An epoll instance waiting on a userfaultfd and on a stop eventfd. Of
/// several handlers waiting on the same userfaultfd exclusively, one is
/// woken per event (the first registered that is idle); otherwise all are.
pub struct Waiter {
    ep: OwnedFd,
    uffd: RawFd,
}

impl Waiter {
    /// Waits on `uffd` (an exclusive wake-up if `exclusive`) and `stop`.
    pub fn new(uffd: RawFd, stop: RawFd, exclusive: bool) -> io::Result<Waiter> {
        let exclusive = if exclusive { libc::EPOLLEXCLUSIVE } else { 0 };
        // SAFETY: epoll_create1 takes a flag and returns a new fd or -1.
        let raw = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `raw` is freshly created and owned by nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(raw) };
        for (fd, extra) in [(uffd, exclusive), (stop, 0)] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_refused_userfaultfd_names_each_way_in_and_how_to_enable_it() {
        let denied = |e| io::Error::from_raw_os_error(e);
        let text = OpenError::Denied {
            syscall: denied(libc::EPERM),
            device: denied(libc::EACCES),
            user_mode: denied(libc::ENOSYS),
        }
        .to_string();
        for part in [
            "userfaultfd(2): Operation not permitted",
            "vm.unprivileged_userfaultfd=1",
            "CAP_SYS_PTRACE",
            "/dev/userfaultfd: Permission denied",
            "chmod 660 /dev/userfaultfd",
            "user mode only",
            "seccomp",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
    }
}
