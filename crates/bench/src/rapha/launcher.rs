//! The task launched beside the decoder (RAPHA's netscape): it maps a large
//! file and faults through every page of it, in a scattered order (an
//! application's first touches of its image), from several threads, as
//! fast as it can. A sampler records its faults and resident set every
//! sample interval (RAPHA's Figures 8-10).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pagepilot_pager::sys;
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};

use super::job::{now_ns, LauncherJob, LauncherOut, Sample};
use super::mapped::{self, Mapped};
use crate::BenchResult;

/// Runs the launcher and prints its report as JSON.
pub fn main(job: &LauncherJob) -> BenchResult {
    let start_ns = now_ns();
    let map = Mapped::open(&job.file, job.budget, &job.mapping)?;
    let pages = map.len() / sys::PAGE;
    let mut order: Vec<u32> = (0..pages as u32).collect();
    order.shuffle(&mut StdRng::seed_from_u64(job.seed));
    let threads = job.threads.clamp(1, pages.max(1));
    let done = AtomicBool::new(false);
    let faults0 = map.faults();
    let mut samples = vec![Sample {
        at_ns: start_ns,
        faults: 0,
        resident_pages: map.resident_pages(),
    }];
    let (bad, end_ns) = std::thread::scope(|s| {
        let map = &map;
        let sampler = s.spawn(|| {
            let mut out = Vec::new();
            let mut next = start_ns + job.sample_ns;
            while !done.load(Ordering::Acquire) {
                let now = now_ns();
                if now < next {
                    // Short naps: the end is noticed within a millisecond.
                    std::thread::sleep(Duration::from_nanos((next - now).min(1_000_000)));
                    continue;
                }
                out.push(Sample {
                    at_ns: now,
                    faults: map.faults().saturating_sub(faults0),
                    resident_pages: map.resident_pages(),
                });
                next += job.sample_ns;
            }
            out
        });
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let order = &order;
                s.spawn(move || {
                    let mut bad = None;
                    for &p in order.iter().skip(t).step_by(threads) {
                        // SAFETY: p < pages, inside the mapping.
                        let got = unsafe { map.page_number(p as usize) };
                        if got != p as u64 && bad.is_none() {
                            bad = Some((p, got));
                        }
                    }
                    bad
                })
            })
            .collect();
        let bad = workers
            .into_iter()
            .filter_map(|w| w.join().unwrap_or(Some((u32::MAX, 0))))
            .next();
        let end_ns = now_ns();
        done.store(true, Ordering::Release);
        samples.extend(sampler.join().unwrap_or_default());
        (bad, end_ns)
    });
    if let Some((p, got)) = bad {
        return Err(crate::BenchError::Measurement {
            bench: "rapha",
            what: format!("launcher: page {p} holds {got}, wrong data (or a thread died)"),
        });
    }
    let faults = map.faults().saturating_sub(faults0);
    samples.push(Sample {
        at_ns: end_ns,
        faults,
        resident_pages: map.resident_pages(),
    });
    let postponed = map.postponed();
    map.close()?;
    let out = LauncherOut {
        start_ns,
        end_ns,
        samples,
        faults,
        postponed,
        pages: pages as u64,
        // After the unmap: its unregistration counted too.
        messages_sent: mapped::daemon_messages(),
    };
    Ok(crate::child::report(&out)?)
}
