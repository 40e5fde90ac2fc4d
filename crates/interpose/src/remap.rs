//! `mremap` of the program's file mappings. A window grows or shrinks in
//! place while it stays within its region's reach. Past it, a file's only
//! window moves to a new, larger region (the old one writes back first);
//! with other windows of the file, or to a fixed address, it becomes the
//! kernel's mapping of the file. A small shared mapping the kernel kept
//! (under `--min-size`) is watched, and taken over when it grows past the
//! size: SQLite maps a new database small and grows the map with it.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use crate::fds;
use crate::maps::{fail, reprotect, round_up, take, Take};
use crate::real;
use crate::state::{self, State};
use crate::taken::{split_at, TakenFile, Window, PAGE};

/// A small shared file mapping the kernel holds, watched for growth.
pub struct Watched {
    start: usize,
    len: usize,
    offset: i64,
    prot: c_int,
    /// The file, for taking it over (a descriptor of the interposer's own).
    fd: OwnedFd,
}

/// Mappings watched now (the fast path's test).
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Watches the kernel's small shared mapping at `start`.
pub fn watch(start: usize, len: usize, prot: c_int, fd: c_int, offset: i64) {
    let Some(fd) = fds::own_dup(fd) else { return };
    let w = Watched {
        start,
        len: round_up(len),
        offset,
        prot,
        fd,
    };
    state::with(|s| {
        s.watched.push(w);
        WATCHED.store(s.watched.len(), Relaxed);
    });
}

/// Stops watching what `[a, b)` unmaps.
pub fn unwatch(a: usize, b: usize) {
    if WATCHED.load(Relaxed) == 0 {
        return;
    }
    let gone = state::with(|s| {
        let (gone, kept): (Vec<Watched>, Vec<Watched>) = std::mem::take(&mut s.watched)
            .into_iter()
            .partition(|w| w.start < b && a < w.start + w.len);
        s.watched = kept;
        WATCHED.store(s.watched.len(), Relaxed);
        gone
    });
    state::inside(|| drop(gone));
}

/// What to do with an `mremap`.
enum Plan {
    /// Done: the address, or an errno.
    Done(Result<usize, c_int>),
    /// A watched mapping grown past `--min-size`: take it over.
    Adopt(Watched),
    /// A watched mapping still small: the kernel's mremap, still watched.
    Rewatch(Watched),
    /// The file's only window, grown past the region's reach: a new region.
    Rebuild(Window, Arc<TakenFile>, OwnedFd),
    /// The kernel's mapping of the file, after a write-back.
    Handoff(Window, Arc<TakenFile>),
}

/// `mremap`, or `None` when `old` is neither a window nor watched.
pub fn mremap(
    old: usize,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: usize,
) -> Option<*mut c_void> {
    if !state::any_taken() && WATCHED.load(Relaxed) == 0 {
        return None;
    }
    let plan = state::with(|s| plan(s, old, old_len, new_len, flags))??;
    // SAFETY: the program's own call.
    let theirs = || unsafe {
        real::mremap(
            old as *mut c_void,
            old_len,
            new_len,
            flags,
            new_addr as *mut c_void,
        )
    };
    let fixed = flags & libc::MREMAP_FIXED != 0;
    Some(match plan {
        Plan::Done(Ok(addr)) => addr as *mut c_void,
        Plan::Done(Err(e)) => fail(e),
        Plan::Adopt(w) => match retake(w.fd.as_raw_fd(), new_len, w.prot, w.offset) {
            Some(addr) => {
                // SAFETY: the kernel's old mapping, which the program gave up
                // (its stores are in the page cache the region reads).
                unsafe { real::munmap(old as *mut c_void, old_len) };
                addr as *mut c_void
            }
            None => theirs(),
        },
        Plan::Rewatch(mut w) => {
            let p = theirs();
            if p != libc::MAP_FAILED {
                (w.start, w.len) = (p as usize, round_up(new_len));
                state::with(|s| {
                    s.watched.push(w);
                    WATCHED.store(s.watched.len(), Relaxed);
                });
            }
            p
        }
        Plan::Rebuild(w, file, fd) => {
            // The old region writes back and unmaps before the new one reads.
            state::inside(|| drop(file));
            match retake(fd.as_raw_fd(), new_len, w.prot, w.offset as i64) {
                Some(addr) => addr as *mut c_void,
                None => kernel_map(&fd, &w, new_len, 0, false),
            }
        }
        Plan::Handoff(w, file) => {
            state::inside(|| file.region.flush()).ok();
            let p = kernel_map(&file.fd, &w, new_len, new_addr, fixed);
            if p != libc::MAP_FAILED {
                if file.private {
                    // The copy's own pages go with it, as mremap moves them.
                    // SAFETY: both ranges are mapped readable and writable
                    // for at least the bytes copied, and do not overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            w.start as *const u8,
                            p.cast::<u8>(),
                            old_len.min(new_len),
                        )
                    };
                }
                crate::maps::munmap(w.start, old_len);
            }
            p
        }
    })
}

