//! `pagepilot bench share`: HiPEC's multi-application case, live. Two
//! nested-loops joins run at once, each over its own table. Under pagepilot
//! both regions draw from one frame pool, one paged by MRU and one by
//! CLOCK, each guaranteed half of it (its `minFrame`), so each sees its own
//! policy's page-ins for its share. Under the kernel both run in one memory
//! cgroup of the same total, sharing its LRU-like replacement. Reported per
//! join: time and page-ins against its policy's analytic count (PF_m for
//! MRU, PF_l for CLOCK, HiPEC 5.3) and against the simulator's prediction
//! (the same frame-manager code, `pagepilot_sim::pooled`, run on the joins'
//! page references); and the pair's time side by side. A third side runs
//! each join as a process of its own under a `pagepilot daemon` of the
//! pool's frames ([`daemon`]), reported against the in-process pool: the
//! same page-ins and time within 10%, and the messages per fault.

pub(crate) mod daemon;
mod report;

use crate::error::IoContext;
use crate::BenchError;
use std::path::PathBuf;
use std::time::Instant;

use pagepilot_pager::{sys, Backing, Pool, Region, RegionOptions, RegionStats};
use pagepilot_policy::registry;
use pagepilot_sim::global::Schedule;
use pagepilot_sim::pooled::{self, PoolConfig, ProcessSpec};
use pagepilot_sim::Trace;
use serde::{Deserialize, Serialize};

use self::daemon::DaemonJoinRun;
pub(crate) use self::daemon::{child_main as daemon_child_main, ChildJob as DaemonJob};
use self::report::{JoinResult, Report};
use super::cgroup::{self, MemCgroup};
use super::child::{self, ChildError, Exit, Role};
use super::datafile::{self, DataFile};
use super::join::analytic_faults;
use super::kernel;
use super::measure::{check_range, median, read_bytes_thread, Format};
use super::workload::{Plan, Workload};
use crate::emit::emit;
use crate::BenchResult;

const MB: usize = 1 << 20;
const PAGE: usize = 4096;
/// The two joins' policies under pagepilot.
pub(crate) const POLICIES: [&str; 2] = ["mru", "clock"];

/// Arguments of `pagepilot bench share`.
#[derive(clap::Args)]
pub struct Args {
    /// Each join's outer table, MB.
    #[arg(long, default_value_t = 24)]
    outer_mb: usize,
    /// Frames of both joins together, MB: pagepilot's pool (half of it each
    /// join's minimum) and the kernel's cgroup limit.
    #[arg(long, default_value_t = 32)]
    budget_mb: usize,
    /// Scans of each outer table.
    #[arg(long, default_value_t = 8)]
    loops: usize,
    /// Rounds; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Directory of the tables (default: the benchmarks' data directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// One join of one round.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub(crate) struct JoinRun {
    /// Its time, ns.
    pub elapsed_ns: u64,
    /// Its page-ins: the region's `missing_faults`, or the pages the
    /// kernel's thread read.
    pub faults: u64,
    /// The join's result.
    pub checksum: u64,
    /// Frames its read-ahead windows hold (pagepilot): `(depth + 1) * k`
    /// asynchronous, `k` synchronous.
    #[serde(default)]
    pub window_frames: u64,
}

/// What the kernel side's child is told.
#[derive(Serialize, Deserialize)]
pub struct ChildJob {
    files: [PathBuf; 2],
    cgroup: PathBuf,
    budget: u64,
    loops: usize,
}

