//! `pagepilot bench fork`: what a `fork` costs the process that makes it
//! with a file region holding dirty pages (its file regions are written
//! back first, so that the child, which maps the file, finds the data:
//! docs/lifecycle.md), against the same file mapped `MAP_SHARED` by the
//! kernel with as many dirty pages (which `fork` leaves in the page cache).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::Instant;

use pagepilot_pager::sys::{self, Mapping};
use pagepilot_pager::{Backing, Region, RegionOptions};
use serde::Serialize;

use super::datafile::DataFile;
use super::measure::{check_range, median, ratio, Format};
use crate::BenchResult;

const MB: usize = 1 << 20;

/// Arguments of `pagepilot bench fork`.
#[derive(clap::Args)]
pub struct Args {
    /// Budget of the region in MB; the file is four times larger.
    #[arg(long, default_value_t = 16)]
    budget_mb: usize,
    /// Dirty megabytes at the fork (at most the budget).
    #[arg(long, default_value = "0,1,4,16", value_delimiter = ',')]
    dirty_mb: Vec<usize>,
    /// Forks per point; the median is reported.
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Directory for the data file (must be on a disk, not tmpfs).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

/// One dirty size.
#[derive(Serialize)]
pub struct ForkPoint {
    /// Dirty megabytes at the fork.
    pub dirty_mb: usize,
    /// Median fork-and-reap time with a pagepilot region, ns.
    pub pagepilot_ns: u64,
    /// Median fork-and-reap time with the kernel's mapping, ns.
    pub kernel_ns: u64,
    /// pagepilot / kernel.
    pub ratio: f64,
    /// Bytes pagepilot wrote back per fork (the dirty pages, before the child exists).
    pub written_back_per_fork: u64,
    /// Every pagepilot run, ns.
    pub pagepilot_runs: Vec<u64>,
    /// Every kernel run, ns.
    pub kernel_runs: Vec<u64>,
}

/// The whole report.
#[derive(Serialize)]
pub struct ForkReport {
    /// Always "fork".
    pub bench: &'static str,
    /// Budget in MB.
    pub budget_mb: usize,
    /// File size in MB.
    pub file_mb: usize,
    /// Points.
    pub points: Vec<ForkPoint>,
}

/// Writes one byte in each page of the first `bytes` of `base`.
fn dirty(base: *mut u8, bytes: usize, round: u8) {
    for at in (0..bytes).step_by(sys::PAGE) {
        // SAFETY: `at` < `bytes`, within the mapping the caller passes.
        unsafe { base.add(at).write_volatile(round) };
    }
}

fn timed_fork() -> std::io::Result<u64> {
    let t0 = Instant::now();
    sys::fork_and_reap()?;
    Ok(t0.elapsed().as_nanos() as u64)
}

/// Runs `pagepilot bench fork`.
pub fn run(args: Args) -> BenchResult {
    check_range("--budget-mb", args.budget_mb, 1 << 14)?;
    check_range("--runs", args.runs, 1000)?;
    for &d in &args.dirty_mb {
        if d > args.budget_mb {
            return Err(
                format!("--dirty-mb {d} is more than --budget-mb {}", args.budget_mb).into(),
            );
        }
    }
    let budget = args.budget_mb * MB;
    let file = DataFile::create(&super::datafile::default_dir(args.dir), "fork", 4 * budget)?;
    let region = Region::map(RegionOptions::new(
        Backing::File {
            path: file.path().into(),
            writable: true,
        },
        budget,
        "clock",
    ))?;
    let data = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file.path())?;
    let kernel = Mapping::shared(data.as_raw_fd(), file.len(), true)?;
    let mut points = Vec::new();
    for &dirty_mb in &args.dirty_mb {
        let (mut pp, mut k) = (Vec::new(), Vec::new());
        let written_before = region.stats().bytes_written;
        for run in 0..args.runs {
            let round = run as u8;
            // Side by side, alternating which goes first.
            let pagepilot = || -> std::io::Result<u64> {
                dirty(region.as_ptr(), dirty_mb * MB, round);
                timed_fork()
            };
            let kernel_side = || -> std::io::Result<u64> {
                dirty(kernel.ptr(), dirty_mb * MB, round);
                timed_fork()
            };
            if run % 2 == 0 {
                pp.push(pagepilot()?);
                k.push(kernel_side()?);
            } else {
                k.push(kernel_side()?);
                pp.push(pagepilot()?);
            }
        }
        let written = region.stats().bytes_written - written_before;
        let (p, kn) = (median(pp.clone()), median(k.clone()));
        points.push(ForkPoint {
            dirty_mb,
            pagepilot_ns: p,
            kernel_ns: kn,
            ratio: ratio(p as f64, kn as f64),
            written_back_per_fork: written / args.runs as u64,
            pagepilot_runs: pp,
            kernel_runs: k,
        });
    }
    drop(kernel);
    region.unmap()?;
    let report = ForkReport {
        bench: "fork",
        budget_mb: args.budget_mb,
        file_mb: file.len() / MB,
        points,
    };
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Format::Text => {
            writeln!(
                out,
                "fork and reap with dirty pages of a {} MB file, budget {} MB, median of {}",
                report.file_mb, report.budget_mb, args.runs
            )?;
            writeln!(
                out,
                "{:>9} {:>14} {:>11} {:>8}",
                "dirty MB", "pagepilot us", "kernel us", "ratio"
            )?;
            for p in &report.points {
                writeln!(
                    out,
                    "{:>9} {:>14.1} {:>11.1} {:>8.2}",
                    p.dirty_mb,
                    p.pagepilot_ns as f64 / 1e3,
                    p.kernel_ns as f64 / 1e3,
                    p.ratio
                )?;
            }
        }
    }
    Ok(())
}
