//! One side's forks, in a child process of its own (see the parent module).

use crate::error::IoContext;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use pagepilot_pager::sys::{self, Mapping, PAGE};
use pagepilot_pager::{Backing, Region, RegionOptions};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::{ForkBenchError, ForkRun};
use crate::cgroup;
use crate::BenchResult;

/// Longest the parent waits for its region to be paged again after the
/// child is gone (the watcher looks every 100 ms).
const RESUME_LIMIT: Duration = Duration::from_secs(10);

/// How often the pager's watcher looks for regions to resume, µs.
const WATCH_PERIOD_US: u64 = 100_000;

/// How often the parent asks whether the region was resumed.
const RESUME_POLL: Duration = Duration::from_micros(200);

/// Which mapping a child measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SideName {
    /// A pagepilot region, the public API's defaults.
    Pagepilot,
    /// The kernel's `MAP_SHARED` mapping.
    Kernel,
}

/// What the parent tells a child.
#[derive(Serialize, Deserialize)]
pub(crate) struct Job {
    /// Which mapping.
    pub side: SideName,
    /// The data file.
    pub file: PathBuf,
    /// The child's memory cgroup.
    pub cgroup: PathBuf,
    /// pagepilot's budget, bytes; the cgroup's limit is this, `slack`, and
    /// what the child holds once mapped.
    pub budget: u64,
    /// See [`super::Args`]'s `--slack-mb`, bytes.
    pub slack: u64,
    /// Pages of the working set, from the file's start.
    pub working_pages: usize,
    /// Pages stored to before the fork, from the start.
    pub dirty_pages: usize,
    /// The byte stored (the warm-up fork stores another).
    pub tag: u8,
}

/// What a child reports.
#[derive(Serialize, Deserialize)]
pub(super) struct ChildOut {
    /// The measured fork.
    pub run: ForkRun,
    /// Bytes pagepilot wrote back in the measured fork.
    pub written_back: u64,
    /// The cgroup's peak charge minus what the child held once mapped.
    pub peak_bytes: u64,
}

/// A side's view of the file and what the first byte of each working-set
/// page holds.
struct Side {
    name: &'static str,
    base: *mut u8,
    expect: Vec<u8>,
}

impl Side {
    /// Loads the first byte of each working-set page: what it holds now.
    fn new(name: &'static str, base: *mut u8, working_pages: usize) -> Side {
        let expect = (0..working_pages)
            // SAFETY: p < the working set, inside the mapping.
            .map(|p| unsafe { base.add(p * PAGE).read_volatile() })
            .collect();
        Side { name, base, expect }
    }

    /// Stores `tag` in the first byte of each of the first `pages` pages.
    fn dirty(&mut self, pages: usize, tag: u8) {
        for p in 0..pages {
            // SAFETY: p < pages <= the working set, inside the mapping.
            unsafe { self.base.add(p * PAGE).write_volatile(tag) };
            self.expect[p] = tag;
        }
    }

    /// Loads the first byte of each working-set page and checks it.
    fn touch(&self) -> Result<(), ForkBenchError> {
        for (page, &want) in self.expect.iter().enumerate() {
            // SAFETY: page < the working set, inside the mapping.
            let got = unsafe { self.base.add(page * PAGE).read_volatile() };
            if got != want {
                return Err(ForkBenchError::WrongByte {
                    side: self.name,
                    page,
                    got,
                    want,
                });
            }
        }
        Ok(())
    }
}

fn timed_fork() -> std::io::Result<u64> {
    let t0 = Instant::now();
    sys::fork_and_reap()?;
    Ok(t0.elapsed().as_nanos() as u64)
}

