//! pagepilot's side: a memfd's shared mapping (as a region's), populated,
//! registered with userfaultfd in write-protect mode (`UFFDIO_REGISTER_MODE_WP`,
//! as the pager's dirty tracking); protecting is `UFFDIO_WRITEPROTECT` with
//! the WP flag, un-protecting the same without it (which also wakes a thread
//! waiting in a fault there). Faults are served two ways:
//!
//! - [`UffdThread`]: a handler thread blocked in `read(2)` on the userfaultfd,
//!   as pagepilot's blocking handler; stopped by a doorbell page (the last
//!   page, kept write-protected: a write to it is the handler's last fault).
//!   A watchdog bounds every wait: if the measuring thread stays inside one
//!   faulting block for [`WATCHDOG`], it un-protects the whole mapping (which
//!   wakes the thread) and the run fails.
//! - [`UffdSigbus`]: `UFFD_FEATURE_SIGBUS`, the fault raised as SIGBUS in the
//!   faulting thread, whose handler serves it with the same ioctl: Appel and
//!   Li's "handler in the application". A fault it cannot serve sets SIGBUS
//!   back to its default action (the process dies instead of looping).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pagepilot_pager::sys::{self, Mapping, Uffd, UffdMsg, PAGE};

use super::prims::{Ctl, Side, MAP_PAGES, RING};
use super::Error;

/// How long the measuring thread may stay in one faulting block.
pub const WATCHDOG: Duration = Duration::from_secs(5);

/// A populated memfd mapping registered for write-protect faults.
struct WpMapping {
    map: Mapping,
    _fd: OwnedFd,
}

fn wp_mapping(side: &'static str, extra: u64) -> Result<(WpMapping, Uffd), Error> {
    let err = |call| move |source| Error::Sys { side, call, source };
    let len = MAP_PAGES * PAGE;
    let fd = sys::memfd("pagepilot-appel-li", len).map_err(err("memfd"))?;
    let map = Mapping::shared(fd.as_raw_fd(), len, true).map_err(err("mmap"))?;
    map.populate_write(0, len).map_err(err("populate"))?;
    let want = sys::FEATURE_WP_SHMEM | extra;
    let (uffd, got, _) = Uffd::open(want).map_err(|e| Error::Open { side, source: e })?;
    if got & want != want {
        return Err(Error::Feature { side, want, got });
    }
    uffd.register(map.ptr() as usize, len, sys::MODE_WP)
        .map_err(err("UFFDIO_REGISTER"))?;
    Ok((WpMapping { map, _fd: fd }, uffd))
}

static THREAD_CTL: Ctl = Ctl::new();

/// The handler-thread side for one run.
pub struct UffdThread {
    wp: WpMapping,
    uffd: Arc<Uffd>,
    handler: Option<JoinHandle<io::Result<()>>>,
    watchdog: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
}

impl UffdThread {
    /// Maps, registers, protects the doorbell, starts the handler (kept to
    /// CPU `cpu` if given; `usize::MAX`: inherits the caller's affinity) and
    /// the watchdog.
    pub fn new(cpu: Option<usize>) -> Result<UffdThread, Error> {
        let side = "uffd-thread";
        let err = |call| move |source| Error::Sys { side, call, source };
        let (wp, uffd) = wp_mapping(side, 0)?;
        let uffd = Arc::new(uffd);
        let base = wp.map.ptr() as usize;
        let bell = base + (MAP_PAGES - 1) * PAGE;
        uffd.writeprotect(bell, PAGE, true)
            .map_err(err("UFFDIO_WRITEPROTECT"))?;
        uffd.set_blocking().map_err(err("fcntl"))?;
        THREAD_CTL.arm(base);
        let u = uffd.clone();
        let handler = std::thread::Builder::new()
            .name("appel-li-handler".into())
            .spawn(move || {
                if let Some(c) = cpu.filter(|&c| c != usize::MAX) {
                    sys::pin_to_cpu(c)?;
                }
                serve_loop(&u, base, bell)
            })
            .map_err(err("spawn"))?;
        let (stop, fired) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (u, s, f) = (uffd.clone(), stop.clone(), fired.clone());
        let watchdog = std::thread::Builder::new()
            .name("appel-li-watchdog".into())
            .spawn(move || watch(&u, base, &s, &f))
            .map_err(err("spawn"));
        let mut me = UffdThread {
            wp,
            uffd,
            handler: Some(handler),
            watchdog: None,
            stop,
            fired,
        };
        me.watchdog = Some(watchdog?);
        Ok(me)
    }

    /// Rings the doorbell and joins the handler and the watchdog.
    pub fn finish(mut self) -> Result<(), Error> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), Error> {
        let mut out = Ok(());
        if let Some(h) = self.handler.take() {
            if !h.is_finished() {
                let bell = self.wp.map.ptr() as usize + (MAP_PAGES - 1) * PAGE;
                THREAD_CTL.enter();
                // SAFETY: the doorbell page is mapped while `self` lives; the
                // handler (or the watchdog) resolves the fault.
                unsafe { std::ptr::write_volatile(bell as *mut u8, 1) };
                THREAD_CTL.leave();
            }
            if !self.fired.load(Ordering::Acquire) || h.is_finished() {
                out = match h.join() {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(Error::Handler(e)),
                    Err(_) => Err(Error::Handler(io::Error::other("handler panicked"))),
                };
            }
        }
        self.stop.store(true, Ordering::Release);
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
        THREAD_CTL.arm(0);
        out
    }
}

