//! The process and its threads: event descriptors, exit and fork hooks,
//! CPU affinity, and the resource counters the benchmarks read.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::{check, restarting};

/// A new eventfd (used to stop handler threads).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes two integers and returns a new fd or -1.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` is freshly created and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Signals an eventfd.
pub fn eventfd_signal(fd: RawFd) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    let n = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Major and minor faults of the whole process so far (`getrusage`).
pub fn faults_self() -> (u64, u64) {
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_majflt as u64, ru.ru_minflt as u64)
}

/// CPU time (user and system) of the whole process so far, every thread
/// included (`getrusage`), microseconds.
pub fn cpu_us_self() -> u64 {
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

/// This thread's id (`gettid`).
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// CPU time of this thread, ns: unlike wall time it excludes the time the
/// thread waits for a core, which on a shared 2-core machine is most noise.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This thread's CPU affinity, to put back with [`set_affinity`].
pub fn affinity() -> io::Result<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is an empty set; the kernel writes at
    // most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        check(libc::sched_getaffinity(
            0,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ))?;
        Ok(set)
    }
}

/// Sets this thread's CPU affinity.
pub fn set_affinity(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) })?;
    Ok(())
}

/// The CPUs this thread may run on, at most `max`.
pub fn allowed_cpus(max: usize) -> io::Result<Vec<usize>> {
    let set = affinity()?;
    // SAFETY: CPU_ISSET reads inside the set for any cpu below CPU_SETSIZE.
    let allowed = |c: usize| unsafe { libc::CPU_ISSET(c, &set) };
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| allowed(c))
        .take(max)
        .collect())
}

/// Keeps this thread to CPU `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET writes inside
    // it for any cpu below CPU_SETSIZE, which the caller's cpu came from.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        set
    };
    set_affinity(&set)
}

/// Pins this thread to the CPU it runs on now. Threads it creates afterwards
/// inherit the affinity (a region's handler thread, for example).
pub fn pin_to_current_cpu() -> io::Result<()> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET writes inside it
    // for any cpu below CPU_SETSIZE, which sched_getcpu's answer is.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        set
    };
    set_affinity(&set)
}

/// Runs `f` when the process exits normally (`atexit`).
pub fn at_exit(f: extern "C" fn()) -> io::Result<()> {
    // SAFETY: registers a function with no arguments; it lives for the program.
    if unsafe { libc::atexit(f) } != 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOMEM));
    }
    Ok(())
}

/// Runs `prepare` in the forking thread before `fork`, `parent` in the parent
/// and `child` in the child after it (`pthread_atfork`).
pub fn at_fork(
    prepare: unsafe extern "C" fn(),
    parent: unsafe extern "C" fn(),
    child: unsafe extern "C" fn(),
) -> io::Result<()> {
    // SAFETY: registers three functions with no arguments that live for the program.
    let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Forks a child that exits at once (`_exit(0)`, no exit handler) and
/// waits for it: the cost of a `fork` to the process that makes it, as
/// `pagepilot bench fork` measures it.
pub fn fork_and_reap() -> io::Result<()> {
    // SAFETY: the child calls only `_exit`, which is async-signal-safe.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    restarting(|| unsafe { libc::waitpid(pid, &mut status, 0) })?;
    Ok(())
}

/// Forks a child that runs `child` and ends with `_exit` of what it
/// returns (no exit handler of the parent's runs in it; a panic ends it
/// with 101); returns the child's id to the parent.
///
/// # Safety
///
/// In a process with other threads, `child` may do only what is
/// async-signal-safe (loads and stores to memory, system calls that take
/// no lock): another thread may have held any lock (the allocator's) at
/// the fork.
pub unsafe fn fork_child(child: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
    // SAFETY: the child runs `child`, which the caller vouches for, and
    // leaves with `_exit`.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends the child at once, without the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// Waits for child `pid` to end; its exit status.
pub fn wait_child(pid: libc::pid_t) -> io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: waits for a child of this process into a live integer.
    restarting(|| unsafe { libc::waitpid(pid, &mut status, 0) })?;
    Ok(std::process::ExitStatus::from_raw(status))
}

/// Makes descriptor `fd` name `/dev/null` (close-on-exec), dropping what it
/// named: for a child after fork, in which `fd` is a copy of a parent's
/// connection. Async-signal-safe (open, dup3, close); failures leave `fd`
/// as it was.
pub fn replace_with_null(fd: RawFd) {
    // SAFETY: a NUL-terminated path; the descriptor opened is closed below.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if null < 0 {
        return;
    }
    // SAFETY: dup3 atomically closes `fd` and makes it a copy of `null`;
    // both are descriptors of this process.
    unsafe { libc::dup3(null, fd, libc::O_CLOEXEC) };
    // SAFETY: `null` was opened above and is not used after.
    unsafe { libc::close(null) };
}
