//! The probe's memory and its handler thread (see the parent module).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;

use pagepilot_pager::sys::{self, Mapping, Uffd, UffdMsg, PAGE};

use super::{sys_err, WaysError};

/// A memfd with an application view registered on a userfaultfd.
pub(super) struct Range {
    /// The userfaultfd the view is registered with.
    pub uffd: Uffd,
    /// The application's view.
    pub view: Mapping,
}

/// The probe's memory: one memfd, a handler's view, and two registered application views of
/// it, one on a userfaultfd without the fork event (`plain`) and one with it (`forking`).
pub(super) struct Probe {
    /// The frames.
    pub memfd: OwnedFd,
    /// The handler's view (left out of children).
    pub pager: Mapping,
    /// Registered without the fork event.
    pub plain: Range,
    /// Registered with it.
    pub forking: Range,
    /// Bytes.
    pub len: usize,
}

const MODES: u64 = sys::MODE_MISSING | sys::MODE_MINOR | sys::MODE_WP;
const FEATURES: u64 = sys::FEATURE_MISSING_SHMEM | sys::FEATURE_MINOR_SHMEM | sys::FEATURE_WP_SHMEM;

impl Probe {
    /// Maps and registers the probe's memory, `len` bytes.
    pub fn new(len: usize) -> Result<Probe, WaysError> {
        let memfd = sys::memfd("pagepilot-fork-ways", len).map_err(sys_err("memfd"))?;
        let fd = memfd.as_raw_fd();
        let pager = Mapping::shared(fd, len, true).map_err(sys_err("mmap"))?;
        sys::dont_fork(pager.ptr() as usize, len).map_err(sys_err("madvise"))?;
        let range = |features: u64| -> Result<Range, WaysError> {
            let (uffd, got, _) = Uffd::open(features)
                .map_err(|e| WaysError::Sys("userfaultfd", std::io::Error::other(e)))?;
            if got & features != features {
                return Err(WaysError::Feature(features & !got));
            }
            let view = Mapping::shared(fd, len, true).map_err(sys_err("mmap"))?;
            uffd.register(view.ptr() as usize, len, MODES)
                .map_err(sys_err("UFFDIO_REGISTER"))?;
            sys::dont_fork(view.ptr() as usize, len).map_err(sys_err("madvise"))?;
            Ok(Range { uffd, view })
        };
        Ok(Probe {
            plain: range(FEATURES)?,
            forking: range(FEATURES | sys::FEATURE_EVENT_FORK)?,
            memfd,
            pager,
            len,
        })
    }

    /// Every page in the memfd and mapped in both application views.
    pub fn make_resident(&self) -> Result<(), WaysError> {
        self.pager
            .populate_write(0, self.len)
            .map_err(sys_err("populate"))?;
        for r in [&self.plain, &self.forking] {
            r.view.dontneed().map_err(sys_err("madvise"))?;
            let base = r.view.ptr() as usize;
            for off in (0..self.len).step_by(2 << 20) {
                let n = (2 << 20).min(self.len - off);
                r.uffd
                    .continue_range(base + off, n, false)
                    .map_err(sys_err("UFFDIO_CONTINUE"))?;
            }
        }
        Ok(())
    }

    /// Only `inherited` (if any) is copied into a child.
    pub fn inherit_only(&self, inherited: Option<&Range>) -> Result<(), WaysError> {
        for r in [&self.plain, &self.forking] {
            let (addr, len) = (r.view.ptr() as usize, self.len);
            if inherited.is_some_and(|i| std::ptr::eq(i, r)) {
                sys::do_fork(addr, len).map_err(sys_err("madvise"))?;
            } else {
                sys::dont_fork(addr, len).map_err(sys_err("madvise"))?;
            }
        }
        Ok(())
    }
}

/// Most children's userfaultfds the handler holds at once.
const MAX_CHILDREN: usize = 16;

/// What the handler thread shares with the rest.
#[derive(Default)]
pub(super) struct Handler {
    /// Bumped to make the handler close the children's userfaultfds it holds (the children
    /// were reaped).
    pub forget_children: AtomicU64,
    /// Faults served through the parent's userfaultfd.
    pub served_parent: AtomicU64,
    /// Faults served through children's.
    pub served_child: AtomicU64,
    /// The handler's first failure (it goes on serving, so that no fork or fault waits forever).
    pub failed: Mutex<Option<WaysError>>,
    /// Set to end the handler thread.
    pub stop: AtomicBool,
}

