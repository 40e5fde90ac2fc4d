//! Faults served by the faulting thread itself (UFFD_FEATURE_SIGBUS): the
//! kernel raises SIGBUS instead of queueing an event, and this handler serves
//! the fault in place, with no thread hand-off. A fault on memory that is
//! not a region's goes to the previous SIGBUS action.
//!
//! Limits (why this is an option, not the default): the kernel's own
//! accesses to a region page that is not mapped (a `read(2)` into region
//! memory) fail with EFAULT instead of waiting; and the handler takes the
//! region's lock and allocates, so region memory must not be touched by code
//! that holds the allocator's lock.
//!
//! The regions are found without a lock: a fixed table of [`SLOTS`] slots,
//! each an address range, a pointer to the region's shared state and a count
//! of handlers inside it. A lookup is a few loads and one increment of that
//! count (no process-wide lock, no reference count bounced between threads of
//! other regions); unregistering empties the range first, then waits for the
//! count to drain before the state may be freed.
//!
//! The handler is installed once per process, by the first region served
//! this way, and keeps the action it replaced ([`PREVIOUS`]) for the
//! SIGBUS that are not pagepilot's. Another thread may install a handler of
//! its own ("foreign") at the same moment; the kernel takes the two
//! `sigaction` calls one after the other, and neither handler is lost,
//! which means:
//! - pagepilot's last: the action it replaced is the foreign one, and a
//!   SIGBUS outside every region goes to it, from the first SIGBUS on (one
//!   that comes before the action is recorded waits for it: see
//!   [`previous`]); SIGBUS is never reset to the default action while a
//!   handler was there before;
//! - the foreign one last: it is the process's, and pagepilot's is the
//!   action *it* replaced; the regions' faults reach pagepilot's handler if
//!   the foreign one passes on what is not its own, as every handler must.
//!
//! `tests/sigbus_install_race.rs` races the two installs, with SIGBUS sent
//! all along, in many processes.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use crate::error::MapError;
use crate::fault;
use crate::shared::Shared;
use crate::sys::{self, FLAG_WRITE};

/// Regions served in the faulting thread at once, at most.
pub const SLOTS: usize = 64;

/// One registered region: `[start, end)` of its application view.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    /// From `Arc::into_raw`: the table holds one strong reference.
    shared: AtomicPtr<Shared>,
    /// Handlers serving a fault of this slot's region right now.
    inside: AtomicUsize,
    /// The range of the region this slot held last, once unregistered.
    closed_start: AtomicUsize,
    closed_end: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    shared: AtomicPtr::new(std::ptr::null_mut()),
    inside: AtomicUsize::new(0),
    closed_start: AtomicUsize::new(0),
    closed_end: AtomicUsize::new(0),
};
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();
/// The errno of the install if it failed (0: installed, or not tried).
static INSTALL_ERROR: AtomicI32 = AtomicI32::new(0);
/// The SIGBUS action pagepilot's handler replaced.
static PREVIOUS: Previous = Previous::new();

/// A SIGBUS action written once and then read by signal handlers: no lock,
/// so that a handler may read it whatever the thread it interrupted holds
/// (`std::sync::OnceLock` would do, but a fork in the middle of its write
/// leaves the child's copy unwritable).
struct Previous {
    /// [`UNSET`](Self::UNSET), [`WRITING`](Self::WRITING) or
    /// [`PUBLISHED`](Self::PUBLISHED).
    state: AtomicU8,
    /// Written by the one `publish` that moved `state` from UNSET to
    /// WRITING; read only once `state` is PUBLISHED.
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
}

// SAFETY: `action` is written only by the single caller that won the
// UNSET -> WRITING exchange of `state` (or, in `forget_all_in_child`, by the
// child's only thread), and read only after `state` is seen PUBLISHED
// (Acquire), which that writer stores (Release) after its write: every
// read happens after the write, and no two accesses race.
unsafe impl Sync for Previous {}

impl Previous {
    /// Nothing recorded.
    const UNSET: u8 = 0;
    /// A `publish` is writing the action.
    const WRITING: u8 = 1;
    /// The action is written, for good.
    const PUBLISHED: u8 = 2;

