//! The mapping calls on taken-over files: `mmap` takes a file over (or says
//! why not), `munmap`, `mremap`, `mprotect`, `msync` and `madvise` act on
//! the program's windows. Each returns `None` when the call is not about a
//! taken-over file: the C library's own function then runs.

use std::ffi::c_int;
use std::sync::Arc;

use crate::fds::{self, FileId};
use crate::state::{self, State};
use crate::taken::{protections, split_at, TakenFile, Window, PAGE};
use crate::{open, real};

/// The outcome of an `mmap` the interposer looked at.
pub enum Take {
    /// Mapped at this address.
    Took(usize),
    /// Left to the kernel; a file taken over is written back first so the
    /// kernel's mapping reads what the program stored.
    Left(Option<Arc<TakenFile>>),
    /// Left to the kernel as smaller than `--min-size` (it may grow).
    Small,
}

/// `n` rounded up to whole pages.
pub fn round_up(n: usize) -> usize {
    n.div_ceil(PAGE) * PAGE
}

/// What became of an `mmap`.
pub enum Mapped {
    /// A window at this address.
    Window(usize),
    /// The kernel's; `watch`: a small shared mapping that may grow into a
    /// region (`remap::watch` after the kernel maps it).
    Kernel { watch: bool },
}

/// `mmap` of a file descriptor: a window into its file's region, or the
/// kernel's mapping.
pub fn mmap(hint: usize, len: usize, prot: c_int, flags: c_int, fd: c_int, off: i64) -> Mapped {
    if fd < 0 || flags & libc::MAP_ANONYMOUS != 0 {
        return Mapped::Kernel { watch: false };
    }
    let Some(id) = fds::identify(fd) else {
        return Mapped::Kernel { watch: false };
    };
    match state::with(|s| take(s, id, hint, len, prot, flags, fd, off)) {
        Some(Take::Took(addr)) => Mapped::Window(addr),
        Some(Take::Left(file)) => {
            if let Some(f) = file {
                state::inside(|| f.region.flush()).ok();
            }
            Mapped::Kernel { watch: false }
        }
        Some(Take::Small) => Mapped::Kernel { watch: true },
        None => Mapped::Kernel { watch: false },
    }
}

