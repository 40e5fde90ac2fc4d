//! A minimal userfaultfd pager, timestamped, to split a fault's cost as the Cache Kernel paper
//! does (delivery to the handler vs filling and mapping), plus the kernel's own faults on the
//! same kind of memory (shmem) for comparison.
//!
//! The probe has pagepilot's shape (ARCHITECTURE.md): a memfd seen by the application through
//! a `MAP_SHARED` view registered for MISSING and MINOR faults and by the handler through a
//! second view; a fault is served by filling the page through the handler's view and
//! `UFFDIO_CONTINUE` on the application's.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use pagepilot_pager::sys::{self, Mapping, Uffd, UffdMsg, PAGE};

/// How the probe's handler fills a page on a missing fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Allocate a zeroed page (anonymous memory): `MADV_POPULATE_WRITE` on the handler's view,
    /// as the pager does (a store would take a page fault in the handler's view first).
    Zero,
    /// Copy it from memory (a dataspace already in RAM) with `pwrite` into the memfd.
    Copy,
}

/// Per-fault times in ns, one entry per page.
#[derive(Default)]
pub struct Split {
    /// Access started -> access returned (what the application pays).
    pub total: Vec<u64>,
    /// Access started -> handler holds the fault message.
    pub delivery: Vec<u64>,
    /// Handler holds the message -> page filled (zero or copy; nothing for a minor fault).
    pub fill: Vec<u64>,
    /// Page filled -> the application runs again (`UFFDIO_CONTINUE` and the wake-up).
    pub map: Vec<u64>,
    /// Duration of the `UFFDIO_CONTINUE` ioctl alone, as the handler sees it.
    pub continue_ioctl: Vec<u64>,
    /// Time the application thread spent runnable but waiting for a CPU during the phase
    /// (`/proc/thread-self/schedstat`): a hand-off's wake-ups wait behind other processes.
    pub app_wait_ns: u64,
    /// Wall time of the phase's touch loop.
    pub wall_ns: u64,
}

/// Both phases of one probe run, and the handler thread's run-queue wait over the run.
pub struct ProbeRun {
    /// The write-touch phase: missing faults.
    pub missing: Split,
    /// The write-touch phase after `MADV_DONTNEED`: minor faults.
    pub minor: Split,
    /// Time the handler thread spent runnable but waiting for a CPU, whole run.
    pub handler_wait_ns: u64,
}

/// Time the calling thread has spent runnable, waiting for a CPU, ns (field 2 of
/// `/proc/thread-self/schedstat`; 0 where it cannot be read).
pub fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Timestamps shared by the application thread and the handler.
struct Stamps {
    start: Vec<AtomicU64>,
    read: Vec<AtomicU64>,
    filled: Vec<AtomicU64>,
    done: Vec<AtomicU64>,
}

impl Stamps {
    fn new(pages: usize) -> Stamps {
        let v = || (0..pages).map(|_| AtomicU64::new(0)).collect();
        Stamps {
            start: v(),
            read: v(),
            filled: v(),
            done: v(),
        }
    }
}