/// Runs `pagepilot bench share`.
pub fn run(args: Args) -> BenchResult {
    check_range("--outer-mb", args.outer_mb, 1 << 16)?;
    check_range("--budget-mb", args.budget_mb, 1 << 16)?;
    check_range("--loops", args.loops, 1000)?;
    check_range("--runs", args.runs, 100)?;
    if args.budget_mb < 2 {
        return Err(BenchError::BadArg {
            option: "--budget-mb",
            value: args.budget_mb.to_string(),
            why: "must be at least 2: each join is guaranteed half".into(),
        });
    }
    let dir = datafile::default_dir(args.dir.clone());
    let files = [
        DataFile::create(&dir, "share-a", args.outer_mb * MB)?,
        DataFile::create(&dir, "share-b", args.outer_mb * MB)?,
    ];
    let budget = args.budget_mb * MB;
    let kernel_skipped = kernel::baseline_available()
        .err()
        .map(|e| pagepilot_policy::chain(&e).to_string());
    let mut live: [Vec<JoinRun>; 2] = Default::default();
    let mut kern: [Vec<JoinRun>; 2] = Default::default();
    let mut under_daemon: [Vec<DaemonJoinRun>; 2] = Default::default();
    let (mut live_pair, mut kernel_pair, mut daemon_pair) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.runs {
        eprintln!("round {}/{}...", round + 1, args.runs);
        // The pool and the daemon sides take turns going first: the second
        // reads what the first just read, which the host may still cache.
        let daemon_first = round % 2 == 1;
        for daemon_turn in [daemon_first, !daemon_first] {
            if daemon_turn {
                let (runs, wall) = daemon::round(&files, budget, args.loops)?;
                daemon_pair.push(wall);
                for (k, r) in runs.into_iter().enumerate() {
                    under_daemon[k].push(r);
                }
            } else {
                let (runs, wall) = live_round(&files, budget, args.loops)?;
                live_pair.push(wall);
                for (k, r) in runs.into_iter().enumerate() {
                    live[k].push(r);
                }
            }
        }
        if kernel_skipped.is_none() {
            let (runs, wall) = kernel_round(&files, budget, args.loops)?;
            kernel_pair.push(wall);
            for (k, r) in runs.into_iter().enumerate() {
                kern[k].push(r);
            }
        }
    }
    let o = files[0].pages() as u64;
    let share = (budget / 2 / PAGE) as u64;
    let (pf_l, pf_m) = analytic_faults(o, share, args.loops as u64);
    let ms = |v: &[u64]| median(v.to_vec()) as f64 / 1e6;
    let windows = live
        .each_ref()
        .map(|runs| runs.first().map_or(0, |r| r.window_frames));
    let simulated = predict(o, share, args.loops as u64, windows)?;
    let pagepilot_rows = live.iter().map(|runs| ("pagepilot", runs.clone(), None));
    let daemon_rows = under_daemon.iter().map(|runs| {
        let messages = median(runs.iter().map(|r| r.messages_sent).collect());
        let runs = runs.iter().map(|r| r.run).collect::<Vec<_>>();
        ("pagepilot+daemon", runs, Some(messages))
    });
    let mut joins = Vec::new();
    for (k, (side, runs, messages_sent)) in pagepilot_rows.chain(daemon_rows).enumerate() {
        let k = k % 2;
        let faults = median(runs.iter().map(|r| r.faults).collect());
        let analytic = if POLICIES[k] == "mru" { pf_m } else { pf_l };
        joins.push(JoinResult {
            side,
            policy: POLICIES[k],
            outer_pages: o,
            share_pages: Some(share),
            elapsed_ms: ms(&runs.iter().map(|r| r.elapsed_ns).collect::<Vec<_>>()),
            faults,
            analytic_faults: Some(analytic),
            faults_vs_analytic: Some(faults as f64 / analytic as f64),
            simulated_faults: Some(simulated[k]),
            faults_vs_simulated: Some(faults as f64 / simulated[k] as f64),
            messages_sent,
        });
    }
    for runs in kern.iter().filter(|r| !r.is_empty()) {
        joins.push(JoinResult {
            side: "kernel",
            policy: "kernel",
            outer_pages: o,
            share_pages: None,
            elapsed_ms: ms(&runs.iter().map(|r| r.elapsed_ns).collect::<Vec<_>>()),
            faults: median(runs.iter().map(|r| r.faults).collect()),
            analytic_faults: None,
            faults_vs_analytic: None,
            simulated_faults: None,
            faults_vs_simulated: None,
            messages_sent: None,
        });
    }
    let daemon_vs_in_process = (0..2)
        .map(|k| report::compare(POLICIES[k], &live[k], &under_daemon[k]))
        .collect();
    let pagepilot_pair_ms = ms(&live_pair);
    let daemon_pair_ms = ms(&daemon_pair);
    let kernel_pair_ms = (!kernel_pair.is_empty()).then(|| ms(&kernel_pair));
    let report = Report {
        bench: "share",
        outer_mb: args.outer_mb,
        budget_mb: args.budget_mb,
        loops: args.loops,
        runs: args.runs,
        joins,
        pagepilot_pair_ms,
        daemon_pair_ms,
        daemon_pair_ratio: Report::pair_ratio(daemon_pair_ms, pagepilot_pair_ms),
        daemon_vs_in_process,
        kernel_pair_ms,
        speedup_vs_kernel: kernel_pair_ms.map(|k| k / pagepilot_pair_ms),
        kernel_skipped,
    };
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        report::print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

/// Both joins at once over regions of one pool; each join's run and the
/// pair's wall time.
fn live_round(
    files: &[DataFile; 2],
    budget: usize,
    loops: usize,
) -> Result<([JoinRun; 2], u64), crate::BenchError> {
    let pool = Pool::new(budget)?;
    let mut regions = Vec::new();
    for (file, policy) in files.iter().zip(POLICIES) {
        // Cold, as the kernel's side starts.
        crate::cold::make_cold(&[file.path()], false)
            .on("dropping the cached pages of", file.path())?;
        let backing = Backing::File {
            path: file.path().to_path_buf(),
            writable: false,
        };
        let opts = RegionOptions::new(backing, budget / 2, policy).with_pool(&pool);
        regions.push(Region::map(opts)?);
    }
    let plans = files
        .each_ref()
        .map(|f| Plan::new(Workload::Join { loops }, f.len()));
    let t0 = Instant::now();
    let runs: Vec<(u64, u64)> = std::thread::scope(|s| {
        let joins: Vec<_> = regions
            .iter()
            .zip(&plans)
            .map(|(region, plan)| {
                s.spawn(move || {
                    let t = Instant::now();
                    // SAFETY: the region maps the whole table read-only and
                    // stays mapped until after the scope.
                    let sum = unsafe { plan.run(region.as_ptr()) };
                    (t.elapsed().as_nanos() as u64, sum)
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|j| j.join().unwrap_or_default())
            .collect()
    });
    let wall = t0.elapsed().as_nanos() as u64;
    let mut out = [JoinRun::default(); 2];
    for (k, region) in regions.into_iter().enumerate() {
        let (elapsed_ns, checksum) = runs[k];
        if checksum != plans[k].expected() {
            return Err(BenchError::Measurement {
                bench: "share",
                what: format!("pagepilot join {k}: checksum {checksum}, wrong data paged in"),
            });
        }
        let stats = region.stats();
        out[k] = JoinRun {
            elapsed_ns,
            faults: stats.missing_faults,
            checksum,
            window_frames: window_frames(&stats),
        };
        region.unmap()?;
    }
    Ok((out, wall))
}

/// Frames a region's read-ahead windows hold: the window in use and those
/// read ahead of it (docs/pager.md, "Clustered reads").
pub(crate) fn window_frames(stats: &RegionStats) -> u64 {
    let ahead = if stats.async_readahead {
        stats.readahead_depth
    } else {
        0
    };
    (ahead + 1) * stats.readahead_max_pages
}

/// The simulator's page-ins for each join: both run as processes of a
/// pooled simulation (`pagepilot_sim::pooled`, the live pool's frame
/// manager on a simulated clock), each with the live policy its region
/// runs, its share as minFrame, in a pool of both shares; each references
/// its outer table's pages in order, `loops` times, as the join does.
///
/// Like with like: live, `missing_faults` counts page-ins (every page read,
/// those read ahead of a fault included); the simulator reads one page per
/// missing fault, so its faults are its page-ins. What read-ahead changes
/// is the frames: a window's pages are held outside the policy's resident
/// set, so each join's `window_frames` are set aside from its frames
/// (`ProcessSpec::readahead_frames`) while its table exceeds its share
/// (within its share no page is ever evicted, windows or not).
fn predict(
    outer_pages: u64,
    share: u64,
    loops: u64,
    windows: [u64; 2],
) -> Result<[u64; 2], crate::BenchError> {
    let scan = Trace::from_pages((0..loops).flat_map(|_| 0..outer_pages));
    let traces = [scan.clone(), scan];
    let processes: Vec<ProcessSpec> = POLICIES
        .iter()
        .zip(windows)
        .map(|(policy, window)| {
            let mut p = ProcessSpec::new(*policy, registry::live_name(policy), share as usize);
            if outer_pages > share {
                // Live windows fit in a quarter of the budget.
                p.readahead_frames = window.min(share / 4) as usize;
            }
            p
        })
        .collect();
    let config = PoolConfig {
        frames: 2 * share as usize,
        partition_burst: None,
        reclaim_deadline: 10_000_000,
        schedule: Schedule {
            quantum: 1_000,
            service: 100,
        },
        rate: None,
        sample_every: None,
    };
    let run = pooled::run(&traces, &processes, &config)?;
    Ok([
        run.processes[0].counters.faults,
        run.processes[1].counters.faults,
    ])
}

/// Both joins at once over the kernel's mappings in one memory cgroup of
/// the budget, in a child process; each join's run and the pair's wall time.
fn kernel_round(
    files: &[DataFile; 2],
    budget: usize,
    loops: usize,
) -> Result<([JoinRun; 2], u64), crate::BenchError> {
    let cg = MemCgroup::create(budget)?;
    crate::cold::make_cold(&files.each_ref().map(|f| f.path()), true)
        .doing("dropping the cached pages of the data files")?;
    let job = ChildJob {
        files: files.each_ref().map(|f| f.path().to_path_buf()),
        cgroup: cg.dir().to_path_buf(),
        budget: budget as u64,
        loops,
    };
    let t0 = Instant::now();
    let runs: [JoinRun; 2] = match child::run("bench share kernel", &Role::ShareKernel(job), None) {
        Ok(Exit::Killed(status)) | Err(ChildError::Failed { status, .. }) => {
            return Err(BenchError::Measurement {
                bench: "share",
                what: format!("the kernel side failed ({status}); OOM-killed?"),
            })
        }
        Ok(exit) => exit.reported("bench share kernel")?,
        Err(e) => return Err(e.into()),
    };
    let wall = t0.elapsed().as_nanos() as u64;
    for (k, (r, f)) in runs.iter().zip(files).enumerate() {
        let want = Plan::new(Workload::Join { loops }, f.len()).expected();
        if r.checksum != want {
            return Err(BenchError::Measurement {
                bench: "share",
                what: format!("kernel join {k}: checksum {} != {want}", r.checksum),
            });
        }
    }
    drop(cg);
    Ok((runs, wall))
}

/// The kernel side: joins the cgroup, maps both tables, runs both joins in
/// two threads and prints their runs as JSON (pages read per thread).
pub(crate) fn child_main(job: ChildJob) -> BenchResult {
    cgroup::enter(&job.cgroup, cgroup::Entry::AsIs)?;
    let mut maps = Vec::new();
    for path in &job.files {
        crate::cold::make_cold(&[path], false).on("dropping the cached pages of", path)?;
        let file = std::fs::File::open(path).on("opening", path)?;
        let len = file.metadata().on("reading the size of", path)?.len() as usize;
        let map = sys::Mapping::shared(std::os::fd::AsRawFd::as_raw_fd(&file), len, false)
            .on("mapping", path)?;
        maps.push((map, Plan::new(Workload::Join { loops: job.loops }, len)));
    }
    // The process's own memory must not eat into the tables' budget.
    cgroup::limit_above_charged(&job.cgroup, job.budget)?;
    let runs: Vec<JoinRun> = std::thread::scope(|s| {
        let joins: Vec<_> = maps
            .iter()
            .map(|(map, plan)| {
                s.spawn(move || {
                    let read0 = thread_read_pages();
                    let t = Instant::now();
                    // SAFETY: the mapping covers the whole table and lives
                    // until after the scope.
                    let checksum = unsafe { plan.run(map.ptr()) };
                    JoinRun {
                        elapsed_ns: t.elapsed().as_nanos() as u64,
                        faults: thread_read_pages().saturating_sub(read0),
                        checksum,
                        window_frames: 0,
                    }
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|j| j.join().unwrap_or_default())
            .collect()
    });
    Ok(child::report(&runs)?)
}

/// Pages this thread has read from the disk so far: the kernel's page-ins,
/// which its read-around makes many per fault.
fn thread_read_pages() -> u64 {
    read_bytes_thread().unwrap_or(0) / PAGE as u64
}
