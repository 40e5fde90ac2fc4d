//! The faulting-thread service's SIGBUS handler installed while another
//! thread installs a foreign one (issue 30): neither handler is lost.
//!
//! "Never losing either handler" means, whichever of the two `sigaction`
//! calls the kernel takes first:
//! - a SIGBUS that is not pagepilot's (here: `pthread_kill(SIGBUS)`, and a
//!   touch of a file mapping beyond the file's end) reaches the foreign
//!   handler, whether it arrives during the installs or after them;
//! - a SIGBUS of a region's missing page reaches pagepilot's handler, which
//!   serves it: directly if pagepilot's was installed last, through the
//!   foreign handler's chaining to the action it replaced otherwise;
//! - SIGBUS is never reset to the default action on the way.
//!
//! Each repetition is a process of its own (the handler is installed once
//! per process), with random small delays before each install so that
//! both orders, and the instants around them, are hit. A third thread
//! keeps sending itself SIGBUS from the moment the foreign handler is in
//! place, so that a signal lands while pagepilot's handler is being put in.

mod common;

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

/// Processes run, each one race.
const REPETITIONS: usize = 200;
/// Pages of the region read after the race.
const PAGES: usize = 64;

/// The foreign code's own mapping: two pages over a file one page long.
static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_FD: AtomicUsize = AtomicUsize::new(0);
/// Faults of the own mapping the foreign handler cured.
static OWN_FAULTS: AtomicUsize = AtomicUsize::new(0);
/// `pthread_kill` SIGBUS the foreign handler took in the raising thread
/// (sent to itself) and in the mapping thread.
static KILLS_TAKEN: AtomicUsize = AtomicUsize::new(0);
static KILLS_TAKEN_BY_MAP: AtomicUsize = AtomicUsize::new(0);
/// The mapping thread's id (gettid).
static MAP_TID: AtomicUsize = AtomicUsize::new(0);
/// Signals the foreign handler passed on to the action it replaced.
static CHAINED: AtomicUsize = AtomicUsize::new(0);
/// The action the foreign handler replaced; null until published.
static FOREIGN_PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
/// Set once the foreign handler is installed (and its previous published).
static FOREIGN_IN: AtomicBool = AtomicBool::new(false);

type Handler = extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void);

/// A well-behaved foreign handler: takes its own signals, passes the rest
/// to the action it replaced.
extern "C" fn foreign_handler(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to a SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::SI_TKILL {
        // SAFETY: gettid is async-signal-safe and cannot fail.
        let tid = unsafe { libc::gettid() } as usize;
        if tid == MAP_TID.load(Ordering::SeqCst) {
            KILLS_TAKEN_BY_MAP.fetch_add(1, Ordering::SeqCst);
        } else {
            KILLS_TAKEN.fetch_add(1, Ordering::SeqCst);
        }
        return;
    }
    let own = OWN_START.load(Ordering::SeqCst);
    if own != 0 && (own + PAGE_SIZE..own + 2 * PAGE_SIZE).contains(&addr) {
        OWN_FAULTS.fetch_add(1, Ordering::SeqCst);
        // Cured: the file now covers the page; the access is retried.
        // SAFETY: ftruncate is async-signal-safe; the descriptor is open.
        unsafe { libc::ftruncate(OWN_FD.load(Ordering::SeqCst) as i32, 2 * PAGE_SIZE as i64) };
        return;
    }
    CHAINED.fetch_add(1, Ordering::SeqCst);
    let prev = FOREIGN_PREVIOUS.load(Ordering::SeqCst);
    assert_signal_safe(
        !prev.is_null(),
        b"foreign handler: a signal to chain before its install\n",
    );
    // SAFETY: published before FOREIGN_IN, never freed; the previous action
    // is a SA_SIGINFO handler (checked) taking these three arguments.
    unsafe {
        let prev = &*prev;
        let special = [libc::SIG_DFL, libc::SIG_IGN].contains(&prev.sa_sigaction);
        assert_signal_safe(
            !special && prev.sa_flags & libc::SA_SIGINFO != 0,
            b"foreign handler: a region's fault with no handler to pass it to\n",
        );
        let f: Handler = std::mem::transmute(prev.sa_sigaction);
        f(sig, info, ctx);
    }
}

/// Ends the process with a message if `ok` does not hold (from a handler).
fn assert_signal_safe(ok: bool, message: &[u8]) {
    if !ok {
        // SAFETY: write and _exit are async-signal-safe.
        unsafe {
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(3);
        }
    }
}

