//! The Appel-Li primitives, written once against a [`Side`] (raw Linux, or
//! userfaultfd with a handler thread or in the faulting thread): each loop
//! returns its per-repetition times, ns. What a handler does on a fault is
//! [`Ctl::serve`], the same code on every side.

use std::io;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use pagepilot_pager::sys::PAGE;

use super::Error;

/// Pages of the ring the primitives work on (Prot100, Appel2: all of them).
pub const RING: usize = 100;

/// Pages mapped per side: the ring, room after it (so `mprotect` of the ring
/// splits a mapping as it would in a heap), and the doorbell page last.
pub const MAP_PAGES: usize = 128;

/// The primitives, in the paper's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// Protect one page (read-only).
    Prot1,
    /// Protect 100 pages.
    Prot100,
    /// Un-protect 100 pages.
    Unprot100,
    /// A write to a protected page until the handler runs.
    Trap,
    /// A write to a protected page, the handler un-protects it, the write completes.
    Fault,
    /// A fault whose handler un-protects its page and protects another.
    Appel1,
    /// Protect 100 pages, then fault on each (handler un-protects): per page.
    Appel2,
}

impl Primitive {
    /// Every primitive.
    pub const ALL: [Primitive; 7] = [
        Primitive::Prot1,
        Primitive::Prot100,
        Primitive::Unprot100,
        Primitive::Trap,
        Primitive::Fault,
        Primitive::Appel1,
        Primitive::Appel2,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Primitive::Prot1 => "prot1",
            Primitive::Prot100 => "prot100",
            Primitive::Unprot100 => "unprot100",
            Primitive::Trap => "trap",
            Primitive::Fault => "fault",
            Primitive::Appel1 => "appel1",
            Primitive::Appel2 => "appel2",
        }
    }
}

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since this run's epoch (CLOCK_MONOTONIC, the same on every
/// CPU): stamps taken in a handler and in the faulting thread compare.
pub fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// What a side's fault handler shares with the measuring thread.
pub struct Ctl {
    base: AtomicUsize,
    /// Appel1: the handler also protects the ring's previous page.
    swap: AtomicBool,
    /// When the handler last started (`now_ns`).
    handled_ns: AtomicU64,
    /// Faults served.
    faults: AtomicU64,
    /// Non-zero while the measuring thread is inside a faulting block (a
    /// sequence number, for the watchdog).
    inside: AtomicU64,
    seq: AtomicU64,
}

/// A fault the handler could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address is not in the ring.
    #[error("fault at {0:#x} outside the ring")]
    NotOurs(usize),
    /// The protection call failed.
    #[error("changing the protection failed: {0}")]
    Protect(io::Error),
}

impl Ctl {
    /// Disarmed.
    pub const fn new() -> Ctl {
        Ctl {
            base: AtomicUsize::new(0),
            swap: AtomicBool::new(false),
            handled_ns: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            inside: AtomicU64::new(0),
            seq: AtomicU64::new(0),
        }
    }

    /// Serves faults in the ring starting at `base` (0: none).
    pub fn arm(&self, base: usize) {
        now_ns();
        self.base.store(base, Ordering::Release);
    }

    /// The handler's work: stamp the time, then (Appel1) protect the ring's
    /// previous page and un-protect the faulting one with `set(addr, len,
    /// protected)`, which resumes the faulting thread.
    pub fn serve(
        &self,
        addr: usize,
        set: impl Fn(usize, usize, bool) -> io::Result<()>,
    ) -> Result<(), ServeError> {
        self.handled_ns.store(now_ns(), Ordering::Release);
        let base = self.base.load(Ordering::Acquire);
        let page = addr.wrapping_sub(base) / PAGE;
        if base == 0 || page >= RING {
            return Err(ServeError::NotOurs(addr));
        }
        if self.swap.load(Ordering::Acquire) {
            let prev = base + (page + RING - 1) % RING * PAGE;
            set(prev, PAGE, true).map_err(ServeError::Protect)?;
        }
        // Counted before the page is un-protected: that wakes the faulting
        // thread, which reads the count next.
        self.faults.fetch_add(1, Ordering::AcqRel);
        set(base + page * PAGE, PAGE, false).map_err(ServeError::Protect)
    }

    /// The measuring thread enters a faulting block.
    pub fn enter(&self) {
        let s = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        self.inside.store(s, Ordering::Release);
    }

    /// It left the block.
    pub fn leave(&self) {
        self.inside.store(0, Ordering::Release);
    }

    /// The faulting block the measuring thread is in (0: none).
    pub fn inside(&self) -> u64 {
        self.inside.load(Ordering::Acquire)
    }
}

/// One way of protecting pages and serving faults on them.
pub trait Side {
    /// Its name in reports and errors.
    fn name(&self) -> &'static str;
    /// The first page of the ring.
    fn base(&self) -> usize;
    /// Protects (`true`: read-only, write-protected) or un-protects `[addr, addr+len)`.
    fn set(&self, addr: usize, len: usize, protected: bool) -> io::Result<()>;
    /// The state its handler serves faults with.
    fn ctl(&self) -> &Ctl;
    /// Whether the side is still sound after a faulting block (its handler
    /// alive, no watchdog fired).
    fn check(&self) -> Result<(), Error>;
}

