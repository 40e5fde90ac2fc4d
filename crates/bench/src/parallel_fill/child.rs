//! One variant's run, in a child process of its own (see the parent module).

use crate::error::IoContext;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Instant;

use pagepilot_pager::sys::{self, Mapping};
use pagepilot_pager::{Backing, Region, RegionOptions};
use serde::{Deserialize, Serialize};

use super::{FillError, FillRun, Variant};
use crate::cgroup;
use crate::BenchResult;

/// What the parent tells a variant's child.
#[derive(Serialize, Deserialize)]
pub(crate) struct Job {
    /// Who maps the array.
    pub variant: Variant,
    /// The data file.
    pub file: PathBuf,
    /// The child's memory cgroup.
    pub cgroup: PathBuf,
    /// pagepilot's budget, bytes: the cgroup's limit is this, `slack` and
    /// what the child holds once mapped.
    pub budget: u64,
    /// `--slack-mb`, bytes.
    pub slack: u64,
    /// Forked workers.
    pub workers: usize,
    /// The pattern the workers store.
    pub seed: u64,
    /// The pattern the file holds at the start (the previous run's), checked by the first read.
    pub previous: Option<u64>,
}

/// The word at index `w` of the array under pattern `seed`.
fn pattern(w: usize, seed: u64) -> u64 {
    (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed
}

/// Sums `words` words at `base`, checking them against `seed` if given.
fn pass(
    base: *const u64,
    words: usize,
    seed: Option<u64>,
    variant: Variant,
    phase: &'static str,
) -> Result<u64, FillError> {
    let (mut sum, mut bad, mut first) = (0u64, 0u64, None);
    for w in 0..words {
        // SAFETY: w < words, inside the mapping of the caller.
        let got = unsafe { base.add(w).read_volatile() };
        sum = sum.wrapping_add(got);
        if let Some(seed) = seed {
            if got != pattern(w, seed) {
                bad += 1;
                first.get_or_insert((w, got));
            }
        }
    }
    match (first, seed) {
        (Some((w, got)), Some(seed)) => Err(FillError::Mismatch {
            variant,
            phase,
            bad,
            offset: w * 8,
            got,
            want: pattern(w, seed),
        }),
        _ => Ok(sum),
    }
}

/// The child side: joins the cgroup, maps the file as `job.variant` says, runs the workload
/// and prints its [`FillRun`] as JSON.
pub(crate) fn child_main(job: Job) -> BenchResult {
    cgroup::enter(&job.cgroup, cgroup::Entry::CodeLocked)?;
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .open(&job.file)
        .on("opening", &job.file)?;
    crate::cold::make_cold(&[&job.file], false).on("dropping the cached pages of", &job.file)?;
    let len = file.metadata().on("reading the size of", &job.file)?.len() as usize;
    let budget = job.budget as usize;
    let (region, kernel) = match job.variant {
        Variant::Kernel => (
            None,
            Some(Mapping::shared(file.as_raw_fd(), len, true).on("mapping", &job.file)?),
        ),
        v => {
            let backing = Backing::File {
                path: job.file.clone(),
                writable: true,
            };
            let mut opts = RegionOptions::new(backing, budget, "clock");
            if v == Variant::Tuned {
                opts = opts.with_readahead(128).with_readahead_depth(4);
            }
            (Some(Region::map(opts)?), None)
        }
    };
    let base = match (&region, &kernel) {
        (Some(r), _) => r.as_ptr(),
        (_, Some(k)) => k.ptr(),
        _ => unreachable!("one of the two is mapped"),
    };
    let baseline = cgroup::limit_above_charged(&job.cgroup, job.budget + job.slack)?;
    let words = len / 8;
    let slice = words.div_ceil(job.workers);
    let stats = || region.as_ref().map(Region::stats).unwrap_or_default();

    let t0 = Instant::now();
    pass(base as *const u64, words, job.previous, job.variant, "read")?;
    let read_ns = t0.elapsed().as_nanos() as u64;
    let before = stats();

    let t0 = Instant::now();
    let mut pids = Vec::new();
    for w in 0..job.workers {
        let (lo, hi) = (w * slice, ((w + 1) * slice).min(words));
        let (base, seed) = (base as usize, job.seed);
        let fill = move || {
            let base = base as *mut u64;
            for i in lo..hi {
                // SAFETY: i < words: inside the mapping, which the worker inherited.
                unsafe { base.add(i).write(pattern(i, seed)) };
            }
            0
        };
        // SAFETY: the worker only stores to the array and returns: no lock, no allocation.
        let pid = unsafe { sys::fork_child(fill) }.doing("forking a worker")?;
        pids.push(pid);
    }
    for (w, pid) in pids.into_iter().enumerate() {
        let status = sys::wait_child(pid).doing("waiting for a worker")?;
        if !status.success() {
            return Err(FillError::Worker(w, status).into());
        }
    }
    let fill_ns = t0.elapsed().as_nanos() as u64;
    let at_check = stats();

    let t0 = Instant::now();
    let checksum = pass(
        base as *const u64,
        words,
        Some(job.seed),
        job.variant,
        "check",
    )?;
    let check_ns = t0.elapsed().as_nanos() as u64;
    let after = stats();

    let peak = cgroup::max_usage(&job.cgroup)?.saturating_sub(baseline);
    drop(kernel);
    if let Some(region) = region {
        region.unmap()?;
    }
    let run = FillRun {
        read_ns,
        fill_ns,
        check_ns,
        wall_ns: fill_ns + check_ns,
        checksum,
        cgroup_baseline_bytes: baseline,
        peak_bytes: peak,
        shares: after.shares - before.shares,
        resumed_before_check: at_check.resumes > before.resumes,
        resumed_during_check: after.resumes > at_check.resumes,
        check_page_ins: after.missing_faults - at_check.missing_faults,
    };
    Ok(crate::child::report(&run)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_pass_sums_and_names_the_first_word_that_differs() {
        let mut words: Vec<u64> = (0..1000).map(|w| pattern(w, 7)).collect();
        let sum = words.iter().fold(0u64, |a, &w| a.wrapping_add(w));
        let ok = pass(
            words.as_ptr(),
            words.len(),
            Some(7),
            Variant::Kernel,
            "check",
        );
        assert_eq!(ok.unwrap(), sum);
        words[600] ^= 1 << 40;
        words[900] = 0;
        match pass(
            words.as_ptr(),
            words.len(),
            Some(7),
            Variant::Defaults,
            "check",
        ) {
            Err(FillError::Mismatch {
                bad, offset, want, ..
            }) => {
                assert_eq!((bad, offset, want), (2, 600 * 8, pattern(600, 7)));
            }
            other => panic!("not a mismatch: {other:?}"),
        }
        // Without a seed nothing is checked: the first read of an unknown file.
        assert!(pass(words.as_ptr(), words.len(), None, Variant::Tuned, "read").is_ok());
    }
}
