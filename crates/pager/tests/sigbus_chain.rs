//! The application's own SIGBUS handler next to the faulting-thread
//! service's (docs/lifecycle.md): installed before the first region, it is
//! called for its own faults; installed after, and passing faults that are
//! not its own to the previous action (as any handler should), the regions
//! keep working. Its own SIGBUS here is a recoverable one: a touch of a
//! file mapping beyond the file's end, which the handler cures by growing
//! the file. Each scenario runs in its own process: handlers are global.

mod common;

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

/// The application's mapping: two pages of a file one page long.
static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_FD: AtomicUsize = AtomicUsize::new(0);
/// SIGBUS faults the application's handler took as its own.
static OWN_FAULTS: AtomicUsize = AtomicUsize::new(0);
/// The action it replaced, for the faults that are not its own.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn application_handler(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    let own = OWN_START.load(Ordering::SeqCst);
    if (own + PAGE_SIZE..own + 2 * PAGE_SIZE).contains(&addr) {
        OWN_FAULTS.fetch_add(1, Ordering::SeqCst);
        // Cured: the file now covers the page; the access is retried.
        // SAFETY: ftruncate is async-signal-safe; the descriptor is open.
        unsafe { libc::ftruncate(OWN_FD.load(Ordering::SeqCst) as i32, 2 * PAGE_SIZE as i64) };
        return;
    }
    let prev = PREVIOUS.load(Ordering::SeqCst);
    // SAFETY: set before this handler was installed, never freed; a
    // SA_SIGINFO action's handler takes these three arguments.
    unsafe {
        if !prev.is_null() && (*prev).sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute((*prev).sa_sigaction);
            f(sig, info, ctx);
        }
    }
}

/// Installs the application's handler, keeping the previous action.
fn install_application_handler() {
    // SAFETY: plain sigaction calls with zeroed, then filled, structures.
    unsafe {
        let old: &'static mut libc::sigaction = Box::leak(Box::new(std::mem::zeroed()));
        let mut new: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
            application_handler;
        new.sa_sigaction = handler as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        assert_eq!(libc::sigaction(libc::SIGBUS, &new, old), 0);
        PREVIOUS.store(old, Ordering::SeqCst);
    }
}

/// Maps two pages of a one-page file, the application's own mapping.
fn own_mapping(dir: &Scratch) -> (std::fs::File, *mut u8) {
    let (file, p) = map_past_end_of_one_page_file(dir);
    OWN_FD.store(file.as_raw_fd() as usize, Ordering::SeqCst);
    OWN_START.store(p as usize, Ordering::SeqCst);
    (file, p)
}

/// A faulting-thread region over a random file: every page read right,
/// and the application's SIGBUS taken by its own handler in between.
fn region_and_own_fault_both_served(handler_first: bool) {
    let dir = Scratch::new("sigbus-chain");
    if handler_first {
        install_application_handler();
    }
    let path = dir.file("data");
    let len = 256 * PAGE_SIZE;
    let data = random_file(&path, len, 5);
    let backing = Backing::File {
        path: path.clone(),
        writable: false,
    };
    let region = Region::map(
        RegionOptions::new(backing, len / 4, "clock")
            .with_fault_service(FaultService::FaultingThread),
    )
    .unwrap();
    if !handler_first {
        install_application_handler();
    }
    let (_file, own) = own_mapping(&dir);
    for round in 0..3 {
        for p in 0..len / PAGE_SIZE {
            // SAFETY: inside the region.
            let v = unsafe { region.as_ptr().add(p * PAGE_SIZE + 9).read_volatile() };
            assert_eq!(v, data[p * PAGE_SIZE + 9], "round {round} page {p}");
        }
    }
    // SAFETY: the second page of our own mapping: SIGBUS until the
    // handler grows the file, then a zero.
    let v = unsafe { own.add(PAGE_SIZE).read_volatile() };
    assert_eq!(v, 0);
    assert_eq!(OWN_FAULTS.load(Ordering::SeqCst), 1);
    assert!(region.stats().missing_faults >= 256);
    region.unmap().unwrap();
}

#[test]
fn test_application_sigbus_handler_installed_before_gets_its_own_faults() {
    succeeds_in_child_process(
        "test_application_sigbus_handler_installed_before_gets_its_own_faults",
        Duration::from_secs(30),
        || region_and_own_fault_both_served(true),
    );
}

#[test]
fn test_application_sigbus_handler_installed_after_and_chaining_keeps_regions_working() {
    succeeds_in_child_process(
        "test_application_sigbus_handler_installed_after_and_chaining_keeps_regions_working",
        Duration::from_secs(30),
        || region_and_own_fault_both_served(false),
    );
}
