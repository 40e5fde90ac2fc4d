//! The periodic task with deadlines (RAPHA's `mpeg_play`): each period it
//! reads its frame's data, chunks of its file at scattered places (the
//! budget holds a fraction of the file, so most are read from the disk),
//! then computes for a fixed processor time. A period's deadline is the
//! next release; a frame finished after it is a miss, late by the
//! difference. Releases are fixed (a late frame delays the next one, which
//! starts at once): the decoder falls behind under contention and catches
//! up after it, as a player does. Asked to stop, it runs the periods
//! released before then and no other.

use crate::error::IoContext;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pagepilot_pager::sys;

use super::job::{now_ns, DecoderJob, DecoderOut, Frame, Priority};
use super::mapped::{self, Mapped};
use crate::BenchResult;

/// Real-time priority of the decoder under `SCHED_FIFO`.
const RT_PRIORITY: i32 = 10;
/// Its nice value under [`Priority::Nice`].
const NICE: i32 = -20;

/// Runs the decoder: prints `ready` once mapped, runs periods until its
/// standard input closes (the periods released before then, even behind
/// time), then prints its frames as JSON.
pub fn main(job: &DecoderJob) -> BenchResult {
    // Before the mapping: a region's handler threads inherit the policy.
    let realtime = reserve_processor(job.priority);
    let map = Mapped::open(&job.file, job.budget, &job.mapping)?;
    let chunk_count = (map.len() / sys::PAGE / job.chunk_pages.max(1)).max(1);
    // When the standard input closed, ns on the shared clock (0: open).
    let stop = Arc::new(AtomicU64::new(0));
    let stop_at = Arc::clone(&stop);
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        stop_at.store(now_ns(), Ordering::Release);
    });
    let faults0 = map.faults();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready").doing("telling the parent the decoder is ready")?;
        out.flush()
            .doing("telling the parent the decoder is ready")?;
    }
    let mut rng = job.seed | 1;
    let mut frames = Vec::new();
    let t0 = now_ns();
    for k in 0u64.. {
        let release = t0 + k * job.period_ns;
        let now = now_ns();
        let stop_ns = stop.load(Ordering::Acquire);
        // Every period released before the stop is run, even behind time.
        if stop_ns != 0 && release >= stop_ns {
            break;
        }
        if release > now {
            std::thread::sleep(Duration::from_nanos(release - now));
        }
        let read_start = now_ns();
        for _ in 0..job.chunks {
            let chunk = (xorshift(&mut rng) % chunk_count as u64) as usize;
            for p in chunk * job.chunk_pages..(chunk + 1) * job.chunk_pages {
                // SAFETY: chunk < chunk_count, so every page lies inside the mapping.
                let got = unsafe { map.page_number(p) };
                if got != p as u64 {
                    return Err(crate::BenchError::Measurement {
                        bench: "rapha",
                        what: format!("decoder: page {p} holds {got}, wrong data"),
                    });
                }
            }
        }
        let read_ns = now_ns().saturating_sub(read_start);
        compute(job.compute_ns);
        frames.push(Frame {
            release_ns: release,
            finish_ns: now_ns(),
            read_ns,
        });
    }
    let faults = map.faults().saturating_sub(faults0);
    let postponed = map.postponed();
    map.close()?;
    let out = DecoderOut {
        frames,
        realtime,
        faults,
        postponed,
        // After the unmap: its unregistration counted too.
        messages_sent: mapped::daemon_messages(),
    };
    Ok(crate::child::report(&out)?)
}

/// Gives the calling thread (and the threads it starts later) the
/// decoder's priority; whether it could (root), true for `Normal`.
fn reserve_processor(priority: Priority) -> bool {
    match priority {
        Priority::Normal => true,
        // SAFETY: PRIO_PROCESS with who 0 is the calling thread on Linux;
        // the call takes no pointer.
        Priority::Nice => unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, NICE) == 0 },
        Priority::Fifo => {
            let param = libc::sched_param {
                sched_priority: RT_PRIORITY,
            };
            // SAFETY: pid 0 is the calling thread; `param` is a valid
            // sched_param that outlives the call.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
        }
    }
}

/// Computes for `ns` of this thread's processor time: time it waits for a
/// processor does not count, so contention for the processors delays it.
fn compute(ns: u64) {
    let start = sys::thread_cpu_ns();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while sys::thread_cpu_ns().saturating_sub(start) < ns {
        for _ in 0..256 {
            x = std::hint::black_box(xorshift(&mut x));
        }
    }
}

/// Marsaglia's xorshift64.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