/// Installs the foreign handler with SIGBUS blocked in this thread until
/// the action it replaced is published (so that its own chaining never
/// sees it missing).
fn install_foreign_handler() {
    // SAFETY: plain sigaction and pthread_sigmask calls on zeroed, then
    // filled, structures; `old` is leaked, so it lives for the process.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGBUS);
        let mut mask: libc::sigset_t = std::mem::zeroed();
        assert_eq!(libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut mask), 0);
        let old: &'static mut libc::sigaction = Box::leak(Box::new(std::mem::zeroed()));
        let mut new: libc::sigaction = std::mem::zeroed();
        let handler: Handler = foreign_handler;
        new.sa_sigaction = handler as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut new.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGBUS, &new, old), 0);
        FOREIGN_PREVIOUS.store(old, Ordering::SeqCst);
        FOREIGN_IN.store(true, Ordering::SeqCst);
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut()),
            0
        );
    }
}

/// Sends SIGBUS to `thread`; whichever handler takes it (the foreign one,
/// or pagepilot's passing it on to it) returns.
///
/// # Safety
/// `thread` must be alive.
unsafe fn send_sigbus(thread: libc::pthread_t) {
    // SAFETY: the caller guarantees `thread` is alive.
    assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGBUS) }, 0);
}

/// The SIGBUS handler the process has now.
fn current_sigbus_handler() -> usize {
    // SAFETY: a query of the action only (no new action).
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut cur), 0);
        cur.sa_sigaction
    }
}

/// Maps two pages of a one-page file: the foreign code's own mapping.
fn own_mapping(dir: &Scratch) -> (std::fs::File, *mut u8) {
    let (file, p) = map_past_end_of_one_page_file(dir);
    OWN_FD.store(file.as_raw_fd() as usize, Ordering::SeqCst);
    OWN_START.store(p as usize, Ordering::SeqCst);
    (file, p)
}

/// A small pseudo-random number from the process id and the clock.
fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let mut x = nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    // xorshift, a few rounds.
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Spins for `micros` microseconds (sleeping would round up to the timer).
fn spin(micros: u64) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_micros(micros) {
        std::hint::spin_loop();
    }
}