/// Runs the probe over `pages` pages: a write-touch of each (missing faults, filled per
/// `fill`), then `MADV_DONTNEED` and a second write-touch of each (minor faults). Returns both
/// splits.
pub fn pagepilot_probe(pages: usize, fill: Fill) -> io::Result<ProbeRun> {
    let len = pages * PAGE;
    let fd = sys::memfd("pagepilot-probe", len)?;
    let app = Mapping::shared(fd.as_raw_fd(), len, true)?;
    let pager = Mapping::shared(fd.as_raw_fd(), len, true)?;
    let source: Vec<u8> = (0..len).map(|i| (i / PAGE) as u8 ^ 0x5a).collect();
    let (uffd, _, _) = Uffd::open(sys::FEATURE_MISSING_SHMEM | sys::FEATURE_MINOR_SHMEM)
        .map_err(io::Error::other)?;
    uffd.register(app.ptr() as usize, len, sys::MODE_MISSING | sys::MODE_MINOR)?;
    let epoch = Instant::now();
    // One set per phase: a fault's flags say which phase it belongs to.
    let stamps = [Arc::new(Stamps::new(pages)), Arc::new(Stamps::new(pages))];
    let stop = Arc::new(AtomicBool::new(false));
    let app_base = app.ptr() as usize;

    std::thread::scope(|s| -> io::Result<ProbeRun> {
        let handler = {
            let (stamps, stop, uffd, pager, source) = (&stamps, &stop, &uffd, &pager, &source);
            let fd = fd.as_raw_fd();
            s.spawn(move || -> io::Result<u64> {
                let waited = run_delay_ns();
                while !stop.load(Ordering::Acquire) {
                    let Some((address, flags)) = read_fault_timeout(uffd, 100)? else {
                        continue;
                    };
                    let t_read = epoch.elapsed().as_nanos() as u64;
                    let page = (address - app_base) / PAGE;
                    if page >= pages {
                        return Err(io::Error::other("fault outside the probe region"));
                    }
                    let minor = flags & sys::FLAG_MINOR != 0;
                    let stamps = &stamps[usize::from(minor)];
                    if !minor {
                        let off = page * PAGE;
                        match fill {
                            Fill::Zero => pager.populate_write(off, PAGE)?,
                            // SAFETY: the slice holds PAGE readable bytes.
                            Fill::Copy => unsafe {
                                sys::pwrite_all(
                                    fd,
                                    source[off..off + PAGE].as_ptr(),
                                    PAGE,
                                    off as u64,
                                )?
                            },
                        }
                    }
                    let t_filled = epoch.elapsed().as_nanos() as u64;
                    // Stamps first: the application may run as soon as CONTINUE maps the page.
                    stamps.read[page].store(t_read, Ordering::Relaxed);
                    stamps.filled[page].store(t_filled, Ordering::Release);
                    match uffd.continue_range(app_base + page * PAGE, PAGE, false) {
                        // Another thread already mapped it: the faulting thread is woken anyway.
                        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
                        _ => {}
                    }
                    stamps.done[page].store(epoch.elapsed().as_nanos() as u64, Ordering::Release);
                }
                Ok(run_delay_ns().saturating_sub(waited))
            })
        };
        let touch = |phase: usize| -> (Vec<u64>, u64, u64) {
            let stamps = &stamps[phase];
            let (waited, start) = (run_delay_ns(), Instant::now());
            let mut end = Vec::with_capacity(pages);
            for p in 0..pages {
                stamps.start[p].store(epoch.elapsed().as_nanos() as u64, Ordering::Release);
                // SAFETY: p < pages: inside the application's view, which the handler serves.
                unsafe { std::ptr::write_volatile(app.ptr().add(p * PAGE), 1) };
                end.push(epoch.elapsed().as_nanos() as u64);
            }
            let wall = start.elapsed().as_nanos() as u64;
            (end, run_delay_ns().saturating_sub(waited), wall)
        };
        let missing = touch(0);
        let minor = app.dontneed().map(|()| touch(1));
        stop.store(true, Ordering::Release);
        let handler_wait_ns = handler
            .join()
            .map_err(|_| io::Error::other("probe handler panicked"))??;
        let minor = minor?;
        // After the join: the handler's last stamps are visible.
        Ok(ProbeRun {
            missing: split(&stamps[0], &missing),
            minor: split(&stamps[1], &minor),
            handler_wait_ns,
        })
    })
}

/// Waits up to `timeout_ms` for the next page fault: (address, `FLAG_*` bits).
fn read_fault_timeout(uffd: &Uffd, timeout_ms: i32) -> io::Result<Option<(usize, u64)>> {
    if !uffd.wait_readable(timeout_ms)? {
        return Ok(None);
    }
    // Non-blocking read after poll: a fault can be woken (and gone) before it is read.
    let mut msg = [UffdMsg::default()];
    match uffd.read_msgs(&mut msg) {
        Ok(0) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "short userfaultfd read",
        )),
        Ok(_) => msg[0]
            .pagefault()
            .map(Some)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not a page fault event")),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn split(st: &Stamps, &(ref end, app_wait_ns, wall_ns): &(Vec<u64>, u64, u64)) -> Split {
    let mut s = Split {
        app_wait_ns,
        wall_ns,
        ..Split::default()
    };
    for (p, &e) in end.iter().enumerate() {
        let start = st.start[p].load(Ordering::Acquire);
        let filled = st.filled[p].load(Ordering::Acquire).max(start);
        let read = st.read[p].load(Ordering::Relaxed).clamp(start, filled);
        let done = st.done[p].load(Ordering::Acquire).max(filled);
        s.total.push(e - start);
        s.delivery.push(read - start);
        s.fill.push(filled - read);
        s.map.push(e.saturating_sub(filled));
        s.continue_ioctl.push(done - filled);
    }
    s
}

