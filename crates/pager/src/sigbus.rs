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

use std::sync::{Arc, Once, RwLock};

use crate::engine::Shared;
use crate::handler;
use crate::sys::{self, FLAG_WRITE};

/// Regions served in the faulting thread: `(start, end, shared)`.
static REGIONS: RwLock<Vec<(usize, usize, Arc<Shared>)>> = RwLock::new(Vec::new());
static INSTALL: Once = Once::new();
static mut PREVIOUS: Option<libc::sigaction> = None;

/// Serves faults of `shared`'s application view in the faulting thread.
pub fn register(shared: Arc<Shared>) -> std::io::Result<()> {
    let mut err = None;
    INSTALL.call_once(|| match sys::install_sigbus(on_sigbus) {
        // SAFETY: written once, before any region is registered, and only
        // read by the handler for faults outside every region.
        Ok(old) => unsafe { PREVIOUS = Some(old) },
        Err(e) => err = Some(e),
    });
    if let Some(e) = err {
        return Err(e);
    }
    let mut regions = REGIONS.write().unwrap_or_else(|p| p.into_inner());
    regions.push((shared.app, shared.app + shared.map_len, shared));
    Ok(())
}

/// Stops serving `shared`'s faults.
pub fn unregister(shared: &Arc<Shared>) {
    let mut regions = REGIONS.write().unwrap_or_else(|p| p.into_inner());
    regions.retain(|(_, _, s)| !Arc::ptr_eq(s, shared));
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: called by the kernel as a SA_SIGINFO handler with its arguments.
    let (addr, write) = unsafe { sys::fault_of(info, ctx) };
    let shared = {
        let regions = REGIONS.read().unwrap_or_else(|p| p.into_inner());
        regions
            .iter()
            .find(|(a, b, _)| (*a..*b).contains(&addr))
            .map(|(_, _, s)| s.clone())
    };
    let Some(sh) = shared else {
        // Not ours: hand the fault to whoever had SIGBUS before; returning
        // re-executes the access and raises it again under that action.
        // SAFETY: PREVIOUS was set before the handler was installed.
        match unsafe { &*std::ptr::addr_of!(PREVIOUS) } {
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
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
        return;
    };
    // No WP flag here: a write to a mapped, write-protected page is told
    // apart by UFFDIO_CONTINUE answering EEXIST (see handler::map_access).
    let flags = if write { FLAG_WRITE } else { 0 };
    let t0 = std::time::Instant::now();
    // The faulting thread serves its own fault: never stale.
    handler::serve(&sh, addr, flags, u64::MAX);
    sh.stats.latency.record(t0.elapsed().as_nanos() as u64);
}
