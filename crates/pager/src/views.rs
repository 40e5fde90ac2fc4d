//! A region's two views of its memfd and the calls that change what the
//! application sees: the application's view (registered with userfaultfd:
//! CONTINUE maps a page that is in the memfd, ZEROPAGE a page never
//! written, WRITEPROTECT tracks writes, POISON makes an access raise
//! SIGBUS, a zap unmaps a page so that its next access is a minor fault)
//! and the pager's view, which I/O reads into and writes back from; a punch
//! frees a frame from both.
//!
//! Every call here is one the caller may let fail: a page another thread
//! mapped first only misses its wake-up (made here), a failed zap or punch
//! leaves a page mapped or a frame allocated, never wrong data.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use crate::sys::{self, Uffd, PAGE};

/// The application's and the pager's views of a region's memfd.
pub struct Views {
    /// The userfaultfd registered over the application's view.
    uffd: Uffd,
    /// The region's frames.
    memfd: OwnedFd,
    /// The application's view.
    app: usize,
    /// The pager's view of the same memfd.
    pager: usize,
    /// Both views' length (whole pages).
    map_len: usize,
    /// The length the application asked for.
    len: usize,
    /// Whether the application may write (dirty tracking is on).
    writable: bool,
    /// Whether UFFDIO_POISON is available.
    poison: bool,
}

/// How a page was mapped for an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapped {
    /// Mapped now (or it was, by another thread, and the thread was woken).
    Mapped,
    /// It was mapped write-protected and the access was a write: it is
    /// writable now (a write-protect fault).
    Unprotected,
}

impl Views {
    /// The views at `app` and `pager`, `map_len` bytes each, of `memfd`,
    /// the application's registered with `uffd`; `len` is the length asked
    /// for, `writable` whether the application may write, `poison` whether
    /// UFFDIO_POISON is available.
    pub fn new(
        uffd: Uffd,
        memfd: OwnedFd,
        (app, pager): (usize, usize),
        (map_len, len): (usize, usize),
        writable: bool,
        poison: bool,
    ) -> Self {
        Views {
            uffd,
            memfd,
            app,
            pager,
            map_len,
            len,
            writable,
            poison,
        }
    }

    /// The userfaultfd (read by the handler threads, registered again at a
    /// resume).
    pub fn uffd(&self) -> &Uffd {
        &self.uffd
    }