/// One race, in this process: prints which handler was installed last.
fn race_once() {
    let dir = Scratch::new("sigbus-install-race");
    let path = dir.file("data");
    let len = PAGES * PAGE_SIZE;
    let data = random_file(&path, len, 11);
    let (_file, own) = own_mapping(&dir);
    let r = seed();
    // Map's own work before its install takes a while: the foreign
    // install's delay spans it, so that either order happens.
    let (foreign_delay, map_delay) = (r % 3000, (r >> 16) % 300);

    let start = Arc::new(Barrier::new(3));
    let stop = Arc::new(AtomicBool::new(false));
    // SAFETY: gettid cannot fail; pthread_self of this (the mapping)
    // thread, which outlives the raiser (joined below).
    let (map_tid, map_thread) = unsafe { (libc::gettid() as usize, libc::pthread_self()) };
    MAP_TID.store(map_tid, Ordering::SeqCst);
    // From the moment the foreign handler is in, sends SIGBUS now and then
    // to itself (delivered before pthread_kill returns: counted exactly) and
    // otherwise to the mapping thread (delivered when its current system call
    // returns: among them the `sigaction` that installs pagepilot's
    // handler; pending signals merge, so those are counted as at least one).
    let raiser = {
        let (start, stop) = (start.clone(), stop.clone());
        std::thread::spawn(move || {
            start.wait();
            while !FOREIGN_IN.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            let (mut to_self, mut to_map) = (0usize, 0usize);
            for i in 0usize.. {
                let stopping = stop.load(Ordering::SeqCst);
                if i % 16 == 0 || stopping {
                    // SAFETY: this thread is alive.
                    unsafe { send_sigbus(libc::pthread_self()) };
                    to_self += 1;
                }
                if stopping {
                    break;
                }
                let taken = KILLS_TAKEN_BY_MAP.load(Ordering::SeqCst);
                // SAFETY: the mapping thread lives until it has joined this
                // one (after `stop`).
                unsafe { send_sigbus(map_thread) };
                to_map += 1;
                // The next one once this one was taken (or a millisecond
                // passed, the signal blocked meanwhile): the handlers are
                // SA_NODEFER, and a storm faster than they return nests
                // them until the thread's stack overflows.
                let sent = Instant::now();
                while KILLS_TAKEN_BY_MAP.load(Ordering::SeqCst) == taken
                    && sent.elapsed() < Duration::from_millis(1)
                {
                    std::hint::spin_loop();
                }
            }
            (to_self, to_map)
        })
    };
    let foreign = {
        let start = start.clone();
        std::thread::spawn(move || {
            start.wait();
            spin(foreign_delay);
            install_foreign_handler();
        })
    };
    start.wait();
    spin(map_delay);
    let region = Region::map(
        RegionOptions::new(
            Backing::File {
                path: path.clone(),
                writable: false,
            },
            len,
            "clock",
        )
        .with_fault_service(FaultService::FaultingThread),
    )
    .unwrap();
    foreign.join().unwrap();
    // A few more signals after both installs.
    spin(200);
    stop.store(true, Ordering::SeqCst);
    let (sent, sent_to_map) = raiser.join().unwrap();
    // A signal still pending for this thread was delivered when the join's
    // system calls returned.
    let taken_by_map = KILLS_TAKEN_BY_MAP.load(Ordering::SeqCst);
    assert!(
        taken_by_map <= sent_to_map && (sent_to_map == 0 || taken_by_map > 0),
        "signals to the mapping thread reach the foreign handler: {taken_by_map} of {sent_to_map}"
    );

    let handler: Handler = foreign_handler;
    let foreign_last = current_sigbus_handler() == handler as usize;
    assert_ne!(
        current_sigbus_handler(),
        libc::SIG_DFL,
        "SIGBUS was reset to the default action"
    );
    assert_eq!(
        KILLS_TAKEN.load(Ordering::SeqCst),
        sent,
        "every pthread_kill reached the foreign handler"
    );

    // pagepilot's handler serves the region's faults.
    for p in 0..PAGES {
        // SAFETY: inside the region, mapped while `region` lives.
        let v = unsafe { region.as_ptr().add(p * PAGE_SIZE + 5).read_volatile() };
        assert_eq!(v, data[p * PAGE_SIZE + 5], "page {p}");
    }
    assert!(region.stats().missing_faults >= PAGES as u64);
    let chained = CHAINED.load(Ordering::SeqCst);
    if foreign_last {
        // (Fewer than PAGES: a fault maps the pages around it too.)
        assert!(
            chained > 0,
            "the region's faults pass through the foreign handler"
        );
    } else {
        assert_eq!(
            chained, 0,
            "pagepilot's handler is the process's: nothing passes the foreign one"
        );
    }

    // The foreign handler takes its own faults and signals after it all.
    // SAFETY: the second page of the own mapping: SIGBUS until the foreign
    // handler grows the file, then a zero.
    let v = unsafe { own.add(PAGE_SIZE).read_volatile() };
    assert_eq!(v, 0);
    assert_eq!(OWN_FAULTS.load(Ordering::SeqCst), 1);
    // SAFETY: this thread is alive; the signal is the foreign handler's.
    unsafe { send_sigbus(libc::pthread_self()) };
    assert_eq!(KILLS_TAKEN_BY_MAP.load(Ordering::SeqCst), taken_by_map + 1);
    region.unmap().unwrap();
    println!(
        "race: {} last; the raiser's {sent} signals taken, {taken_by_map} of {sent_to_map} to the mapping thread",
        if foreign_last { "foreign" } else { "pagepilot" }
    );
}

#[test]
fn test_a_foreign_sigbus_handler_installed_during_the_first_map_loses_neither() {
    const NAME: &str = "test_a_foreign_sigbus_handler_installed_during_the_first_map_loses_neither";
    let (mut foreign_last, mut pagepilot_last) = (0, 0);
    for i in 0..REPETITIONS {
        let out = in_child_process(NAME, Duration::from_secs(30), race_once);
        assert!(out.succeeded(), "repetition {i}: {out:?}");
        if out.stdout.contains("race: foreign last") {
            foreign_last += 1;
        } else if out.stdout.contains("race: pagepilot last") {
            pagepilot_last += 1;
        } else {
            panic!("repetition {i} printed no outcome: {out:?}");
        }
    }
    println!("{REPETITIONS} races: foreign last {foreign_last}, pagepilot last {pagepilot_last}");
    assert_eq!(foreign_last + pagepilot_last, REPETITIONS);
    assert!(
        foreign_last > 0 && pagepilot_last > 0,
        "both orders: foreign last {foreign_last}, pagepilot last {pagepilot_last}"
    );
}
