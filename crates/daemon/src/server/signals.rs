//! Process-wide set-up for the daemon: SIGTERM and SIGINT stop the server
//! (a handler that only sets a flag, which the loop reads at least every
//! 100 ms; `poll` also returns early with `EINTR`), and the descriptor
//! limit raised to what the system allows, since each client and each
//! region's files hold descriptors.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the signal handler.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Whether SIGTERM or SIGINT arrived since [`stop_on_signals`].
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::Relaxed)
}

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Installs handlers so that SIGTERM and SIGINT stop every [`super::Server`]
/// running in this process (after telling their clients), instead of
/// killing the process.
pub fn stop_on_signals() -> std::io::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed `sigaction` is a valid value (no flags, empty
        // mask); the handler is an `extern "C"` function that only stores
        // to an atomic, which is async-signal-safe; no previous action is
        // read back (null).
        let result = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if result != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Raises the soft limit on open descriptors to the hard limit; returns
/// the limit now in force (`None`: unlimited).
pub fn raise_descriptor_limit() -> std::io::Result<Option<u64>> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )?;
    }
    Ok(limit.maximum)
}
