//! Raw system calls the benchmarks need, kept in one place: mappings, page-cache control,
//! resource usage, memfd and the few userfaultfd ioctls of the fault probe.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Size of a page on these machines (x86-64).
pub const PAGE: usize = 4096;

/// A shared mapping of a file or memfd, unmapped on drop.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the benchmarks only read it concurrently or
// write disjoint bytes through raw pointers.
unsafe impl Send for Mapping {}
// SAFETY: as above: no interior state besides the memory itself.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from offset 0, `MAP_SHARED`, readable and optionally writable.
    pub fn shared(fd: RawFd, len: usize, writable: bool) -> io::Result<Mapping> {
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) aliases no Rust object.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// First byte of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Allocates (zeroed, if new) the pages of `[off, off+len)` of the mapping without
    /// touching them from user space (`MADV_POPULATE_WRITE`).
    pub fn populate_write(&self, off: usize, len: usize) -> io::Result<()> {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        if off + len > self.len {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: the range lies inside our own mapping; populating changes no contents.
        let rc = unsafe { libc::madvise(self.ptr.add(off).cast(), len, MADV_POPULATE_WRITE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Tells the kernel the mapping is read at random (`MADV_RANDOM`: no read-around).
    pub fn advise_random(&self) -> io::Result<()> {
        // SAFETY: the range is exactly our own mapping; the advice changes no contents.
        let rc = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_RANDOM) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Zaps the page table entries of the whole mapping; shared pages stay in the page cache,
    /// so the next access is a minor fault.
    pub fn dontneed(&self) -> io::Result<()> {
        // SAFETY: the range is exactly our own mapping.
        let rc = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and are unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Writes back dirty pages and drops the whole page cache (`sync; echo 3 > drop_caches`).
pub fn drop_page_cache() -> io::Result<()> {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
}

/// Asks the kernel to drop the cached pages of `file`.
pub fn fadvise_dontneed(file: &File) -> io::Result<()> {
    // SAFETY: fadvise on a valid descriptor only affects the page cache.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Writes all of `buf` at `off` of `fd`.
pub fn pwrite_all(fd: RawFd, buf: &[u8], off: usize) -> io::Result<()> {
    // SAFETY: buf is a live slice of buf.len() bytes.
    let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), off as libc::off_t) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != buf.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short pwrite"));
    }
    Ok(())
}

/// Whether `dir` lives on tmpfs (so not on a block device).
pub fn is_tmpfs(dir: &Path) -> io::Result<bool> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let c = CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: statfs is plain data; zeroed is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL terminated and st is a valid out-pointer.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64 == TMPFS_MAGIC)
}

/// Major and minor faults of the whole process so far.
pub fn faults_self() -> (u64, u64) {
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_majflt as u64, ru.ru_minflt as u64)
}

/// Bytes this process (all its threads) caused to be read from a block device.
pub fn read_bytes_self() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/self/io")?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no read_bytes in /proc/self/io"))
}

/// Creates an anonymous memory file of `len` bytes (shmem).
pub fn memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is NUL terminated.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The userfaultfd ABI subset the fault probe uses (linux/userfaultfd.h).
pub mod uffd {
    use super::*;

    const UFFD_API: u64 = 0xAA;
    const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
    const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
    const UFFDIO_CONTINUE: libc::c_ulong = 0xc020_aa07;
    const MODE_MISSING: u64 = 1;
    const MODE_MINOR: u64 = 4;
    const FEATURE_MISSING_SHMEM: u64 = 1 << 5;
    const FEATURE_MINOR_SHMEM: u64 = 1 << 10;
    const EVENT_PAGEFAULT: u8 = 0x12;
    /// `uffd_msg.pagefault.flags` bit of a minor fault.
    pub const FLAG_MINOR: u64 = 4;

