//! `pagepilot bench fork-ways`: the price of the way not taken for forked
//! workers (docs/lifecycle.md, "Why children share the kernel's mapping"):
//! option B keeps the child's copy of a region registered
//! (`UFFD_FEATURE_EVENT_FORK`) and serves its faults from the parent's
//! handler into the same memfd. A probe with the pager's shape (a memfd, an
//! application view registered for missing, minor and write-protect faults
//! as a writable file region is, a handler thread filling through `pwrite`
//! and mapping with `UFFDIO_CONTINUE`) measures, side by side in one run:
//!
//! - `fork()` of a process holding such a 64 MiB range, resident: left out
//!   of the child (`MADV_DONTFORK`, what the pager does), inherited without
//!   the feature (the child gets a plain memfd mapping), and inherited with
//!   it (`fork()` waits for the handler thread to read the fork event; the
//!   range's page tables are copied, as write-protect registration asks),
//!   and with it while no page is mapped in the parent (the event alone);
//! - a fault served by that handler thread through the child's userfaultfd
//!   against the same fault in the parent, missing (fill and continue) and
//!   minor (continue), per fault.
//!
//! The forking thread, the handler thread and the children share one CPU,
//! as a fault and the CPU's own handler do under the pager's default service.

use crate::error::IoContext;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Instant;

use pagepilot_pager::sys::{self, Mapping, PAGE};
use serde::Serialize;

mod probe;

use probe::{serve, Handler, Probe};

use super::measure::{check_range, median, ratio, Format};
use crate::emit::emit;
use crate::BenchResult;