impl Drop for UffdThread {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// The handler thread: one blocking `read` per fault, served by [`Ctl::serve`].
fn serve_loop(uffd: &Uffd, base: usize, bell: usize) -> io::Result<()> {
    let mut msg = [UffdMsg::default()];
    loop {
        match uffd.read_msgs(&mut msg) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = uffd.writeprotect(base, MAP_PAGES * PAGE, false);
                return Err(e);
            }
        }
        let Some((addr, _)) = msg[0].pagefault() else {
            continue;
        };
        if addr & !(PAGE - 1) == bell {
            return uffd.writeprotect(bell, PAGE, false);
        }
        if let Err(e) = THREAD_CTL.serve(addr, |a, l, p| uffd.writeprotect(a, l, p)) {
            // Wake the faulting thread; the missing fault count fails the run.
            let _ = uffd.writeprotect(base, MAP_PAGES * PAGE, false);
            return Err(io::Error::other(e));
        }
    }
}

/// The watchdog: un-protects everything if one faulting block lasts too long.
fn watch(uffd: &Uffd, base: usize, stop: &AtomicBool, fired: &AtomicBool) {
    let (mut seen, mut since) = (0, Instant::now());
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(20));
        let inside = THREAD_CTL.inside();
        if inside == 0 || inside != seen {
            (seen, since) = (inside, Instant::now());
        } else if since.elapsed() >= WATCHDOG {
            fired.store(true, Ordering::Release);
            let _ = uffd.writeprotect(base, MAP_PAGES * PAGE, false);
            since = Instant::now();
        }
    }
}

impl Side for UffdThread {
    fn name(&self) -> &'static str {
        "uffd-thread"
    }

    fn base(&self) -> usize {
        self.wp.map.ptr() as usize
    }

    fn set(&self, addr: usize, len: usize, protected: bool) -> io::Result<()> {
        self.uffd.writeprotect(addr, len, protected)
    }

    fn ctl(&self) -> &Ctl {
        &THREAD_CTL
    }

    fn check(&self) -> Result<(), Error> {
        if self.fired.load(Ordering::Acquire) {
            return Err(Error::Watchdog { side: self.name() });
        }
        match &self.handler {
            Some(h) if !h.is_finished() => Ok(()),
            _ => Err(Error::Handler(io::Error::other("the handler thread ended"))),
        }
    }
}

static SIGBUS_CTL: Ctl = Ctl::new();
static SIGBUS_UFFD: AtomicPtr<Uffd> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: called by the kernel as a SA_SIGINFO handler with its arguments.
    let (addr, _) = unsafe { sys::fault_of(info, ctx) };
    let uffd = SIGBUS_UFFD.load(Ordering::Acquire);
    // SAFETY: a non-null pointer is the live side's boxed Uffd, cleared before it drops.
    let served = !uffd.is_null()
        && SIGBUS_CTL
            .serve(addr, |a, l, p| unsafe { &*uffd }.writeprotect(a, l, p))
            .is_ok();
    if !served {
        sys::default_action(sig);
    }
}

/// The faulting-thread (SIGBUS) side for one run; its SIGBUS action is
/// installed while it lives.
pub struct UffdSigbus {
    wp: WpMapping,
    uffd: Box<Uffd>,
    old: libc::sigaction,
}

impl UffdSigbus {
    /// Maps, registers with `UFFD_FEATURE_SIGBUS`, installs the SIGBUS handler.
    pub fn new() -> Result<UffdSigbus, Error> {
        let side = "uffd-sigbus";
        let (wp, uffd) = wp_mapping(side, sys::FEATURE_SIGBUS)?;
        let uffd = Box::new(uffd);
        SIGBUS_UFFD.store((&*uffd as *const Uffd).cast_mut(), Ordering::Release);
        SIGBUS_CTL.arm(wp.map.ptr() as usize);
        let old = sys::install_sigbus(on_sigbus).map_err(|source| Error::Sys {
            side,
            call: "sigaction",
            source,
        });
        let old = match old {
            Ok(o) => o,
            Err(e) => {
                SIGBUS_CTL.arm(0);
                SIGBUS_UFFD.store(std::ptr::null_mut(), Ordering::Release);
                return Err(e);
            }
        };
        Ok(UffdSigbus { wp, uffd, old })
    }
}

impl Drop for UffdSigbus {
    fn drop(&mut self) {
        sys::restore_sigbus(&self.old);
        SIGBUS_CTL.arm(0);
        SIGBUS_UFFD.store(std::ptr::null_mut(), Ordering::Release);
    }
}

impl Side for UffdSigbus {
    fn name(&self) -> &'static str {
        "uffd-sigbus"
    }

    fn base(&self) -> usize {
        self.wp.map.ptr() as usize
    }

    fn set(&self, addr: usize, len: usize, protected: bool) -> io::Result<()> {
        self.uffd.writeprotect(addr, len, protected)
    }

    fn ctl(&self) -> &Ctl {
        &SIGBUS_CTL
    }

    fn check(&self) -> Result<(), Error> {
        Ok(())
    }
}

const _: () = assert!(RING < MAP_PAGES - 1);
