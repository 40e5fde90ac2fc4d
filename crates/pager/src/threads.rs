//! The region's threads: reader threads for windows read ahead (and fault
//! reads, `readers`), and the lone handler thread that blocks in `read` on the
//! userfaultfd, with the doorbell that stops it.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::MapError;
use crate::fault;
use crate::lifecycle::spawn_service;
use crate::readers::Readers;
use crate::shared::Shared;
use crate::sys::{self, PAGE};

/// Gives the region its reader threads (`Readers`), if it needs any: one
/// per prefetched window in flight (depth + 1 while the application waits
/// for one, see `fault::windows::stall`) where no io_uring reads them, and
/// `fault_readers` for the reads of missing faults (each blocks in its own
/// read). Started as jobs come, but all at once for a region served in the
/// faulting thread (its jobs are sent from a signal handler).
pub fn give_readers(
    shared: &Arc<Shared>,
    fault_readers: usize,
    in_thread: bool,
) -> Result<(), MapError> {
    let windows = if shared.tuning().async_readahead && shared.ring().is_none() {
        shared.tuning().readahead_depth + 1
    } else {
        0
    };
    let max = windows.max(fault_readers);
    if max == 0 {
        return Ok(());
    }
    let eager = if in_thread { max } else { 0 };
    let readers = Readers::new(shared, max, eager).map_err(|source| MapError::Sys {
        call: "thread spawn",
        source,
    })?;
    shared.lock().readers = Some(readers);
    Ok(())
}

/// Starts the region's handler threads waiting in epoll, one per entry of
/// `cpus`: kept to that CPU, and woken with every other idle handler by a
/// fault (the one on the faulting thread's CPU takes it first), or, for
/// `None`, floating and woken alone (exclusively).
pub fn spawn_handlers(
    shared: &Arc<Shared>,
    cpus: Vec<Option<usize>>,
) -> Result<Vec<JoinHandle<()>>, MapError> {
    let sys_err = |call| move |source| MapError::Sys { call, source };
    let stop = std::os::fd::AsRawFd::as_raw_fd(shared.stop());
    let mut handlers = Vec::new();
    for (i, cpu) in cpus.into_iter().enumerate() {
        let sh = shared.clone();
        let waiter = sys::Waiter::new(sh.views().uffd().raw(), stop, cpu.is_none())
            .map_err(sys_err("epoll"))?;
        let name = match cpu {
            Some(c) => format!("pagepilot-fault-cpu{c}"),
            None => format!("pagepilot-fault-{i}"),
        };
        let h = spawn_service(name, move || {
            // A handler that cannot keep to its CPU still serves.
            let placement = cpu.and_then(|c| Placement::kept_to(c).ok());
            fault::run(sh, waiter, placement)
        })
        .map_err(sys_err("thread spawn"))?;
        handlers.push(h);
    }
    Ok(handlers)
}

/// Starts the region's only handler thread in blocking mode, with its
/// doorbell; `None` (nothing changed) if any step fails.
pub fn spawn_blocking(shared: &Arc<Shared>) -> Option<(JoinHandle<bool>, usize)> {
    let bell = sys::map_anon_page().ok()?;
    let ready = shared
        .views()
        .uffd()
        .register(bell, PAGE, sys::MODE_MISSING)
        .is_ok()
        && shared.views().uffd().set_blocking().is_ok();
    let sh = shared.clone();
    let h = ready
        .then(|| {
            spawn_service("pagepilot-fault-0".into(), move || {
                fault::run_blocking(sh, bell)
            })
            .ok()
        })
        .flatten();
    match h {
        Some(h) => Some((h, bell)),
        None => {
            // SAFETY: the page was mapped above and nothing else knows it.
            unsafe { sys::unmap(bell, PAGE) };
            None
        }
    }
}

/// Stops a blocking handler: a thread touches the doorbell, the handler maps
/// it and returns. If the handler is gone already nobody rings; if it died
/// while the bell rang, the ringing thread stays in its fault until the
/// userfaultfd closes, so the page is left mapped for it (one page leaked).
pub fn stop_blocking(h: JoinHandle<bool>, bell: usize) {
    if h.is_finished() {
        let _ = h.join();
        // SAFETY: nobody touches the doorbell: nobody rang.
        unsafe { sys::unmap(bell, PAGE) };
        return;
    }
    let ring = spawn_service("pagepilot-stop".into(), move || {
        // SAFETY: the doorbell page stays mapped until this thread is joined.
        unsafe { std::hint::black_box((bell as *const u8).read_volatile()) }
    });
    let Ok(ring) = ring else {
        // The handler cannot be stopped: leave it blocked (it keeps the
        // region's state alive) rather than hang here.
        return;
    };
    // Only a handler that answered the bell has woken the ringing thread.
    if matches!(h.join(), Ok(true)) && ring.join().is_ok() {
        // SAFETY: both threads that could touch the doorbell are gone.
        unsafe { sys::unmap(bell, PAGE) };
    }
}

/// Where a per-CPU handler runs. Kept to its CPU while faults come one at
/// a time: the handler on the faulting thread's CPU takes the fault without
/// a cross-CPU wake-up. Free to run anywhere while windows are read ahead
/// of a stream: the work it does after waking the faulting thread (evicting
/// for the next windows, submitting their reads) then runs beside the
/// application instead of in its place (`bench scan`, cold sequential
/// first touches of 1 GiB, one thread: 339k pages/s free against 287k
/// kept, while kept handlers serve random first touches in 8.6 us against
/// 15.5 us free, `bench faults` in the same hour).
pub struct Placement {
    cpu: usize,
    /// The CPUs the handler may run on when free.
    anywhere: libc::cpu_set_t,
    kept: bool,
}

impl Placement {
    /// Keeps this thread to `cpu`, remembering where it may run.
    pub fn kept_to(cpu: usize) -> std::io::Result<Placement> {
        let anywhere = sys::affinity()?;
        sys::pin_to_cpu(cpu)?;
        Ok(Placement {
            cpu,
            anywhere,
            kept: true,
        })
    }

    /// Frees this thread while `streaming` (windows read ahead), keeps it to
    /// its CPU again after. A failed change leaves it where it is.
    pub fn follow(&mut self, streaming: bool) {
        if streaming == self.kept {
            let changed = if streaming {
                sys::set_affinity(&self.anywhere)
            } else {
                sys::pin_to_cpu(self.cpu)
            };
            if changed.is_ok() {
                self.kept = !streaming;
            }
        }
    }
}
