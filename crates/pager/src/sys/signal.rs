//! Signals: the faulting-thread service's SIGBUS handler and what a fault's
//! siginfo says, and keeping the application's signals off pager threads.

use std::io;

use super::check;

/// The signature of a SA_SIGINFO handler.
pub type SigHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for SIGBUS (SA_SIGINFO | SA_NODEFER); returns the previous action.
pub fn install_sigbus(handler: SigHandler) -> io::Result<libc::sigaction> {
    install_action(libc::SIGBUS, handler)
}

/// Installs `handler` for SIGBUS as [`install_sigbus`] does, and hands the
/// action it replaced to `record` before the calling thread can take a
/// SIGBUS under `handler`: SIGBUS is blocked in the calling thread from
/// before the exchange until `record` has returned (a SIGBUS sent to it
/// meanwhile stays pending and is delivered after). The exchange itself is
/// one `sigaction` call, so the action handed over is exactly the one
/// replaced, even if another thread changes SIGBUS's action at the same
/// time. Other threads may still take a SIGBUS under `handler` before
/// `record` ran: a handler that needs what `record` stores waits for it
/// (the calling thread never does, so that wait ends).
///
/// `record` must not fault (a synchronous SIGBUS while blocked kills the
/// process). `record` is not called if the install fails.
pub fn install_sigbus_recording(
    handler: SigHandler,
    record: impl FnOnce(libc::sigaction),
) -> io::Result<()> {
    // SAFETY: sigset_t is plain data, set up by sigemptyset/sigaddset
    // before use; pthread_sigmask only changes the calling thread's mask
    // and writes the old one into `saved`, live for the call.
    let saved = unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGBUS);
        let mut saved: libc::sigset_t = std::mem::zeroed();
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut saved);
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        saved
    };
    let installed = install_sigbus(handler).map(record);
    // SAFETY: `saved` is the mask pthread_sigmask returned above; setting
    // it back unblocks SIGBUS only if it was not blocked before.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut()) };
    installed
}

/// The handler SIGBUS has now (`sa_sigaction`: a function's address, or
/// `SIG_DFL`/`SIG_IGN`).
pub fn sigbus_handler() -> io::Result<usize> {
    // SAFETY: an all-zero sigaction is a valid out-parameter; a null new
    // action makes the call a query that changes nothing.
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        check(libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut cur))?;
        Ok(cur.sa_sigaction)
    }
}

/// Restores a SIGBUS action saved by [`install_sigbus`].
pub fn restore_sigbus(old: &libc::sigaction) {
    restore_action(libc::SIGBUS, old)
}

/// Installs `handler` for signal `sig` (SA_SIGINFO | SA_NODEFER); returns the
/// previous action. The benchmarks use it for SIGSEGV (`bench appel-li`).
pub fn install_action(sig: libc::c_int, handler: SigHandler) -> io::Result<libc::sigaction> {
    // SAFETY: all-zero sigaction structs are valid; sigaction reads `new` and
    // writes `old`, both live for the call.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        check(libc::sigaction(sig, &new, &mut old))?;
        Ok(old)
    }
}

/// Restores the action of `sig` saved by [`install_action`].
pub fn restore_action(sig: libc::c_int, old: &libc::sigaction) {
    // SAFETY: `old` is a valid sigaction returned by the kernel.
    unsafe { libc::sigaction(sig, old, std::ptr::null_mut()) };
}

/// Sets the action of `sig` back to the default (from a signal handler that
/// cannot serve its fault: the access faults again and the process dies
/// rather than looping).
pub fn default_action(sig: libc::c_int) {
    // SAFETY: an all-zero sigaction with SIG_DFL is valid.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    restore_action(sig, &dfl);
}

/// The faulting address and whether the access was a write (x86-64: bit 1 of
/// the page-fault error code; elsewhere unknown, reported as a read).
///
/// # Safety
/// `info` and `ctx` must be the arguments of a SA_SIGINFO handler invocation.
pub unsafe fn fault_of(info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> (usize, bool) {
    // SAFETY: the kernel passes a valid siginfo for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    #[cfg(target_arch = "x86_64")]
    let write = {
        let uc = ctx as *const libc::ucontext_t;
        // SAFETY: the kernel passes a valid ucontext for SA_SIGINFO handlers.
        unsafe { (*uc).uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0 }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let write = {
        let _ = ctx;
        false
    };
    (addr, write)
}

/// Blocks every asynchronous signal in the calling thread, so that the
/// application's signals (a timer, a Ctrl-C) go to its own threads and never
/// interrupt a pager thread; faults' signals (SIGBUS, SIGSEGV, ...) stay open.
pub fn block_async_signals() {
    // SAFETY: sigset_t is plain data set up by sigfillset/sigdelset before
    // use; pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for sig in [
            libc::SIGBUS,
            libc::SIGSEGV,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
            libc::SIGABRT,
        ] {
            libc::sigdelset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Whether a SIGBUS was raised by userfaultfd for a missing page
/// (`BUS_ADRERR`), not by a poisoned page or anything else.
///
/// # Safety
/// `info` must be the siginfo of a SIGBUS handler invocation.
pub unsafe fn is_userfault(info: *const libc::siginfo_t) -> bool {
    // SAFETY: the kernel passes a valid siginfo.
    unsafe { (*info).si_code == libc::BUS_ADRERR }
}
