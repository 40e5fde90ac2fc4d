//! Mappings and the memfd behind a region: creating, mapping, zapping,
//! punching, protecting, and what a child inherits of them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{check, direct, restarting, PAGE};

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
    let p = unsafe { direct::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// [`map_shared`], at `hint` if the range there is free (the kernel's
/// choice otherwise).
pub fn map_shared_near(
    hint: Option<usize>,
    fd: RawFd,
    len: usize,
    write: bool,
) -> io::Result<usize> {
    let Some(at) = hint.filter(|a| a % PAGE == 0 && *a != 0) else {
        return map_shared(fd, len, write);
    };
    let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
    let flags = libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE;
    // SAFETY: MAP_FIXED_NOREPLACE maps only where nothing is mapped: it
    // aliases no Rust object and replaces no mapping.
    let p = unsafe { direct::mmap(at as *mut libc::c_void, len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return map_shared(fd, len, write);
    }
    Ok(p as usize)
}

/// [`map_shared`] over `[at, at+len)`, which the caller reserved.
///
/// # Safety
/// `[at, at+len)` must be a mapping of the caller's own that nothing uses:
/// it is replaced.
pub unsafe fn map_shared_over(at: usize, fd: RawFd, len: usize, write: bool) -> io::Result<usize> {
    let prot = libc::PROT_READ | if write { libc::PROT_WRITE } else { 0 };
    let flags = libc::MAP_SHARED | libc::MAP_FIXED;
    // SAFETY: the caller gives up the range (its own reservation).
    let p = unsafe { direct::mmap(at as *mut libc::c_void, len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as usize)
}

/// Puts an anonymous `PROT_NONE` reservation over `[at, at+len)` (a view
/// made over a caller's reservation, given back when the region fails).
///
/// # Safety
/// `[at, at+len)` must be a mapping this crate made that nothing uses.
pub unsafe fn reserve_over(at: usize, len: usize) {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE;
    // SAFETY: the caller guarantees the range is ours and unused.
    unsafe { direct::mmap(at as *mut libc::c_void, len, libc::PROT_NONE, flags, -1, 0) };
}

/// One page of private anonymous memory (a handler's doorbell).
pub fn map_anon_page() -> io::Result<usize> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust object.
    let p = unsafe { direct::mmap(std::ptr::null_mut(), PAGE, prot, flags, -1, 0) };
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
    unsafe { direct::munmap(addr as *mut libc::c_void, len) };
}

/// Zaps the PTEs of `[addr, addr+len)` (MADV_DONTNEED). On a shared memfd
/// mapping the pages stay in the memfd; the next access faults again.
pub fn zap(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: MADV_DONTNEED on a shared file mapping drops PTEs only; no data is lost
    // and no Rust reference points into the region.
    check(unsafe { direct::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) })?;
    Ok(())
}

/// Frees the memfd's frames in `[off, off+len)` and unmaps them everywhere.
pub fn punch_hole(fd: RawFd, off: usize, len: usize) -> io::Result<()> {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate on a descriptor we own; no memory is passed.
    restarting(|| unsafe { libc::fallocate(fd, mode, off as libc::off_t, len as libc::off_t) })?;
    Ok(())
}

/// Bytes of `fd` actually allocated (st_blocks * 512).
pub fn allocated_bytes(fd: RawFd) -> io::Result<u64> {
    // SAFETY: an all-zero stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat struct we own.
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st.st_blocks as u64 * 512)
}

/// Tells the kernel `[addr, addr+len)` is read at random (MADV_RANDOM: no read-around).
pub fn advise_random(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the advice changes no contents and no Rust reference's validity.
    check(unsafe { direct::madvise(addr as *mut libc::c_void, len, libc::MADV_RANDOM) })?;
    Ok(())
}

/// A shared mapping of a file or memfd ([`map_shared`]), unmapped on drop.
///
/// `Send` and `Sync` by its fields (an address and a length, no pointer):
/// what users do with the memory through [`ptr`](Mapping::ptr) is up to
/// their own `unsafe` code.
pub struct Mapping {
    addr: usize,
    len: usize,
}

// Shared between threads by the pager (a region's dirty map, the benches'
// mappings): fails to compile if a field ever takes the auto traits away.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Mapping>();
};

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
        let p = unsafe { direct::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
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
    /// touching them from user space ([`populate`](super::populate)).
    pub fn populate_write(&self, off: usize, len: usize) -> io::Result<()> {
        if off.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        super::populate(self.addr + off, len)
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

/// Leaves `[addr, addr+len)` out of a child's copy of the address space
/// (MADV_DONTFORK): the range is unmapped in the child.
pub fn dont_fork(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the advice only changes what fork copies, never this process's memory.
    check(unsafe { direct::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTFORK) })?;
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
    let p = unsafe { direct::mmap(addr as *mut libc::c_void, len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes the dirty pages of a shared file mapping back (msync MS_SYNC).
pub fn msync(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: msync reads the mapping's page-cache state; no memory is written.
    check(unsafe { direct::msync(addr as *mut libc::c_void, len, libc::MS_SYNC) })?;
    Ok(())
}

/// Makes `[addr, addr+len)` inaccessible (PROT_NONE): any access raises SIGSEGV.
pub fn protect_none(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: only the protection of a mapping this crate made changes; no
    // Rust reference points into region memory.
    check(unsafe { direct::mprotect(addr as *mut libc::c_void, len, libc::PROT_NONE) })?;
    Ok(())
}

/// Sets `[addr, addr+len)` read-only, or read-write if `writable`
/// (`mprotect`): the raw Linux side of `pagepilot bench appel-li`.
pub fn protect(addr: usize, len: usize, writable: bool) -> io::Result<()> {
    let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
    // SAFETY: only the protection of a mapping changes; no Rust reference
    // points into memory a caller protects (it accesses it by raw pointers).
    check(unsafe { direct::mprotect(addr as *mut libc::c_void, len, prot) })?;
    Ok(())
}