/// Takes over the mapping of `len` bytes of `fd` at `off`, or says why not.
#[allow(clippy::too_many_arguments)]
pub fn take(
    s: &mut State,
    id: FileId,
    hint: usize,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> Take {
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let existing = s.file(id).cloned();
    let map_type = flags & 0xf;
    let private = map_type == libc::MAP_PRIVATE;
    let cause = if !private && map_type != libc::MAP_SHARED && map_type != libc::MAP_SHARED_VALIDATE
    {
        Some("an unknown mapping type")
    } else if flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0 {
        Some("a mapping at a fixed address")
    } else if prot & libc::PROT_READ == 0 || prot & !(libc::PROT_READ | libc::PROT_WRITE) != 0 {
        Some("a protection other than read or read-write")
    } else if flags & (libc::MAP_HUGETLB | libc::MAP_LOCKED | libc::MAP_SYNC) != 0 {
        Some("huge pages, locked or synchronous")
    } else if off < 0 || !(off as usize).is_multiple_of(PAGE) || len == 0 {
        return Take::Left(None); // the kernel refuses it
    } else if private && (len as u64) < s.config.min_size {
        Some("a private mapping smaller than --min-size")
    } else if (len as u64) < s.config.min_size && existing.is_none() {
        s.left(
            &path,
            off,
            len,
            "smaller than --min-size (taken over if it grows)",
        );
        return Take::Small;
    } else {
        None
    };
    if let Some(cause) = cause {
        s.left(&path, off, len, cause);
        return Take::Left(existing);
    }
    let end = off as usize + round_up(len);
    let request = open::Request {
        id,
        path: &path,
        len,
        prot,
        fd,
        off,
        hint,
        // SAFETY: fcntl(F_GETFL) on the program's descriptor.
        writable_fd: unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_ACCMODE == libc::O_RDWR,
    };
    if !private && prot & libc::PROT_WRITE != 0 && !request.writable_fd {
        // The kernel refuses it (EACCES), whatever region the file has.
        return Take::Left(None);
    }
    if private {
        // The copy reads the file: what the program stored through a
        // shared mapping must be there first.
        if let Some(f) = &existing {
            let _ = f.region.flush();
        }
        return match open::private(s, &request) {
            Ok(f) => add_window(s, &f, &request),
            Err(cause) => {
                s.left(&path, off, len, &cause);
                Take::Left(None)
            }
        };
    }
    let existing = match existing {
        // An idle file's region too short for the new mapping: a new one.
        Some(f) if end > f.span() && s.is_idle(&f) => {
            s.forget_idle(&f);
            None
        }
        Some(f) => {
            if s.revive(&f) {
                // Changed on disk meanwhile: read it again.
                let _ = f.region.invalidate();
            }
            Some(f)
        }
        None => None,
    };
    let file = match existing {
        Some(f) if end > f.span() => {
            s.left(&path, off, len, "past the reach of the file's region");
            return Take::Left(Some(f));
        }
        Some(f) if prot & libc::PROT_WRITE != 0 && !f.writable => {
            s.left(
                &path,
                off,
                len,
                "writable, and the file was taken over read-only",
            );
            return Take::Left(Some(f));
        }
        Some(f) => f,
        None => match open::shared(s, &request, end) {
            Ok(f) => f,
            Err(cause) => {
                if !cause.is_empty() {
                    s.left(&path, off, len, &cause);
                }
                return Take::Left(None);
            }
        },
    };
    add_window(s, &file, &request)
}

/// Shows the request's range of `file` in a new window.
fn add_window(s: &mut State, file: &Arc<TakenFile>, r: &open::Request<'_>) -> Take {
    // A private copy's region starts at the mapping's offset.
    let start = file.base() + if file.private { 0 } else { r.off as usize };
    s.windows.push(Window {
        start,
        len: round_up(r.len),
        offset: r.off as u64,
        prot: r.prot,
        may_write: file.private || r.writable_fd,
        file: file.clone(),
    });
    reprotect(s, file, start, start + round_up(r.len));
    let kind = if file.private { "private" } else { "shared" };
    let access = if r.prot & libc::PROT_WRITE != 0 {
        "write"
    } else {
        "read"
    };
    s.log.line(format_args!(
        "took {} offset={} len={} {kind} {access} policy={}",
        r.path,
        r.off,
        r.len,
        file.region.stats().policy
    ));
    Take::Took(start)
}

/// Sets the protection of `[a, b)` of `file`'s view from its windows.
pub fn reprotect(s: &State, file: &Arc<TakenFile>, a: usize, b: usize) {
    for (at, len, prot) in protections(&s.windows, file, a, b) {
        // SAFETY: `[at, at+len)` lies in the region's view (`protections`
        // clips to it), which stays mapped while `file` lives.
        unsafe { real::mprotect(at as *mut _, len, prot) };
    }
}

/// The files whose views `[a, b)` touches.
fn files_touched(s: &State, a: usize, b: usize) -> Vec<Arc<TakenFile>> {
    s.files
        .iter()
        .filter(|f| f.base() < b && a < f.base() + f.span())
        .cloned()
        .collect()
}

/// `munmap`: removes the windows in the range (the rest of each stays).
pub fn munmap(addr: usize, len: usize) -> Option<c_int> {
    if !state::any_taken() {
        return None;
    }
    let (a, b) = (addr, addr.checked_add(round_up(len))?);
    let (result, gone, idle) = state::with(|s| {
        let touched = files_touched(s, a, b);
        if touched.is_empty() {
            return (None, Vec::new(), Vec::new());
        }
        remove_windows(&mut s.windows, a, b);
        let (mut gone, mut idle) = (Vec::new(), Vec::new());
        for f in &touched {
            reprotect(s, f, a, b);
            if s.is_idle(f) || s.windows.iter().any(|w| Arc::ptr_eq(&w.file, f)) {
                continue;
            }
            if f.private {
                gone.extend(s.remove_file(f));
            } else {
                gone.extend(s.retire(f));
                idle.push(f.clone());
            }
        }
        // Parts of the range outside every view are the kernel's.
        let mut at = a;
        let mut views: Vec<(usize, usize)> = touched
            .iter()
            .map(|f| (f.base(), f.base() + f.span()))
            .collect();
        views.sort();
        for (va, vb) in views {
            if at < va.min(b) {
                // SAFETY: the program asked to unmap this range.
                unsafe { real::munmap(at as *mut _, va.min(b) - at) };
            }
            at = at.max(vb);
        }
        if at < b {
            // SAFETY: as above.
            unsafe { real::munmap(at as *mut _, b - at) };
        }
        (Some(0), gone, idle)
    })?;
    // The last window of a file went: its stores reach the file now (the
    // region stays, idle, with its frames); files idle too long go.
    state::inside(|| {
        for f in idle {
            if let Err(e) = f.region.flush() {
                f.log
                    .line(format_args!("munmap: write-back of {} failed: {e}", f.path));
            }
        }
        drop(gone)
    });
    result
}

/// Removes the program's mapping of `[a, b)`. Mappings of one file range
/// share their addresses, so the range may be several mappings': one is
/// removed, the one mapped exactly there if there is one, else from each
/// distinct window in the range the part inside it.
fn remove_windows(windows: &mut Vec<Window>, a: usize, b: usize) {
    if let Some(i) = windows.iter().rposition(|w| w.start == a && w.end() == b) {
        windows.remove(i);
        return;
    }
    split_at(windows, a);
    split_at(windows, b);
    let mut seen: Vec<(usize, usize)> = Vec::new();
    let mut i = windows.len();
    while i > 0 {
        i -= 1;
        let w = &windows[i];
        if a <= w.start && w.end() <= b && !seen.contains(&(w.start, w.len)) {
            seen.push((w.start, w.len));
            windows.remove(i);
        }
    }
}

/// Sets `errno` and returns `MAP_FAILED`.
pub fn fail(errno: c_int) -> *mut libc::c_void {
    set_errno(errno);
    libc::MAP_FAILED
}

/// Sets `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: errno is this thread's own.
    unsafe { *libc::__errno_location() = e };
}

