//! The floor of a fault served by the faulting thread: a userfaultfd registered with
//! `UFFD_FEATURE_SIGBUS` over a memfd's shared mapping, a SIGBUS handler that does nothing but
//! one `UFFDIO_ZEROPAGE` (timed). What a fault costs beyond that ioctl is the kernel's fault
//! entry, the signal's delivery and `sigreturn`: the Cache Kernel's "delivery" part for this
//! design. `pagepilot bench faults` subtracts this probe from the real pager's faulting-thread
//! fault to get pagepilot's own bookkeeping (region lookup, lock, policy, statistics).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use pagepilot_pager::sys::{self, Mapping, Uffd, PAGE};

/// The probe being run: its userfaultfd, its view and where the handler stores ioctl times.
static UFFD: AtomicPtr<Uffd> = AtomicPtr::new(std::ptr::null_mut());
static BASE: AtomicUsize = AtomicUsize::new(0);
static PAGES: AtomicUsize = AtomicUsize::new(0);
static IOCTL_NS: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());

/// Per-fault times of one probe run, ns.
pub struct SigSplit {
    /// What the application waits: the access, start to end.
    pub total: Vec<u64>,
    /// The `UFFDIO_ZEROPAGE` ioctl inside the handler (allocate, zero, map).
    pub ioctl: Vec<u64>,
    /// Wall time of the whole first-touch loop.
    pub wall_ns: u64,
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: called by the kernel as a SA_SIGINFO handler with its arguments.
    let (addr, _) = unsafe { sys::fault_of(info, ctx) };
    let base = BASE.load(Ordering::Acquire);
    let page = addr.wrapping_sub(base) / PAGE;
    let uffd = UFFD.load(Ordering::Acquire);
    if uffd.is_null() || page >= PAGES.load(Ordering::Acquire) {
        // Not the probe's: let the default action kill the process (no probe runs).
        // SAFETY: an all-zero sigaction with SIG_DFL is valid.
        let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        sys::restore_sigbus(&dfl);
        return;
    }
    let t = Instant::now();
    // SAFETY: `uffd` points to the probe's Uffd, which outlives the run (cleared before drop).
    let _ = unsafe { &*uffd }.zero_page(base + page * PAGE, false);
    let ns = t.elapsed().as_nanos() as u64;
    // SAFETY: IOCTL_NS points to PAGES counters, alive while UFFD is set.
    unsafe { (*IOCTL_NS.load(Ordering::Acquire).add(page)).store(ns, Ordering::Relaxed) };
}

/// Runs the probe over `pages` fresh pages (one write-touch each). Installs its own SIGBUS
/// action for the run and restores the previous one: no faulting-thread region may be in use
/// meanwhile (the benchmark runs it between the pager's runs, on one thread).
pub fn sigbus_probe(pages: usize) -> io::Result<SigSplit> {
    let len = pages * PAGE;
    let fd = sys::memfd("pagepilot-sigprobe", len)?;
    let app = Mapping::shared(fd.as_raw_fd(), len, true)?;
    let (uffd, _, _) =
        Uffd::open(sys::FEATURE_MISSING_SHMEM | sys::FEATURE_SIGBUS).map_err(io::Error::other)?;
    uffd.register(app.ptr() as usize, len, sys::MODE_MISSING)?;
    let ioctl: Box<[AtomicU64]> = (0..pages).map(|_| AtomicU64::new(0)).collect();
    IOCTL_NS.store(ioctl.as_ptr().cast_mut(), Ordering::Release);
    BASE.store(app.ptr() as usize, Ordering::Release);
    PAGES.store(pages, Ordering::Release);
    UFFD.store((&uffd as *const Uffd).cast_mut(), Ordering::Release);
    let old = sys::install_sigbus(on_sigbus);
    let run = old
        .as_ref()
        .map_err(|e| io::Error::new(e.kind(), e.to_string()))
        .map(|_| {
            let start = Instant::now();
            let total = (0..pages)
                .map(|p| {
                    let t = Instant::now();
                    // SAFETY: p < pages: inside the probe's view, served by on_sigbus.
                    unsafe { std::ptr::write_volatile(app.ptr().add(p * PAGE), 1) };
                    t.elapsed().as_nanos() as u64
                })
                .collect::<Vec<u64>>();
            (total, start.elapsed().as_nanos() as u64)
        });
    if let Ok(old) = &old {
        sys::restore_sigbus(old);
    }
    UFFD.store(std::ptr::null_mut(), Ordering::Release);
    PAGES.store(0, Ordering::Release);
    IOCTL_NS.store(std::ptr::null_mut(), Ordering::Release);
    let (total, wall_ns) = run?;
    Ok(SigSplit {
        total,
        ioctl: ioctl.iter().map(|a| a.load(Ordering::Relaxed)).collect(),
        wall_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sigbus_probe_serves_every_fault_in_the_faulting_thread() {
        let s = sigbus_probe(32).expect("userfaultfd SIGBUS probe");
        assert_eq!((s.total.len(), s.ioctl.len()), (32, 32));
        // Every fault went through the handler's ioctl, which is part of the access.
        for p in 0..32 {
            assert!(s.ioctl[p] > 0 && s.ioctl[p] <= s.total[p], "page {p}");
        }
    }
}