    /// No action recorded yet.
    const fn new() -> Previous {
        Previous {
            state: AtomicU8::new(Self::UNSET),
            action: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Records `action`, if nothing was recorded (or is being) yet.
    fn publish(&self, action: libc::sigaction) {
        let won = self.state.compare_exchange(
            Self::UNSET,
            Self::WRITING,
            Ordering::Acquire,
            Ordering::Relaxed,
        );
        if won.is_ok() {
            // SAFETY: this call alone moved `state` out of UNSET, so no
            // other write happens, and no read before PUBLISHED below.
            unsafe { (*self.action.get()).write(action) };
            self.state.store(Self::PUBLISHED, Ordering::Release);
        }
    }

    /// The recorded action, once published.
    fn get(&self) -> Option<&libc::sigaction> {
        if self.state.load(Ordering::Acquire) != Self::PUBLISHED {
            return None;
        }
        // SAFETY: PUBLISHED is stored after the one write of `action`
        // (Release, seen above with Acquire) and `action` never changes
        // after: the value is initialised and no write races this read.
        Some(unsafe { (*self.action.get()).assume_init_ref() })
    }
}

/// Serves faults of `shared`'s application view in the faulting thread.
pub fn register(shared: Arc<Shared>) -> Result<(), MapError> {
    install().map_err(|source| MapError::Sys {
        call: "sigaction",
        source,
    })?;
    let (start, end) = (
        shared.views().app(),
        shared.views().app() + shared.views().map_len(),
    );
    let raw = Arc::into_raw(shared).cast_mut();
    for slot in &TABLE {
        let taken = slot.shared.compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        if taken.is_ok() {
            // The range last: a handler that sees it sees the pointer.
            slot.start.store(start, Ordering::Release);
            slot.end.store(end, Ordering::Release);
            return Ok(());
        }
    }
    // SAFETY: `raw` came from Arc::into_raw above and was not published.
    drop(unsafe { Arc::from_raw(raw) });
    Err(MapError::FaultingThreadSlots { max: SLOTS })
}

/// Installs the handler, once per process; every call after a failed
/// install fails alike.
///
/// The action replaced is recorded in [`PREVIOUS`] by the installing
/// thread with SIGBUS blocked in it ([`sys::install_sigbus_recording`]):
/// the one exchange with the kernel returns exactly the action replaced,
/// even if another thread installs a handler at the same moment, and a
/// SIGBUS another thread takes under pagepilot's handler before the record
/// is written waits for it ([`previous`]) instead of finding none.
fn install() -> std::io::Result<()> {
    INSTALL.call_once(|| {
        if let Err(e) = sys::install_sigbus_recording(on_sigbus, |old| PREVIOUS.publish(old)) {
            let errno = e.raw_os_error().unwrap_or(libc::EINVAL);
            INSTALL_ERROR.store(errno, Ordering::SeqCst);
        }
    });
    match INSTALL_ERROR.load(Ordering::SeqCst) {
        0 => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// The action pagepilot's handler replaced. Waits while it is not recorded
/// yet: only possible in a thread other than the installing one (that
/// thread has SIGBUS blocked until the record is written, a few
/// instructions after the exchange), so the wait ends.
fn previous() -> &'static libc::sigaction {
    loop {
        if let Some(old) = PREVIOUS.get() {
            return old;
        }
        std::thread::yield_now();
    }
}

/// Ranges held at once, at most (regions resuming together).
const HOLDS: usize = 8;

/// Ranges whose SIGBUS waits until they are released: a region's view
/// while it is mapped and registered again (`sharing::resume`).
#[allow(clippy::declare_interior_mutable_const)]
const FREE_HOLD: (AtomicUsize, AtomicUsize) = (AtomicUsize::new(0), AtomicUsize::new(0));
static HELD: [(AtomicUsize, AtomicUsize); HOLDS] = [FREE_HOLD; HOLDS];
/// Each hold's range once released: a SIGBUS raised inside the hold may
/// reach its handler only after the release (the thread was preempted in
/// between), and is retried too, a few times in a row at most.
static RELEASED: [(AtomicUsize, AtomicUsize); HOLDS] = [FREE_HOLD; HOLDS];
/// Releases so far: a thread's retries are counted per release.
static RELEASES: AtomicUsize = AtomicUsize::new(0);

/// A range held by [`hold`].
#[derive(Debug)]
pub struct Held(usize);

/// Makes a SIGBUS in `[start, start + len)` wait until [`release`]; the
/// access is then retried. `None` if the handler cannot be installed or
/// every hold is taken.
pub fn hold(start: usize, len: usize) -> Option<Held> {
    install().ok()?;
    for (i, (s, e)) in HELD.iter().enumerate() {
        if s.compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            e.store(start + len, Ordering::SeqCst);
            return Some(Held(i));
        }
    }
    None
}

/// Ends a hold: the accesses waiting retry.
pub fn release(held: Held) {
    let (s, e) = &HELD[held.0];
    let (rs, re) = &RELEASED[held.0];
    re.store(0, Ordering::SeqCst);
    rs.store(s.load(Ordering::SeqCst), Ordering::SeqCst);
    re.store(e.load(Ordering::SeqCst), Ordering::SeqCst);
    RELEASES.fetch_add(1, Ordering::SeqCst);
    e.store(0, Ordering::SeqCst);
    s.store(0, Ordering::SeqCst);
}

fn in_any(ranges: &[(AtomicUsize, AtomicUsize)], addr: usize) -> bool {
    ranges.iter().any(|(s, e)| {
        let start = s.load(Ordering::SeqCst);
        start != 0 && (start..e.load(Ordering::SeqCst)).contains(&addr)
    })
}

/// Waits while `addr` is held; whether the access is to be retried (it
/// was held, or lies in a range released since).
fn wait_if_held(addr: usize) -> bool {
    if in_any(&HELD, addr) {
        while in_any(&HELD, addr) {
            std::thread::yield_now();
        }
        return true;
    }
    in_any(&RELEASED, addr) && retry_page_again(addr)
}

thread_local! {
    /// The release and page of this thread's last fault retried in a
    /// released range, and how many times in a row.
    static RELEASED_RETRIES: std::cell::Cell<(usize, usize, u8)> =
        const { std::cell::Cell::new((0, 0, 0)) };
}

/// Whether a fault at `addr` in a released range may be retried: a few
/// times in a row on the same page since the last release at most (a
/// SIGBUS that is the application's own, beyond the file's end, then
/// reaches it).
fn retry_page_again(addr: usize) -> bool {
    let page = addr & !(crate::sys::PAGE - 1);
    let release = RELEASES.load(Ordering::SeqCst);
    RELEASED_RETRIES.with(|r| {
        let (last_release, last_page, n) = r.get();
        let n = if (last_release, last_page) == (release, page) {
            n.saturating_add(1)
        } else {
            1
        };
        r.set((release, page, n));
        n <= 3
    })
}

/// Stops serving `shared`'s faults; returns when no handler uses it any more.
pub fn unregister(shared: &Arc<Shared>) {
    let raw = Arc::as_ptr(shared).cast_mut();
    for slot in &TABLE {
        if slot.shared.load(Ordering::Acquire) != raw {
            continue;
        }
        // A fault raised before the unmap began may be handled after this:
        // it is retried (the region is PROT_NONE by now: SIGSEGV).
        slot.closed_start
            .store(slot.start.load(Ordering::SeqCst), Ordering::SeqCst);
        slot.closed_end
            .store(slot.end.load(Ordering::SeqCst), Ordering::SeqCst);
        // No new lookup matches from here on (an empty range)...
        slot.end.store(0, Ordering::SeqCst);
        slot.start.store(0, Ordering::SeqCst);
        // ...and handlers that matched before have left.
        while slot.inside.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        slot.shared.store(std::ptr::null_mut(), Ordering::Release);
        // SAFETY: the table's reference, from Arc::into_raw in `register`;
        // nothing can reach it through the slot any more.
        drop(unsafe { Arc::from_raw(raw) });
    }
}

/// In a child after `fork`: no region is served here (the child has no
/// pager; see `lifecycle`). The slots are emptied without waiting (no other
/// thread exists) and their references leaked (the child never frees the
/// parent's state).
///
/// A fork by another thread between the install's exchange and its record
/// of the action replaced leaves the child pagepilot's handler with no
/// record, which nothing in the child would write: the default action is
/// recorded then (the action replaced is lost in that child only).
pub fn forget_all_in_child() {
    for slot in &TABLE {
        slot.end.store(0, Ordering::SeqCst);
        slot.start.store(0, Ordering::SeqCst);
        slot.inside.store(0, Ordering::SeqCst);
        slot.shared.store(std::ptr::null_mut(), Ordering::SeqCst);
    }
    let ours = sys::sigbus_handler().is_ok_and(|h| h == on_sigbus as sys::SigHandler as usize);
    if ours && PREVIOUS.get().is_none() {
        // The parent's writer, if it had begun, does not exist here.
        PREVIOUS.state.store(Previous::UNSET, Ordering::SeqCst);
        // SAFETY: an all-zero sigaction with SIG_DFL is valid.
        let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        PREVIOUS.publish(dfl);
    }
}

/// The slot whose region holds `addr`, entered (its `inside` count taken).
fn enter(addr: usize) -> Option<(&'static Slot, &'static Shared)> {
    for slot in &TABLE {
        if !(slot.start.load(Ordering::Acquire)..slot.end.load(Ordering::Acquire)).contains(&addr) {
            continue;
        }
        slot.inside.fetch_add(1, Ordering::SeqCst);
        // Checked again inside: `unregister` empties the range before it
        // waits for `inside` to drain, so a region still in range is alive.
        let still =
            (slot.start.load(Ordering::SeqCst)..slot.end.load(Ordering::SeqCst)).contains(&addr);
        let p = slot.shared.load(Ordering::Acquire);
        if still && !p.is_null() {
            // SAFETY: the slot holds a strong reference until `unregister`,
            // which waits for `inside` (taken above) to drop to zero.
            return Some((slot, unsafe { &*p }));
        }
        slot.inside.fetch_sub(1, Ordering::Release);
    }
    None
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: called by the kernel as a SA_SIGINFO handler with its arguments.
    let (addr, write) = unsafe { sys::fault_of(info, ctx) };
    if wait_if_held(addr) {
        return;
    }
    // SAFETY: as above. A SIGBUS that is not userfaultfd's is the application's.
    if !unsafe { sys::is_userfault(info) } {
        not_ours(sig, info, ctx);
        return;
    }
    let Some((slot, sh)) = enter(addr) else {
        if retry_closed(addr) {
            return;
        }
        not_ours(sig, info, ctx);
        return;
    };
    CLOSED_RETRIES.with(|r| r.set(0));
    // No WP flag here: a write to a mapped, write-protected page is told
    // apart by UFFDIO_CONTINUE answering EEXIST (see fault::map::map_access).
    let flags = if write { FLAG_WRITE } else { 0 };
    let t0 = std::time::Instant::now();
    // The faulting thread serves its own fault: never stale.
    let outcome = fault::serve(sh, addr, flags, u64::MAX, false);
    sh.stats().latency.record(t0.elapsed().as_nanos() as u64);
    slot.inside.fetch_sub(1, Ordering::Release);
    if outcome == fault::Outcome::Signal {
        // The page cannot be served: the application gets this SIGBUS, as
        // the kernel's MAP_SHARED mapping would raise it.
        not_ours(sig, info, ctx);
    }
}

thread_local! {
    /// Faults of this thread retried in a row for unmapped regions.
    static CLOSED_RETRIES: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// Whether a fault at `addr` lies in a region unmapped since it was raised:
/// the access is retried, and faults as unmapped memory does (the unmap
/// made the range inaccessible before it stopped serving it). A few times
/// in a row at most: the range may hold someone else's mapping by now.
fn retry_closed(addr: usize) -> bool {
    let closed = TABLE.iter().any(|s| {
        (s.closed_start.load(Ordering::SeqCst)..s.closed_end.load(Ordering::SeqCst)).contains(&addr)
    });
    closed && retry_once_more()
}

/// Counts a retry of this thread's fault; whether it may retry once more.
fn retry_once_more() -> bool {
    CLOSED_RETRIES.with(|r| {
        let n = r.get();
        r.set(n.saturating_add(1));
        n < 3
    })
}

/// Hands a fault outside every region to whoever had SIGBUS before;
/// returning re-executes the access and raises it again under that action.
fn not_ours(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    match previous() {
        old if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed as a SA_SIGINFO handler.
                let f: sys::SigHandler = unsafe { std::mem::transmute(old.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: the previous handler was installed as a plain handler.
                let f: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // SAFETY: an all-zero sigaction with SIG_DFL is valid.
            let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
            dfl.sa_sigaction = libc::SIG_DFL;
            sys::restore_sigbus(&dfl);
        }
    }
}