/// One pagepilot fork: dirty, fork and reap, wait for the resume, touch again.
fn pagepilot_run(
    region: &Region,
    side: &mut Side,
    dirty_pages: usize,
    tag: u8,
) -> Result<ForkRun, crate::BenchError> {
    side.touch()?;
    side.dirty(dirty_pages, tag);
    let resumes = region.stats().resumes;
    let fork_ns = timed_fork().doing("forking")?;
    let reaped = Instant::now();
    while region.stats().resumes == resumes {
        if reaped.elapsed() > RESUME_LIMIT {
            return Err(ForkBenchError::NoResume(RESUME_LIMIT).into());
        }
        std::thread::sleep(RESUME_POLL);
    }
    let resume_wait_ns = reaped.elapsed().as_nanos() as u64;
    let faults = region.stats().missing_faults;
    let t0 = Instant::now();
    side.touch()?;
    let retouch_ns = t0.elapsed().as_nanos() as u64;
    Ok(ForkRun {
        fork_ns,
        resume_wait_ns,
        retouch_ns,
        after_ns: resume_wait_ns + retouch_ns,
        retouch_page_ins: region.stats().missing_faults - faults,
    })
}

/// One kernel fork: dirty, fork and reap, touch again.
fn kernel_run(side: &mut Side, dirty_pages: usize, tag: u8) -> Result<ForkRun, crate::BenchError> {
    side.touch()?;
    side.dirty(dirty_pages, tag);
    let fork_ns = timed_fork().doing("forking")?;
    let (majors, _) = sys::faults_self();
    let t0 = Instant::now();
    side.touch()?;
    let retouch_ns = t0.elapsed().as_nanos() as u64;
    Ok(ForkRun {
        fork_ns,
        resume_wait_ns: 0,
        retouch_ns,
        after_ns: retouch_ns,
        retouch_page_ins: sys::faults_self().0 - majors,
    })
}

/// The child side: joins its cgroup (the limit: the budget and the slack
/// on top of what it holds once mapped), maps the file, pages its working
/// set in, forks once to warm up and, after a random part of the watcher's
/// period, once measured; prints a [`ChildOut`].
pub(crate) fn child_main(job: Job) -> BenchResult {
    cgroup::enter(&job.cgroup, cgroup::Entry::CodeLocked)?;
    let data = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&job.file)
        .on("opening", &job.file)?;
    data.sync_all().on("syncing", &job.file)?;
    crate::cold::make_cold(&[&job.file], false).on("dropping the cached pages of", &job.file)?;
    let len = data.metadata().on("reading the size of", &job.file)?.len() as usize;
    let (region, kernel) = match job.side {
        SideName::Pagepilot => {
            let backing = Backing::File {
                path: job.file.clone(),
                writable: true,
            };
            let opts = RegionOptions::new(backing, job.budget as usize, "clock");
            (Some(Region::map(opts)?), None)
        }
        SideName::Kernel => (
            None,
            Some(Mapping::shared(data.as_raw_fd(), len, true).on("mapping", &job.file)?),
        ),
    };
    let baseline = cgroup::limit_above_charged(&job.cgroup, job.budget + job.slack)?;
    let run = |tag: u8| -> Result<(ForkRun, u64), crate::BenchError> {
        match (&region, &kernel) {
            (Some(region), _) => {
                let mut side = Side::new("pagepilot", region.as_ptr(), job.working_pages);
                let written = region.stats().bytes_written;
                let run = pagepilot_run(region, &mut side, job.dirty_pages, tag)?;
                Ok((run, region.stats().bytes_written - written))
            }
            (_, Some(k)) => {
                let mut side = Side::new("kernel", k.ptr(), job.working_pages);
                Ok((kernel_run(&mut side, job.dirty_pages, tag)?, 0))
            }
            _ => unreachable!("one of the two is mapped"),
        }
    };
    run(job.tag.wrapping_add(2))?;
    // The measured fork at a phase of the watcher's period drawn from the tag (the same for
    // both sides of a run), as an application's fork falls anywhere in it: right after the
    // warm-up's resume, the next look is a fixed time away. Spun, not slept: a fork right
    // after an idle wait pays for the idle CPU's wake-up (milliseconds on these machines).
    let phase = StdRng::seed_from_u64(job.tag.into()).gen_range(0..WATCH_PERIOD_US);
    let until = Instant::now() + Duration::from_micros(phase);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
    let (run, written_back) = run(job.tag)?;
    drop(kernel);
    if let Some(region) = region {
        region.unmap()?;
    }
    let peak_bytes = cgroup::max_usage(&job.cgroup)?.saturating_sub(baseline);
    let out = ChildOut {
        run,
        written_back,
        peak_bytes,
    };
    Ok(crate::child::report(&out)?)
}
