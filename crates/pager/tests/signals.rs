//! Signals arriving while faults are served (docs/lifecycle.md): a
//! `SIGALRM` every millisecond, its handler installed without `SA_RESTART`
//! so that interrupted system calls really fail with EINTR, during an
//! integrity run (two threads, a million random reads and writes on a
//! region four times its budget): no fault lost, no wrong data, the file
//! equal to the shadow copy. Each run in its own process: the timer and
//! the handler are the process's.

mod common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

const OPS: usize = 1_000_000;
const WATCHDOG: Duration = Duration::from_secs(60);

static ALARMS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_alarm(_: i32) {
    ALARMS.fetch_add(1, SeqCst);
}

/// Starts a `SIGALRM` every `period` (no `SA_RESTART`).
fn alarm_storm(period: Duration) {
    // SAFETY: a zeroed sigaction with a plain handler, and a timer of this
    // process; both are plain system calls with valid arguments.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(i32) = count_alarm;
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = 0;
        assert_eq!(libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()), 0);
        let tick = libc::timeval {
            tv_sec: 0,
            tv_usec: period.as_micros() as libc::suseconds_t,
        };
        let timer = libc::itimerval {
            it_interval: tick,
            it_value: tick,
        };
        assert_eq!(
            libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()),
            0
        );
    }
}

fn stop_storm() {
    // SAFETY: an all-zero itimerval stops the timer.
    unsafe {
        let off: libc::itimerval = std::mem::zeroed();
        libc::setitimer(libc::ITIMER_REAL, &off, std::ptr::null_mut());
    }
}

fn file_region_under_storm(service: FaultService) {
    alarm_storm(Duration::from_millis(1));
    let len = 1024 * PAGE_SIZE + 1000;
    let out = hammer_file_region("alarm", 31, len, "lru", 2, OPS, |o| {
        o.with_fault_service(service)
    });
    stop_storm();
    let alarms = ALARMS.load(SeqCst);
    println!("alarms {alarms}");
    assert!(alarms > 100, "the storm never blew: {alarms} alarms");
    assert!(out.stats.evictions > 500, "{:?}", out.stats);
}

#[test]
fn test_alarm_storm_loses_no_fault_with_handler_threads() {
    succeeds_in_child_process(
        "test_alarm_storm_loses_no_fault_with_handler_threads",
        WATCHDOG,
        || file_region_under_storm(FaultService::HandlerThreads),
    );
}

#[test]
fn test_alarm_storm_loses_no_fault_in_the_faulting_thread() {
    succeeds_in_child_process(
        "test_alarm_storm_loses_no_fault_in_the_faulting_thread",
        WATCHDOG,
        || file_region_under_storm(FaultService::FaultingThread),
    );
}

#[test]
fn test_alarm_storm_loses_no_fault_of_anonymous_memory() {
    succeeds_in_child_process(
        "test_alarm_storm_loses_no_fault_of_anonymous_memory",
        WATCHDOG,
        || {
            alarm_storm(Duration::from_millis(1));
            let len = 1024 * PAGE_SIZE;
            let region = Region::map(RegionOptions::new(
                Backing::Anonymous { len },
                len / 4,
                "clock",
            ))
            .unwrap();
            let shadow = shadow_of(&vec![0u8; len]);
            let bad = hammer(region.as_ptr(), len, &shadow, 2, OPS);
            stop_storm();
            assert_eq!(bad, 0, "{:?}", region.stats());
            // SAFETY: the region is mapped for `len` bytes; no thread writes now.
            let now = unsafe { std::slice::from_raw_parts(region.as_ptr(), len) }.to_vec();
            assert_eq!(diff(&now, &image(&shadow, &vec![0u8; len])), 0);
            assert!(ALARMS.load(SeqCst) > 100);
            region.unmap().unwrap();
        },
    );
}