    #[repr(C)]
    struct Api {
        api: u64,
        features: u64,
        ioctls: u64,
    }
    #[repr(C)]
    struct Range {
        start: u64,
        len: u64,
    }
    #[repr(C)]
    struct Register {
        range: Range,
        mode: u64,
        ioctls: u64,
    }
    #[repr(C)]
    struct Continue {
        range: Range,
        mode: u64,
        mapped: i64,
    }
    #[repr(C)]
    struct Msg {
        event: u8,
        _r1: u8,
        _r2: u16,
        _r3: u32,
        flags: u64,
        address: u64,
        _feat: u64,
    }

    /// One page fault read from the userfaultfd.
    pub struct PageFault {
        /// Faulting address.
        pub address: u64,
        /// `UFFD_PAGEFAULT_FLAG_*` bits.
        pub flags: u64,
    }

    /// A userfaultfd with MISSING and MINOR faults on shmem enabled.
    pub struct Uffd(OwnedFd);

    impl Uffd {
        /// Opens a non-blocking userfaultfd (poll, then read: a fault can be woken before
        /// it is read, so a blocking read could wait forever) and negotiates the API.
        pub fn open() -> io::Result<Uffd> {
            // SAFETY: the syscall takes flags only.
            let fd =
                unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fd is a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
            let mut api = Api {
                api: UFFD_API,
                features: FEATURE_MISSING_SHMEM | FEATURE_MINOR_SHMEM,
                ioctls: 0,
            };
            // SAFETY: UFFDIO_API takes a pointer to a uffdio_api we own.
            if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Uffd(fd))
        }

        /// Registers `[start, start+len)` for missing and minor faults.
        pub fn register(&self, start: *mut u8, len: usize) -> io::Result<()> {
            let mut reg = Register {
                range: Range {
                    start: start as u64,
                    len: len as u64,
                },
                mode: MODE_MISSING | MODE_MINOR,
                ioctls: 0,
            };
            // SAFETY: UFFDIO_REGISTER takes a pointer to a uffdio_register we own.
            if unsafe { libc::ioctl(self.0.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// Waits up to `timeout_ms` for the next page fault.
        pub fn read_fault_timeout(&self, timeout_ms: i32) -> io::Result<Option<PageFault>> {
            let mut pfd = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if n < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::Interrupted {
                    Ok(None)
                } else {
                    Err(e)
                };
            }
            if n == 0 {
                return Ok(None);
            }
            self.read_fault()
        }

        /// The next page fault, if one is pending.
        fn read_fault(&self) -> io::Result<Option<PageFault>> {
            let mut msg = std::mem::MaybeUninit::<Msg>::zeroed();
            // SAFETY: reads at most size_of::<Msg>() bytes into our buffer.
            let n = unsafe {
                libc::read(
                    self.0.as_raw_fd(),
                    msg.as_mut_ptr().cast(),
                    std::mem::size_of::<Msg>(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                    _ => Err(e),
                };
            }
            if n != std::mem::size_of::<Msg>() as isize {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "short userfaultfd read",
                ));
            }
            // SAFETY: the kernel filled the whole message.
            let msg = unsafe { msg.assume_init() };
            if msg.event != EVENT_PAGEFAULT {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not a page fault event",
                ));
            }
            Ok(Some(PageFault {
                address: msg.address,
                flags: msg.flags,
            }))
        }

        /// Maps the page-cache pages of `[start, start+len)` into the registered range and wakes
        /// the faulting threads.
        pub fn continue_range(&self, start: u64, len: usize) -> io::Result<()> {
            let mut c = Continue {
                range: Range {
                    start,
                    len: len as u64,
                },
                mode: 0,
                mapped: 0,
            };
            // SAFETY: UFFDIO_CONTINUE takes a pointer to a uffdio_continue we own.
            if unsafe { libc::ioctl(self.0.as_raw_fd(), UFFDIO_CONTINUE, &mut c) } != 0 {
                let e = io::Error::last_os_error();
                // Another thread already mapped it: the faulting thread is woken anyway.
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
            Ok(())
        }
    }
}