fn page(s: &dyn Side, i: usize) -> usize {
    s.base() + (i % RING) * PAGE
}

fn set(s: &dyn Side, addr: usize, len: usize, protected: bool) -> Result<(), Error> {
    s.set(addr, len, protected).map_err(|source| Error::Sys {
        side: s.name(),
        call: if protected { "protect" } else { "unprotect" },
        source,
    })
}

/// A write to `addr`, which may fault.
fn store(addr: usize, v: usize) {
    compiler_fence(Ordering::SeqCst);
    // SAFETY: `addr` is a page of the side's ring, mapped for the side's
    // life; a fault there is served by its handler.
    unsafe { std::ptr::write_volatile(addr as *mut u8, v as u8) };
    compiler_fence(Ordering::SeqCst);
}

/// Runs `block` (which faults `expect` times) inside the watchdog's view,
/// then checks every fault reached the handler.
fn faulting<T>(
    s: &dyn Side,
    p: Primitive,
    expect: u64,
    block: impl FnOnce() -> T,
) -> Result<T, Error> {
    let before = s.ctl().faults.load(Ordering::Acquire);
    s.ctl().enter();
    let out = block();
    s.ctl().leave();
    s.check()?;
    let seen = s.ctl().faults.load(Ordering::Acquire) - before;
    if seen != expect {
        return Err(Error::Lost {
            side: s.name(),
            primitive: p.name(),
            expect,
            seen,
        });
    }
    Ok(out)
}

/// Prot1: protect one page (timed), un-protect it again (not timed).
pub fn prot1(s: &dyn Side, reps: usize) -> Result<Vec<u64>, Error> {
    (0..reps)
        .map(|i| {
            let a = page(s, i);
            let t = Instant::now();
            set(s, a, PAGE, true)?;
            let ns = t.elapsed().as_nanos() as u64;
            set(s, a, PAGE, false)?;
            Ok(ns)
        })
        .collect()
}

/// Prot100 and Unprot100: protect the ring in one call, un-protect it in one call.
pub fn prot100(s: &dyn Side, reps: usize) -> Result<(Vec<u64>, Vec<u64>), Error> {
    let (mut p, mut u) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let t = Instant::now();
        set(s, s.base(), RING * PAGE, true)?;
        p.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        set(s, s.base(), RING * PAGE, false)?;
        u.push(t.elapsed().as_nanos() as u64);
    }
    Ok((p, u))
}

/// Trap and Fault from the same faults: a page is protected (not timed); a
/// write to it; Trap until the handler's first stamp, Fault until the write
/// completed (the handler un-protected the page and the thread resumed).
pub fn trap_fault(s: &dyn Side, reps: usize) -> Result<(Vec<u64>, Vec<u64>), Error> {
    let (mut trap, mut fault) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    s.ctl().swap.store(false, Ordering::Release);
    for i in 0..reps {
        let a = page(s, i);
        set(s, a, PAGE, true)?;
        let (t0, t2) = faulting(s, Primitive::Fault, 1, || {
            let t0 = now_ns();
            store(a, i);
            (t0, now_ns())
        })?;
        let t1 = s.ctl().handled_ns.load(Ordering::Acquire);
        trap.push(t1.saturating_sub(t0));
        fault.push(t2 - t0);
    }
    Ok((trap, fault))
}

/// Appel1: the whole ring protected; a write to each page in turn, whose
/// handler protects the previous page and un-protects this one.
pub fn appel1(s: &dyn Side, reps: usize) -> Result<Vec<u64>, Error> {
    set(s, s.base(), RING * PAGE, true)?;
    s.ctl().swap.store(true, Ordering::Release);
    let times = faulting(s, Primitive::Appel1, reps as u64, || {
        (0..reps)
            .map(|i| {
                let a = page(s, i);
                let t = Instant::now();
                store(a, i);
                t.elapsed().as_nanos() as u64
            })
            .collect()
    });
    s.ctl().swap.store(false, Ordering::Release);
    set(s, s.base(), RING * PAGE, false)?;
    times
}

/// Appel2: protect the ring in one call, then write to each of its pages
/// (the handler un-protects each); per page (the round's time / [`RING`]).
pub fn appel2(s: &dyn Side, rounds: usize) -> Result<Vec<u64>, Error> {
    s.ctl().swap.store(false, Ordering::Release);
    let mut times = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let t = Instant::now();
        set(s, s.base(), RING * PAGE, true)?;
        faulting(s, Primitive::Appel2, RING as u64, || {
            for p in 0..RING {
                store(page(s, p), r);
            }
        })?;
        times.push(t.elapsed().as_nanos() as u64 / RING as u64);
    }
    Ok(times)
}