/// Arguments of `pagepilot bench fork-ways`.
#[derive(clap::Args)]
pub struct Args {
    /// Size of the registered range, MB (every page resident at the forks; every page faulted
    /// in the per-fault rounds).
    #[arg(long, default_value_t = 64)]
    mb: usize,
    /// Forks per variant per run.
    #[arg(long, default_value_t = 20)]
    forks: usize,
    /// Runs; each alternates the variants; medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Why the probe failed.
#[derive(Debug, thiserror::Error)]
pub enum WaysError {
    /// A system call or the handler failed.
    #[error("{0}: {1}")]
    Sys(&'static str, std::io::Error),
    /// The kernel did not grant a feature the probe needs.
    #[error("the kernel does not grant userfaultfd feature {0:#x}")]
    Feature(u64),
    /// The child failed.
    #[error("the child ended with {0}")]
    Child(std::process::ExitStatus),
    /// A fault was not served through the userfaultfd it should have been.
    #[error("{what}: {got} fault(s) served, {want} expected")]
    Served {
        /// Which round.
        what: &'static str,
        /// Counted by the handler.
        got: u64,
        /// Touched pages.
        want: u64,
    },
    /// The child's stores did not reach the memfd the parent pages.
    #[error("page {0} of the memfd does not hold the child's store")]
    NotShared(usize),
}

fn sys_err(what: &'static str) -> impl Fn(std::io::Error) -> WaysError {
    move |e| WaysError::Sys(what, e)
}

/// `fork()` latencies of one variant, µs.
#[derive(Serialize)]
pub struct ForkWay {
    /// `dontfork`, `inherit`, `event-fork` or `event-fork-empty`.
    pub variant: &'static str,
    /// Median time for `fork()` to return in the parent, µs.
    pub fork_us: f64,
    /// Median fork, the child's `_exit` and the reap, µs.
    pub fork_reap_us: f64,
    /// Median over runs of `fork_us` / dontfork's in the same run.
    pub vs_dontfork: f64,
    /// Every fork's `fork()` time, ns.
    pub fork_ns: Vec<u64>,
}

/// Per-fault times of one kind of fault, µs.
#[derive(Serialize)]
pub struct FaultWay {
    /// `missing` (pwrite, then UFFDIO_CONTINUE) or `minor` (UFFDIO_CONTINUE).
    pub fault: &'static str,
    /// Median over runs of the parent's median fault, µs.
    pub parent_us: f64,
    /// Median over runs of the child's median fault, µs.
    pub child_us: f64,
    /// Median over runs of child / parent in the same run.
    pub child_vs_parent: f64,
}

/// The whole report.
#[derive(Serialize)]
pub struct WaysReport {
    /// Always "fork-ways".
    pub bench: &'static str,
    /// Range size, MB.
    pub mb: usize,
    /// Forks per variant per run.
    pub forks: usize,
    /// Runs.
    pub runs: usize,
    /// Fork latencies.
    pub fork: Vec<ForkWay>,
    /// Per-fault costs.
    pub faults: Vec<FaultWay>,
}

/// Stores `tag` in each page of `view`, timing each store into `times` (ns). Only loads,
/// stores and the vDSO clock: safe in a child of this threaded process.
fn touch_each(view: *mut u8, pages: usize, tag: u8, times: *mut u64) {
    for p in 0..pages {
        let t = Instant::now();
        // SAFETY: p < pages: inside the view; a fault is served by the handler.
        unsafe { view.add(p * PAGE).write_volatile(tag) };
        // SAFETY: `times` holds `pages` slots.
        unsafe { times.add(p).write(t.elapsed().as_nanos() as u64) };
    }
}

/// One fork of a process holding the range: (fork() returned, reaped), ns.
fn one_fork() -> Result<(u64, u64), WaysError> {
    let t0 = Instant::now();
    // SAFETY: the child returns at once, doing nothing.
    let pid = unsafe { sys::fork_child(|| 0) }.map_err(sys_err("fork"))?;
    let forked = t0.elapsed().as_nanos() as u64;
    let status = sys::wait_child(pid).map_err(sys_err("waitpid"))?;
    if !status.success() {
        return Err(WaysError::Child(status));
    }
    Ok((forked, t0.elapsed().as_nanos() as u64))
}

/// Faults `counter` counted since `before`, once it reaches `want` or a second has passed
/// (the handler counts a fault after the faulting thread was woken).
fn served(counter: &AtomicU64, before: u64, want: u64) -> u64 {
    let start = Instant::now();
    loop {
        let got = counter.load(SeqCst) - before;
        if got >= want || start.elapsed().as_secs() >= 1 {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

/// Per-fault medians of one run, ns: [parent missing, parent minor, child missing, child minor].
fn fault_run(probe: &Probe, h: &Handler, tag: u8) -> Result<[u64; 4], WaysError> {
    let pages = probe.len / PAGE;
    let view = probe.forking.view.ptr();
    let times = Mapping::shared(
        sys::memfd("pagepilot-fork-ways-times", 4 * pages * 8)
            .map_err(sys_err("memfd"))?
            .as_raw_fd(),
        4 * pages * 8,
        true,
    )
    .map_err(sys_err("mmap"))?;
    let slot = |k: usize| (times.ptr() as *mut u64).wrapping_add(k * pages);
    let expect = |what, counter: &AtomicU64, before: u64, want: u64| {
        let got = served(counter, before, want);
        (got == want)
            .then_some(())
            .ok_or(WaysError::Served { what, got, want })
    };
    // The parent's faults.
    sys::punch_hole(probe.memfd.as_raw_fd(), 0, probe.len).map_err(sys_err("fallocate"))?;
    let before = h.served_parent.load(SeqCst);
    touch_each(view, pages, tag, slot(0));
    expect("parent, missing", &h.served_parent, before, pages as u64)?;
    probe.forking.view.dontneed().map_err(sys_err("madvise"))?;
    let before = h.served_parent.load(SeqCst);
    touch_each(view, pages, tag, slot(1));
    expect("parent, minor", &h.served_parent, before, pages as u64)?;
    // The child's, through its own userfaultfd.
    sys::punch_hole(probe.memfd.as_raw_fd(), 0, probe.len).map_err(sys_err("fallocate"))?;
    probe.inherit_only(Some(&probe.forking))?;
    let before = h.served_child.load(SeqCst);
    let (s2, s3) = (slot(2) as usize, slot(3) as usize);
    let (child_tag, base, len) = (tag.wrapping_add(1), view as usize, probe.len);
    let child = move || {
        touch_each(base as *mut u8, pages, child_tag, s2 as *mut u64);
        if sys::zap(base, len).is_err() {
            return 1;
        }
        touch_each(base as *mut u8, pages, child_tag, s3 as *mut u64);
        0
    };
    // SAFETY: the child only stores, reads the clock and calls madvise.
    let pid = unsafe { sys::fork_child(child) }.map_err(sys_err("fork"))?;
    let status = sys::wait_child(pid).map_err(sys_err("waitpid"))?;
    probe.inherit_only(None)?;
    h.forget_children();
    h.check()?;
    if !status.success() {
        return Err(WaysError::Child(status));
    }
    let both = 2 * pages as u64;
    expect("child, missing and minor", &h.served_child, before, both)?;
    // One memory: the child's stores are in the memfd.
    for p in 0..pages {
        // SAFETY: p < pages: inside the handler's view.
        if unsafe { probe.pager.ptr().add(p * PAGE).read_volatile() } != child_tag {
            return Err(WaysError::NotShared(p));
        }
    }
    Ok([0, 1, 2, 3].map(|k| {
        // SAFETY: slot k holds `pages` u64s inside `times`.
        median(unsafe { std::slice::from_raw_parts(slot(k), pages) }.to_vec())
    }))
}

/// Runs `pagepilot bench fork-ways`.
pub fn run(args: Args) -> BenchResult {
    check_range("--mb", args.mb, 1 << 12)?;
    check_range("--forks", args.forks, 10_000)?;
    check_range("--runs", args.runs, 1000)?;
    let probe = Probe::new(args.mb << 20)?;
    let fill = vec![0x5au8; PAGE];
    let h = Handler::default();
    let names = ["dontfork", "inherit", "event-fork", "event-fork-empty"];
    let n = names.len();
    // One CPU for the forking thread, the handler and the children: the CPU's own handler
    // serves, as the pager's default service does (a cross-CPU wake-up of an idle vCPU costs
    // tens of microseconds here, more than the fault).
    sys::pin_to_current_cpu().map_err(sys_err("sched_setaffinity"))?;
    let result = std::thread::scope(|s| -> Result<_, WaysError> {
        let handler = s.spawn(|| serve(&h, &probe.forking.uffd, &probe, &fill));
        let body = || -> Result<_, WaysError> {
            let mut forks: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n];
            let mut per_run = vec![Vec::new(); n];
            let mut faults = Vec::new();
            for run in 0..args.runs {
                for k in 0..n {
                    let v = (run + k) % n;
                    let inherited = [None, Some(&probe.plain), Some(&probe.forking)][v.min(2)];
                    probe.make_resident()?;
                    if v == 3 {
                        // No page mapped in the parent: nothing to copy but the fork event.
                        probe.forking.view.dontneed().map_err(sys_err("madvise"))?;
                    }
                    probe.inherit_only(inherited)?;
                    let mut these = Vec::new();
                    for _ in 0..args.forks {
                        these.push(one_fork()?);
                        h.forget_children();
                        h.check()?;
                    }
                    per_run[v].push(median(these.iter().map(|t| t.0).collect()));
                    forks[v].extend(these);
                }
                probe.inherit_only(None)?;
                faults.push(fault_run(&probe, &h, run as u8 * 2 + 1)?);
            }
            Ok((forks, per_run, faults))
        };
        let out = body();
        h.stop.store(true, SeqCst);
        if handler.join().is_err() {
            return Err(WaysError::Sys("handler", std::io::Error::other("panicked")));
        }
        h.check()?;
        out
    });
    let (forks, per_run, faults) = result?;
    let us = |ns: u64| ns as f64 / 1e3;
    let fork = (0..n)
        .map(|v| ForkWay {
            variant: names[v],
            fork_us: us(median(forks[v].iter().map(|t| t.0).collect())),
            fork_reap_us: us(median(forks[v].iter().map(|t| t.1).collect())),
            vs_dontfork: median(
                per_run[v]
                    .iter()
                    .zip(&per_run[0])
                    .map(|(&m, &d)| ratio(m as f64, d as f64).unwrap_or(0.0))
                    .collect(),
            ),
            fork_ns: forks[v].iter().map(|t| t.0).collect(),
        })
        .collect();
    let fault = |name, parent: usize, child: usize| FaultWay {
        fault: name,
        parent_us: us(median(faults.iter().map(|f| f[parent]).collect())),
        child_us: us(median(faults.iter().map(|f| f[child]).collect())),
        child_vs_parent: median(
            faults
                .iter()
                .map(|f| ratio(f[child] as f64, f[parent] as f64).unwrap_or(0.0))
                .collect(),
        ),
    };
    let report = WaysReport {
        bench: "fork-ways",
        mb: args.mb,
        forks: args.forks,
        runs: args.runs,
        fork,
        faults: vec![fault("missing", 0, 2), fault("minor", 1, 3)],
    };
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

fn print_text(r: &WaysReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "fork() of a process holding a {} MB memfd range registered with userfaultfd \
         (missing, minor, write-protect), resident; {} forks x {} runs",
        r.mb, r.forks, r.runs
    )?;
    writeln!(
        out,
        "{:>16} {:>10} {:>13} {:>12}",
        "variant", "fork() us", "fork+reap us", "vs dontfork"
    )?;
    for f in &r.fork {
        writeln!(
            out,
            "{:>16} {:>10.1} {:>13.1} {:>12.2}",
            f.variant, f.fork_us, f.fork_reap_us, f.vs_dontfork
        )?;
    }
    writeln!(
        out,
        "a fault served by the parent's handler thread, per fault (median of each run's median)"
    )?;
    writeln!(
        out,
        "{:>8} {:>10} {:>9} {:>13}",
        "fault", "parent us", "child us", "child/parent"
    )?;
    for f in &r.faults {
        writeln!(
            out,
            "{:>8} {:>10.2} {:>9.2} {:>13.2}",
            f.fault, f.parent_us, f.child_us, f.child_vs_parent
        )?;
    }
    Ok(())
}