/// The kernel's own faults on shmem: first write-touch of each page of a memfd `MAP_SHARED`
/// (allocate and zero), then a second write-touch after `MADV_DONTNEED` (map from the page
/// cache). Writes, because a read fault on shmem maps up to 16 cached pages at once
/// (fault-around): a read-touch loop would time one fault per 16 pages.
/// Returns (missing, minor) per-fault times in ns and the missing loop's wall time.
pub fn kernel_faults(pages: usize) -> io::Result<(Vec<u64>, Vec<u64>, u64)> {
    let len = pages * PAGE;
    let fd = sys::memfd("pagepilot-kernel", len)?;
    let map = Mapping::shared(fd.as_raw_fd(), len, true)?;
    let touch = || {
        (0..pages)
            .map(|p| {
                let t = Instant::now();
                // SAFETY: p < pages: inside our mapping.
                unsafe { std::ptr::write_volatile(map.ptr().add(p * PAGE), 1) };
                t.elapsed().as_nanos() as u64
            })
            .collect::<Vec<u64>>()
    };
    let start = Instant::now();
    let missing = touch();
    let wall = start.elapsed().as_nanos() as u64;
    map.dontneed()?;
    let minor = touch();
    Ok((missing, minor, wall))
}

/// The kernel's first write-touch of a fresh shmem memfd's pages in `order` (page indices, each
/// once), timed as one loop without per-page clocks: the wall time in ns. The baseline for a
/// stream of first touches (shmem has no huge pages here and a write fault maps one page).
pub fn kernel_stream(order: &[usize]) -> io::Result<u64> {
    let pages = order.iter().max().map_or(0, |&m| m + 1);
    let fd = sys::memfd("pagepilot-kernel-stream", pages.max(1) * PAGE)?;
    let map = Mapping::shared(fd.as_raw_fd(), pages.max(1) * PAGE, true)?;
    let start = Instant::now();
    for &p in order {
        // SAFETY: p < pages: inside our mapping.
        unsafe { std::ptr::write_volatile(map.ptr().add(p * PAGE), 1) };
    }
    Ok(start.elapsed().as_nanos() as u64)
}

/// The kernel's first touch of private anonymous memory (`MAP_PRIVATE | MAP_ANONYMOUS`, what
/// `malloc` hands out): per-fault times in ns and the loop's wall time.
pub fn kernel_anon_faults(pages: usize) -> io::Result<(Vec<u64>, u64)> {
    let map = Mapping::private_anon(pages * PAGE)?;
    let start = Instant::now();
    let times = (0..pages)
        .map(|p| {
            let t = Instant::now();
            // SAFETY: p < pages: inside our mapping.
            unsafe { std::ptr::write_volatile(map.ptr().add(p * PAGE), 1) };
            t.elapsed().as_nanos() as u64
        })
        .collect();
    Ok((times, start.elapsed().as_nanos() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_probe_serves_every_fault_and_keeps_the_data() {
        let ProbeRun { missing, minor, .. } =
            pagepilot_probe(64, Fill::Copy).expect("userfaultfd probe");
        assert_eq!(missing.total.len(), 64);
        assert_eq!(minor.total.len(), 64);
        // Every fault was seen and served by the handler while the access waited.
        for s in [&missing, &minor] {
            for p in 0..64 {
                assert!(
                    s.delivery[p] > 0 && s.continue_ioctl[p] > 0,
                    "page {p} not served"
                );
                assert_eq!(s.delivery[p] + s.fill[p] + s.map[p], s.total[p]);
            }
        }
    }

    #[test]
    fn test_kernel_faults_time_each_page() {
        let (missing, minor, _) = kernel_faults(32).expect("memfd");
        assert_eq!((missing.len(), minor.len()), (32, 32));
        assert!(missing.iter().all(|&t| t > 0));
    }
}
