//! The raw Linux side: a private anonymous mapping, `mprotect` to protect
//! (`PROT_READ`) and un-protect (`PROT_READ | PROT_WRITE`), and a SIGSEGV
//! handler (SA_SIGINFO) in the faulting thread that serves the fault with
//! `mprotect`: Appel and Li's setup. A fault the handler cannot serve sets
//! SIGSEGV back to its default action, so the retried access kills the
//! process instead of looping (no unbounded wait).

use std::io;

use pagepilot_pager::sys::{self, Mapping, PAGE};

use super::prims::{Ctl, Side, MAP_PAGES};
use super::Error;

static CTL: Ctl = Ctl::new();

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: called by the kernel as a SA_SIGINFO handler with its arguments.
    let (addr, _) = unsafe { sys::fault_of(info, ctx) };
    if CTL.serve(addr, |a, l, p| sys::protect(a, l, !p)).is_err() {
        sys::default_action(sig);
    }
}

/// The Linux side for one run; its SIGSEGV action is installed while it lives.
pub struct Linux {
    map: Mapping,
    old: libc::sigaction,
}

impl Linux {
    /// Maps and populates the pages, installs the SIGSEGV handler.
    pub fn new() -> Result<Linux, Error> {
        let err = |call| {
            move |source| Error::Sys {
                side: "linux",
                call,
                source,
            }
        };
        let map = Mapping::private_anon(MAP_PAGES * PAGE).map_err(err("mmap"))?;
        map.populate_write(0, map.len()).map_err(err("populate"))?;
        CTL.arm(map.ptr() as usize);
        let old = sys::install_action(libc::SIGSEGV, on_segv).map_err(err("sigaction"))?;
        Ok(Linux { map, old })
    }
}

impl Drop for Linux {
    fn drop(&mut self) {
        sys::restore_action(libc::SIGSEGV, &self.old);
        CTL.arm(0);
    }
}

impl Side for Linux {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn base(&self) -> usize {
        self.map.ptr() as usize
    }

    fn set(&self, addr: usize, len: usize, protected: bool) -> io::Result<()> {
        sys::protect(addr, len, !protected)
    }

    fn ctl(&self) -> &Ctl {
        &CTL
    }

    fn check(&self) -> Result<(), Error> {
        Ok(())
    }
}
