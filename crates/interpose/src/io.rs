//! The program's `read`/`write` family on a taken-over file, kept
//! coherent with its mappings as through the kernel's page cache (see
//! `Region::write_beside`). The program's buffer is copied to or from one
//! of the interposer's own before the region's lock is taken: it may lie
//! in a region itself, whose faults need that lock.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::fds;
use crate::maps::set_errno;
use crate::state;
use crate::taken::TakenFile;

/// The taken-over file behind `fd`, if any.
fn taken(fd: c_int) -> Option<Arc<TakenFile>> {
    if !state::any_taken() {
        return None;
    }
    fds::lookup(fd, |id| state::with(|s| s.file(id).cloned()).flatten())
}

/// The bytes of `iov`.
fn total(iov: &[libc::iovec]) -> usize {
    iov.iter().map(|v| v.iov_len).sum()
}

/// `pread`-like: reads at `offset` with `io` into a buffer of `len`, lays
/// the region's pages over it, then `scatter`s it to the program.
fn read_at(
    file: &TakenFile,
    offset: i64,
    len: usize,
    io: impl FnOnce(&mut [u8]) -> isize,
    scatter: impl FnOnce(&[u8]),
) -> isize {
    let mut buf = vec![0u8; len];
    let n = state::inside(|| file.region.read_beside(offset.max(0) as u64, &mut buf, io));
    if n > 0 {
        scatter(&buf[..n as usize]);
    }
    n
}

/// Reads `fd` at `offset` into `iov` (`offset` < 0: at the descriptor's
/// position, moving it).
pub fn read(fd: c_int, iov: &[libc::iovec], offset: Option<i64>) -> Option<isize> {
    let file = taken(fd)?;
    let len = total(iov);
    let scatter = |data: &[u8]| {
        let mut at = 0;
        for v in iov {
            let n = v.iov_len.min(data.len() - at);
            // SAFETY: `v` is the program's buffer of `iov_len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(data[at..].as_ptr(), v.iov_base.cast::<u8>(), n)
            };
            at += n;
        }
    };
    Some(match offset {
        Some(off) => read_at(
            &file,
            off,
            len,
            |b| {
                // SAFETY: `b` is a live buffer of its length.
                unsafe { crate::real::pread64(fd, b.as_mut_ptr().cast(), b.len(), off) }
            },
            scatter,
        ),
        None => {
            // SAFETY: lseek on the program's descriptor, not moving it.
            let at = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
            read_at(
                &file,
                at,
                len,
                |b| {
                    // SAFETY: as above.
                    unsafe { crate::real::read(fd, b.as_mut_ptr().cast(), b.len()) }
                },
                scatter,
            )
        }
    })
}

/// Writes `iov` to `fd` at `offset` (`None`: at the descriptor's position,
/// or its end with `O_APPEND`).
pub fn write(fd: c_int, iov: &[libc::iovec], offset: Option<i64>) -> Option<isize> {
    let file = taken(fd)?;
    let mut data = Vec::with_capacity(total(iov));
    for v in iov {
        // SAFETY: `v` is the program's buffer of `iov_len` bytes.
        data.extend_from_slice(unsafe {
            std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len)
        });
    }
    let at = match offset {
        Some(off) => off,
        None => position(fd),
    };
    Some(state::inside(|| {
        file.region
            .write_beside(at.max(0) as u64, &data, || match offset {
                // SAFETY: `data` is a live buffer of its length.
                Some(off) => unsafe {
                    crate::real::pwrite64(fd, data.as_ptr().cast(), data.len(), off)
                },
                // SAFETY: as above.
                None => unsafe { crate::real::write(fd, data.as_ptr().cast(), data.len()) },
            })
    }))
}

/// Where a `write` on `fd` lands: its position, or its end with O_APPEND.
fn position(fd: c_int) -> i64 {
    // SAFETY: fcntl and lseek on the program's descriptor (not moving it).
    unsafe {
        if libc::fcntl(fd, libc::F_GETFL) & libc::O_APPEND != 0 {
            libc::lseek(fd, 0, libc::SEEK_END)
        } else {
            libc::lseek(fd, 0, libc::SEEK_CUR)
        }
    }
}

/// `ftruncate`: the region drops what lies past the new end.
pub fn ftruncate(fd: c_int, len: i64) -> Option<c_int> {
    let file = taken(fd)?;
    if len < 0 {
        return None;
    }
    let r = state::inside(|| {
        file.region.truncate_beside(len as u64, || {
            // SAFETY: ftruncate on the program's descriptor.
            unsafe { crate::real::ftruncate64(fd, len) as isize }
        })
    });
    Some(r as c_int)
}

/// `fallocate`: punched or zeroed ranges are zeros in the region too.
pub fn fallocate(fd: c_int, mode: c_int, off: i64, len: i64) -> Option<c_int> {
    if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) == 0 {
        if mode & (libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE) == 0 {
            return None;
        }
        // Bytes move within the file: written back, then read again.
        let file = taken(fd)?;
        let r = state::inside(|| {
            let _ = file.region.flush();
            // SAFETY: fallocate on the program's descriptor.
            let r = unsafe { crate::real::fallocate64(fd, mode, off, len) };
            let _ = file.region.invalidate();
            r
        });
        return Some(r);
    }
    let file = taken(fd)?;
    if off < 0 || len <= 0 {
        return None;
    }
    let r = state::inside(|| {
        file.region.zero_beside(off as u64, len as usize, || {
            // SAFETY: fallocate on the program's descriptor.
            unsafe { crate::real::fallocate64(fd, mode, off, len) as isize }
        })
    });
    Some(r as c_int)
}

/// `fsync`/`fdatasync`: the region's dirty pages are written back first.
/// `Some(false)`: that failed (errno is EIO).
pub fn sync(fd: c_int) -> Option<bool> {
    let file = taken(fd)?;
    if state::inside(|| file.region.flush()).is_err() {
        set_errno(libc::EIO);
        return Some(false);
    }
    Some(true)
}

/// An `iovec` over one buffer.
pub fn one(buf: *const c_void, len: usize) -> [libc::iovec; 1] {
    [libc::iovec {
        iov_base: buf as *mut c_void,
        iov_len: len,
    }]
}