fn plan(s: &mut State, old: usize, old_len: usize, new_len: usize, flags: c_int) -> Option<Plan> {
    let may_move = flags & libc::MREMAP_MAYMOVE != 0;
    let fixed = flags & libc::MREMAP_FIXED != 0;
    if let Some(i) = s.watched.iter().position(|w| w.start == old) {
        let w = s.watched.swap_remove(i);
        WATCHED.store(s.watched.len(), Relaxed);
        if may_move && !fixed && new_len as u64 >= s.config.min_size {
            return Some(Plan::Adopt(w));
        }
        return Some(Plan::Rewatch(w));
    }
    s.windows
        .iter()
        .position(|w| w.start <= old && old < w.end())?;
    if old_len == 0 || new_len == 0 || !old.is_multiple_of(PAGE) {
        return Some(Plan::Done(Err(libc::EINVAL)));
    }
    split_at(&mut s.windows, old);
    split_at(&mut s.windows, old + round_up(old_len));
    let i = s.windows.iter().position(|w| w.start == old)?;
    let w = s.windows[i].clone();
    let file = w.file.clone();
    let reach = file.base() + file.span();
    if !fixed && old + round_up(new_len) <= reach {
        s.windows[i].len = round_up(new_len);
        reprotect(s, &file, old, old + round_up(old_len.max(new_len)));
        return Some(Plan::Done(Ok(old)));
    }
    if !may_move {
        return Some(Plan::Done(Err(libc::ENOMEM)));
    }
    let only = s
        .windows
        .iter()
        .filter(|x| Arc::ptr_eq(&x.file, &file))
        .count()
        == 1;
    if only && !fixed && !file.private {
        let fd = fds::own_dup(file.fd.as_raw_fd())?;
        s.windows.remove(i);
        s.remove_file(&file);
        return Some(Plan::Rebuild(w, file, fd));
    }
    let cause = if fixed {
        "moved to a fixed address (mremap)"
    } else {
        "grown past the reach of the file's region while other mappings show it (mremap)"
    };
    s.left(&file.path, w.offset as i64, new_len, cause);
    Some(Plan::Handoff(w, file))
}

/// Takes `fd`'s file over for a mapping of `len` bytes at `offset`.
fn retake(fd: c_int, len: usize, prot: c_int, offset: i64) -> Option<usize> {
    let id = fds::identify(fd)?;
    match state::with(|s| take(s, id, 0, len, prot, libc::MAP_SHARED, fd, offset))? {
        Take::Took(addr) => Some(addr),
        _ => None,
    }
}

/// The kernel's mapping of `fd` for window `w`'s file range (shared, or
/// private for a private copy), `len` bytes, at `addr` if `fixed`.
fn kernel_map(fd: &OwnedFd, w: &Window, len: usize, addr: usize, fixed: bool) -> *mut c_void {
    let kind = if w.file.private {
        libc::MAP_PRIVATE
    } else {
        libc::MAP_SHARED
    };
    let flags = kind | if fixed { libc::MAP_FIXED } else { 0 };
    // SAFETY: a new mapping of the file, at the kernel's choice or where
    // the program's mremap(MREMAP_FIXED) asked (replacing what is there,
    // as mremap does).
    unsafe {
        real::mmap(
            addr as *mut c_void,
            len,
            w.prot,
            flags,
            fd.as_raw_fd(),
            w.offset as i64,
        )
    }
}