/// `mprotect` over windows: each window's protection in the range changes.
pub fn mprotect(addr: usize, len: usize, prot: c_int) -> Option<c_int> {
    if !state::any_taken() {
        return None;
    }
    let (a, b) = (addr, addr.checked_add(round_up(len))?);
    state::with(|s| {
        let touched = files_touched(s, a, b);
        if touched.is_empty() {
            return None;
        }
        split_at(&mut s.windows, a);
        split_at(&mut s.windows, b);
        let inside = |w: &Window| a <= w.start && w.end() <= b;
        if prot & libc::PROT_WRITE != 0 && s.windows.iter().any(|w| inside(w) && !w.may_write) {
            set_errno(libc::EACCES);
            return Some(-1);
        }
        for w in s
            .windows
            .iter_mut()
            .filter(|w| a <= w.start && w.end() <= b)
        {
            w.prot = prot;
        }
        for f in &touched {
            reprotect(s, f, a, b);
        }
        Some(0)
    })?
}

/// The taken-over files whose views `len` bytes from `addr` touch; `None`
/// if none does (the call is the kernel's).
fn touching(addr: usize, len: usize) -> Option<Vec<Arc<TakenFile>>> {
    if !state::any_taken() {
        return None;
    }
    let b = addr.checked_add(round_up(len))?;
    state::with(|s| files_touched(s, addr, b)).filter(|t| !t.is_empty())
}

/// `msync` over windows: their regions write back (`MS_INVALIDATE`: and
/// drop their clean pages, to read the file again).
pub fn msync(addr: usize, len: usize, flags: c_int) -> Option<c_int> {
    let touched = touching(addr, len)?;
    let known = libc::MS_ASYNC | libc::MS_SYNC | libc::MS_INVALIDATE;
    let both = libc::MS_ASYNC | libc::MS_SYNC;
    if !addr.is_multiple_of(PAGE) || flags & !known != 0 || flags & both == both {
        set_errno(libc::EINVAL);
        return Some(-1);
    }
    let failed = state::inside(|| {
        touched.iter().any(|f| {
            let r = if flags & libc::MS_INVALIDATE != 0 {
                f.region.invalidate()
            } else {
                f.region.flush()
            };
            r.is_err()
        })
    });
    if failed {
        set_errno(libc::EIO);
        return Some(-1);
    }
    Some(0)
}

/// `madvise` over windows: the data stays (as in a shared file mapping,
/// where `MADV_DONTNEED` drops only the page tables); `MADV_RANDOM`,
/// `MADV_SEQUENTIAL` and `MADV_NORMAL` become the region's read-ahead
/// advice (for the whole region: the range is not kept).
pub fn madvise(addr: usize, len: usize, advice: c_int) -> Option<c_int> {
    let touched = touching(addr, len)?;
    let hint = match advice {
        libc::MADV_RANDOM => Some(pagepilot_pager::Advice::Random),
        libc::MADV_SEQUENTIAL => Some(pagepilot_pager::Advice::Sequential),
        libc::MADV_NORMAL => Some(pagepilot_pager::Advice::Normal),
        _ => None,
    };
    if let Some(h) = hint {
        state::inside(|| touched.iter().for_each(|f| f.region.advise(h)));
    }
    Some(0)
}