impl Handler {
    /// Makes the handler close the children's userfaultfds (they were reaped).
    pub fn forget_children(&self) {
        self.forget_children.fetch_add(1, SeqCst);
    }

    /// Records the handler's first failure.
    pub fn fail(&self, e: WaysError) {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    }

    /// The handler's failure, if any.
    pub fn check(&self) -> Result<(), WaysError> {
        match self.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Serves faults on `parent` (the `forking` range) and on every child's userfaultfd until
/// told to stop: a missing fault is filled with one `pwrite` of `fill` into the memfd, then
/// every fault is mapped with `UFFDIO_CONTINUE` on the userfaultfd it came from.
///
/// Allocates nothing: `fork()` waits for this thread to read the fork event while the forking
/// thread holds glibc's allocator locks (taken around the `fork` system call), so a handler
/// that allocates then deadlocks with the fork (this probe's first version did).
pub(super) fn serve(h: &Handler, parent: &Uffd, probe: &Probe, fill: &[u8]) {
    let base = probe.forking.view.ptr() as usize;
    let mut msgs = [UffdMsg::default(); 16];
    let mut kids: [Option<Uffd>; MAX_CHILDREN] = Default::default();
    let mut forgotten = h.forget_children.load(SeqCst);
    while !h.stop.load(SeqCst) {
        let now = h.forget_children.load(SeqCst);
        if now != forgotten {
            kids.iter_mut().for_each(|k| *k = None);
            forgotten = now;
        }
        let mut fds = [-1; MAX_CHILDREN + 1];
        fds[0] = parent.raw();
        for (fd, k) in fds[1..].iter_mut().zip(&kids) {
            *fd = k.as_ref().map_or(-1, Uffd::raw);
        }
        let mut ready = [false; MAX_CHILDREN + 1];
        if let Err(e) = sys::poll_readable(&fds, &mut ready, 50) {
            h.fail(WaysError::Sys("poll", e));
            continue;
        }
        let mut forked = [-1; 16];
        for i in (0..=MAX_CHILDREN).filter(|&i| ready[i]) {
            let (uffd, counter) = match i {
                0 => (parent, &h.served_parent),
                _ => match &kids[i - 1] {
                    Some(k) => (k, &h.served_child),
                    None => continue,
                },
            };
            let n = match uffd.read_msgs(&mut msgs) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    h.fail(WaysError::Sys("read userfaultfd", e));
                    continue;
                }
            };
            for (m, slot) in msgs[..n].iter().zip(forked.iter_mut()) {
                if let Some(fd) = m.forked_uffd() {
                    *slot = fd;
                } else if let Some((addr, flags)) = m.pagefault() {
                    match serve_fault(uffd, probe, base, addr, flags, fill) {
                        Ok(()) => _ = counter.fetch_add(1, SeqCst),
                        Err(e) => h.fail(e),
                    }
                }
            }
        }
        for fd in forked.into_iter().filter(|&fd| fd >= 0) {
            // SAFETY: a descriptor a fork event just opened, owned by nobody else.
            let child = unsafe { Uffd::from_forked(fd) };
            match kids.iter_mut().find(|k| k.is_none()) {
                Some(slot) => *slot = Some(child),
                None => h.fail(WaysError::Sys(
                    "fork event",
                    std::io::Error::other("too many children"),
                )),
            }
        }
    }
}

/// Fills (a missing fault) and maps the page at `addr` through `uffd`.
fn serve_fault(
    uffd: &Uffd,
    probe: &Probe,
    base: usize,
    addr: usize,
    flags: u64,
    fill: &[u8],
) -> Result<(), WaysError> {
    let page = (addr - base) / PAGE;
    if flags & sys::FLAG_MINOR == 0 {
        let off = (page * PAGE) as u64;
        // SAFETY: `fill` holds PAGE readable bytes.
        unsafe { sys::pwrite_all(probe.memfd.as_raw_fd(), fill.as_ptr(), PAGE, off) }
            .map_err(sys_err("pwrite"))?;
    }
    match uffd.continue_range(base + page * PAGE, PAGE, false) {
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => {
            Err(WaysError::Sys("UFFDIO_CONTINUE", e))
        }
        _ => Ok(()),
    }
}