    /// The region's memfd.
    pub fn memfd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.memfd.as_fd()
    }

    /// The application's view.
    pub fn app(&self) -> usize {
        self.app
    }

    /// The pager's view.
    pub fn pager(&self) -> usize {
        self.pager
    }

    /// Both views' length (whole pages).
    pub fn map_len(&self) -> usize {
        self.map_len
    }

    /// The length the application asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the application may write (dirty tracking is on).
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The page `addr` lies in, if it is in the application's view.
    pub fn page_at(&self, addr: usize) -> Option<u32> {
        let off = addr.checked_sub(self.app)?;
        (off < self.map_len).then_some((off / PAGE) as u32)
    }

    /// Address of page `s` in the application's view.
    pub fn app_addr(&self, s: u32) -> usize {
        self.app + s as usize * PAGE
    }

    /// Address of page `s` in the pager's view.
    pub fn pager_addr(&self, s: u32) -> *mut u8 {
        (self.pager + s as usize * PAGE) as *mut u8
    }

    /// Maps pages `s..s + n`, which are in the memfd, into the application's
    /// view (write-protected with `wp`).
    pub fn map(&self, s: u32, n: usize, wp: bool) {
        let addr = self.app_addr(s);
        if self.uffd.continue_range(addr, n * PAGE, wp).is_err() {
            // Already mapped (another thread's fault on the same page was
            // served first): only the wake is missing. Pages after the first
            // mapped one stay unmapped and are mapped by their own (minor)
            // fault.
            self.wake(s, n);
        }
    }

    /// Fills pages `s..s + n`, absent from the memfd, from `src` and maps
    /// them, write-protected where the region is writable (clean): one
    /// `UFFDIO_COPY`, whose frames are allocated and never cleared first.
    /// Pages the copy does not take (a frame there already) are written
    /// through the pager's view and mapped after. Nobody is woken: a thread
    /// that faulted on one of the pages is woken by the handler serving its
    /// fault, under the region's lock, as before the copy (woken here, its
    /// write could fault again and be served first, and the first fault's
    /// service then mark the page dirty a second time, after a flush).
    ///
    /// # Safety
    /// `src` must be readable for `n` pages, and pages `s..s + n` must be
    /// `Loading`, their frames used by nobody else.
    pub unsafe fn copy_in(&self, s: u32, n: usize, src: *const u8) {
        let wp = self.writable;
        // SAFETY: `src` is readable for `n` pages (the caller's guarantee).
        let copied = match unsafe { self.uffd.copy_range(self.app_addr(s), src, n * PAGE, wp) } {
            Ok(()) => return,
            Err((done, _)) => done / PAGE,
        };
        let rest = s + copied as u32;
        // SAFETY: the pages are Loading: nobody else writes their frames;
        // `src` holds the `n - copied` pages after the copied ones.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.add(copied * PAGE),
                self.pager_addr(rest),
                (n - copied) * PAGE,
            );
        }
        self.map_quietly(rest, n - copied, wp);
    }

    /// Maps pages `s..s + n` (in the memfd) without waking anyone (see
    /// [`Views::copy_in`]); a page mapped already stops it there.
    pub fn map_quietly(&self, s: u32, n: usize, wp: bool) {
        let _ = self
            .uffd
            .continue_waking(self.app_addr(s), n * PAGE, wp, false);
    }

    /// Maps resident page `s` for an access. Mapped already and the access
    /// a write: it was a write-protect fault, and the page is un-protected.
    pub fn map_access(&self, s: u32, write: bool, wp: bool) -> Mapped {
        let addr = self.app_addr(s);
        match self.uffd.continue_range(addr, PAGE, wp) {
            Ok(()) => Mapped::Mapped,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && write && self.writable => {
                self.unprotect(s);
                Mapped::Unprotected
            }
            Err(_) => {
                self.wake(s, 1);
                Mapped::Mapped
            }
        }
    }

    /// Maps pages `s..s + n` (absent from the memfd) as zero pages in one
    /// call: writable for a write fault, else write-protected where dirty
    /// tracking is on, so a later write to any of them is seen.
    pub fn map_zeros(&self, s: u32, n: usize, write: bool) {
        let wp = self.writable && !write;
        if self
            .uffd
            .zero_range(self.app_addr(s), n * PAGE, wp)
            .is_err()
        {
            // Some page has a frame already (or the ioctl is unavailable):
            // fill the holes through the pager's view and map what is not
            // mapped.
            let _ = sys::populate(self.pager_addr(s) as usize, n * PAGE);
            self.map(s, n, wp);
        }
    }

    /// Wakes the threads waiting on pages `s..s + n` (they fault again).
    pub fn wake(&self, s: u32, n: usize) {
        let _ = self.uffd.wake(self.app_addr(s), n * PAGE);
    }

    /// Wakes every thread waiting on the region.
    pub fn wake_all(&self) {
        let _ = self.uffd.wake(self.app, self.map_len);
    }

    /// Lets the application write page `s` (waking a writer that waits).
    pub fn unprotect(&self, s: u32) {
        if self
            .uffd
            .writeprotect(self.app_addr(s), PAGE, false)
            .is_err()
        {
            self.wake(s, 1);
        }
    }

    /// Write-protects page `s`: the application's next write faults.
    pub fn protect(&self, s: u32) {
        let _ = self.uffd.writeprotect(self.app_addr(s), PAGE, true);
    }

    /// Unmaps pages `s..s + n` from the application's view: their next
    /// access faults (a minor fault while the frames stay in the memfd).
    pub fn zap(&self, s: u32, n: usize) {
        let _ = sys::zap(self.app_addr(s), n * PAGE);
    }

    /// Frees the frames of pages `s..s + n` (from both views).
    pub fn punch(&self, s: u32, n: usize) {
        let _ = sys::punch_hole(self.memfd.as_raw_fd(), s as usize * PAGE, n * PAGE);
    }

    /// Makes the application's next access to page `s` raise SIGBUS;
    /// without UFFDIO_POISON the waiting thread is only woken (and faults
    /// again). Returns whether the page is poisoned.
    pub fn poison(&self, s: u32) -> bool {
        let addr = self.app_addr(s);
        let poisoned = self.poison
            && (self.uffd.poison(addr, PAGE).is_ok()
                // EEXIST: the empty PTE holds a write-protect marker, which
                // un-protecting clears.
                || (self.uffd.writeprotect(addr, PAGE, false).is_ok()
                    && self.uffd.poison(addr, PAGE).is_ok()));
        if !poisoned {
            self.wake(s, 1);
        }
        poisoned
    }

    /// Bytes of frames the memfd holds.
    pub fn allocated_bytes(&self) -> u64 {
        sys::allocated_bytes(self.memfd.as_raw_fd()).unwrap_or(0)
    }
}
