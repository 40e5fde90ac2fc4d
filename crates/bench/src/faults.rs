//! `pagepilot bench faults`: the cost of a fault served by pagepilot against the kernel's own
//! fault on the same kind of memory (shmem), side by side, with the Cache Kernel paper's split
//! of a fault (its 99 us = 32 us delivery + 67 us filling and mapping).
//!
//! Robust on a noisy 2-core VM: the run is `--rounds` short blocks of `--pages` first touches
//! each; a round runs every kind once, back to back (the kernel first in even rounds, last in
//! odd ones), and ratios are taken within a round, then the median over rounds is reported.
//! Both sides run in this process, so in the same memory cgroup; `--cgroup` repeats the rounds
//! inside a fresh cgroup v1 memory cgroup and reports them too.
//!
//! The single-fault rows time one fault per page (zero clusters off): the honest per-fault
//! figure. The stream rows first-touch the round's pages with zero clusters on (the default:
//! one fault and one ioctl for up to 16 pages along a sequence), in sequential and in random
//! order, against the kernel's first touch of as many shmem pages in the same order in the
//! same round: wall time per page and fault events per page.

use crate::error::IoContext;
use std::io::Write;
use std::time::Instant;

use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};
use serde::Serialize;

use super::cgroup::{self, MemCgroup};
use super::measure::{check_range, median, ratio, Format};
use super::probe::{self, run_delay_ns, Fill, Split};
use super::sigprobe;
use crate::emit::emit;
use crate::BenchResult;
use pagepilot_pager::{sys, Backing, FaultService, Region, RegionOptions};

/// Arguments of `pagepilot bench faults`.
#[derive(clap::Args)]
pub struct Args {
    /// First touches (faults) per kind and round.
    #[arg(long, default_value_t = 1024)]
    pages: usize,
    /// Rounds; ratios are per round, the report gives their median.
    #[arg(long, alias = "runs", default_value_t = 15)]
    rounds: usize,
    /// Largest zero cluster of the stream rows, pages (the region option
    /// `zero_around_max_pages`; 1: every first touch a fault of its own).
    #[arg(long, default_value_t = 16)]
    zero_around: usize,
    /// Also run the rounds inside a fresh cgroup v1 memory cgroup (both sides).
    #[arg(long)]
    cgroup: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Summary of per-fault times, pooled over rounds.
#[derive(Serialize, Clone, Copy, Default)]
pub struct Cost {
    /// Median ns.
    pub p50_ns: u64,
    /// Mean ns.
    pub mean_ns: u64,
}

impl Cost {
    fn of(xs: &[u64]) -> Cost {
        let mean = if xs.is_empty() {
            0
        } else {
            xs.iter().sum::<u64>() / xs.len() as u64
        };
        Cost {
            p50_ns: median(xs.to_vec()),
            mean_ns: mean,
        }
    }
}

/// A kind of fault against the kernel's, ratios taken per round.
#[derive(Serialize, Clone, Copy, Default)]
pub struct VsKernel {
    /// Per-fault time, pooled over rounds.
    pub cost: Cost,
    /// Median over rounds of (this kind's p50 / the kernel's p50 in the same round).
    pub ratio_p50: f64,
    /// Median over rounds of the ratio of means (what a stream of faults pays on average).
    pub ratio_mean: f64,
    /// Median over rounds of the ratio of wall times to first-touch the round's pages (batch
    /// work, if any, included): > 1 means slower than the kernel.
    pub ratio_wall: f64,
}

/// The real pager serving missing faults of an anonymous region within its budget.
#[derive(Serialize, Clone, Copy, Default)]
pub struct PagerRow {
    /// Against the kernel's first touch.
    #[serde(flatten)]
    pub vs: VsKernel,
    /// The pager's own service time p50 (`stats().latency`: lookup to mapped), ns.
    pub service_p50_ns: u64,
    /// Time the application thread waited for a CPU, per fault, ns (mean).
    pub app_wait_per_fault_ns: u64,
}

/// Where a fault served by the faulting thread (SIGBUS) goes, p50s of the same rounds.
#[derive(Serialize, Clone, Copy, Default)]
pub struct SigbusBreakdown {
    /// The probe: SIGBUS handler doing nothing but `UFFDIO_ZEROPAGE`, against the kernel.
    pub probe: VsKernel,
    /// Fault entry, signal delivery and `sigreturn`: probe total - its ioctl (the Cache
    /// Kernel's "delivery"), ns.
    pub delivery_ns: u64,
    /// `UFFDIO_ZEROPAGE` (allocate, zero, map: "filling and mapping"), ns.
    pub zeropage_ioctl_ns: u64,
    /// pagepilot's own work on top (region lookup, lock, state, policy, statistics): median
    /// over rounds of pager p50 - probe p50, ns (may be slightly negative in noise).
    pub bookkeeping_ns: i64,
}

/// A fault kind served by the timestamped handler-thread probe, split into its parts.
#[derive(Serialize, Clone, Copy, Default)]
pub struct Breakdown {
    /// What the application waits.
    pub total: Cost,
    /// Fault raised -> handler holds the userfaultfd message.
    pub delivery: Cost,
    /// Handler holds the message -> page filled (zero or copy; nothing for minor).
    pub fill: Cost,
    /// Page filled -> application running again (`UFFDIO_CONTINUE` and wake-up).
    pub map_and_resume: Cost,
    /// The `UFFDIO_CONTINUE` ioctl alone, handler side (includes waking the faulting thread).
    pub continue_ioctl: Cost,
    /// Time both threads spent runnable but waiting for a CPU, per fault (mean), ns: a
    /// hand-off's wake-ups queue behind other processes on a busy machine.
    pub cpu_wait_per_fault_ns: u64,
    /// Median over rounds of total p50 / the kernel's same kind of fault p50.
    pub ratio_to_kernel_p50: f64,
    /// Median over rounds of the ratio of means.
    pub ratio_to_kernel_mean: f64,
}

/// A stream of first touches through the real pager with zero clusters on, against the
/// kernel's first touch of as many fresh shmem pages in the same order, in the same round.
#[derive(Serialize, Clone, Copy, Default)]
pub struct StreamRow {
    /// Wall time to first-touch the round's pages, per page, ns (median over rounds).
    pub per_page_ns: u64,
    /// The kernel's wall time for the same number of pages in the same order, per page, ns
    /// (median over rounds).
    pub kernel_per_page_ns: u64,
    /// Median over rounds of (this wall time / the kernel's in the same round): < 1 is faster.
    pub ratio_wall: f64,
    /// Fault events (signals or userfaultfd messages) per page touched, median over rounds:
    /// 1 when every first touch is a fault of its own.
    pub fault_events_per_page: f64,
    /// Pages zero-filled ahead of their touch in clusters, per page touched (median).
    pub zero_around_per_page: f64,
    /// The pager's service time per fault event (`stats().latency` p50: lookup, policy and
    /// the cluster's ioctl), median over rounds, ns.
    pub service_p50_ns: u64,
}

/// The first-touch stream rows: order x who serves the faults.
#[derive(Serialize, Clone, Copy, Default)]
pub struct Streams {
    /// Pages in order, faults served in the faulting thread (SIGBUS).
    pub sequential_faulting_thread: StreamRow,
    /// Pages in order, one handler thread.
    pub sequential_handler_thread: StreamRow,
    /// Pages in a random order (new each round, the same for both sides), faulting thread.
    pub random_faulting_thread: StreamRow,
    /// Pages in a random order, one handler thread.
    pub random_handler_thread: StreamRow,
}

/// All rounds in one cgroup setting.
#[derive(Serialize, Default)]
pub struct Rounds {
    /// Where the rounds ran: "process" (the benchmark's own memory cgroup) or "fresh".
    pub cgroup: &'static str,
    /// The kernel's first-touch fault on shmem (allocate, zero, map).
    pub kernel_missing: Cost,
    /// The kernel's fault on a shmem page still in the page cache after `MADV_DONTNEED`.
    pub kernel_minor: Cost,
    /// The kernel's first touch of private anonymous memory (what `malloc` hands out; cheaper
    /// than shmem's), for context.
    pub kernel_missing_private_anon: Cost,
    /// The faulting-thread pager against that private anonymous first touch.
    pub faulting_thread_vs_private_anon: VsKernel,
    /// The real pager, one handler thread.
    pub pager_missing: PagerRow,
    /// The real pager, one handler thread per CPU, each kept to its CPU.
    pub pager_missing_handler_per_cpu: PagerRow,
    /// The real pager with the default fault service (`RegionOptions::default()`).
    pub pager_missing_default_service: PagerRow,
    /// Which service that is.
    pub default_service: String,
    /// The same with the application thread pinned to its CPU before mapping, so that the
    /// handler thread (which inherits the affinity) shares it: both wake-ups stay on one CPU.
    pub pager_missing_handler_pinned: PagerRow,
    /// The real pager, the faulting thread serving its own fault (SIGBUS).
    pub pager_missing_faulting_thread: PagerRow,
    /// The faulting-thread fault split into delivery, ioctl and pagepilot's bookkeeping.
    pub faulting_thread_breakdown: SigbusBreakdown,
    /// Handler-thread probe: missing fault served with a zeroed page (`MADV_POPULATE_WRITE`).
    pub probe_missing_zero: Breakdown,
    /// Handler-thread probe: missing fault served by copying from memory (`pwrite`).
    pub probe_missing_copy: Breakdown,
    /// Handler-thread probe: minor fault (page in the memfd, PTE zapped), `UFFDIO_CONTINUE`.
    pub probe_minor: Breakdown,
    /// First-touch streams with zero clusters on.
    pub stream: Streams,
}

/// The whole report.
#[derive(Serialize)]
pub struct FaultsReport {
    /// Always "faults".
    pub bench: &'static str,
    /// Faults per kind and round.
    pub pages: usize,
    /// Rounds.
    pub rounds: usize,
    /// Largest zero cluster of the stream rows, pages.
    pub zero_around_max_pages: usize,
    /// `/proc/loadavg` (1, 5, 15 min) before the run.
    pub load_before: [f64; 3],
    /// `/proc/loadavg` after the run.
    pub load_after: [f64; 3],
    /// CPU time the hypervisor gave to others while this machine's vCPUs wanted to run, over
    /// the whole run, all CPUs (`/proc/stat` steal), ms.
    pub steal_ms: u64,
    /// The rounds in the benchmark's own memory cgroup (both sides alike).
    #[serde(flatten)]
    pub process: Rounds,
    /// With `--cgroup`: the same rounds inside a fresh memory cgroup.
    pub fresh_cgroup: Option<Rounds>,
}

/// One block of first touches through a real pager region.
struct PagerBlock {
    times: Vec<u64>,
    wall_ns: u64,
    service_p50_ns: u64,
    app_wait_ns: u64,
}

fn pager_block_pinned(pages: usize) -> Result<PagerBlock, crate::BenchError> {
    // The handler thread is created by Region::map and inherits the affinity.
    let old = sys::affinity().doing("reading the CPU affinity")?;
    sys::pin_to_current_cpu().doing("pinning to the current CPU")?;
    let block = pager_block(pages, FaultService::HandlerThreads);
    sys::set_affinity(&old).doing("restoring the CPU affinity")?;
    block
}

fn pager_block(pages: usize, service: FaultService) -> Result<PagerBlock, crate::BenchError> {
    let len = pages * sys::PAGE;
    // One fault per page: zero clusters off.
    let opts = RegionOptions::new(Backing::Anonymous { len }, len, "fifo")
        .with_readahead(1)
        .with_zero_around(1)
        .with_fault_service(service);
    let region = Region::map(opts)?;
    let (waited, start) = (run_delay_ns(), Instant::now());
    let times = (0..pages)
        .map(|p| {
            let t = Instant::now();
            // SAFETY: p < pages: inside the region, which stays mapped until unmap below.
            unsafe { std::ptr::write_volatile(region.as_ptr().add(p * sys::PAGE), 1) };
            t.elapsed().as_nanos() as u64
        })
        .collect();
    let wall_ns = start.elapsed().as_nanos() as u64;
    let app_wait_ns = run_delay_ns().saturating_sub(waited);
    let stats = region.stats();
    region.unmap()?;
    Ok(PagerBlock {
        times,
        wall_ns,
        service_p50_ns: stats.latency.p50_ns,
        app_wait_ns,
    })
}

/// Per-round samples of one first-touch stream against the kernel's in the same order.
#[derive(Default)]
struct StreamSeries {
    wall: Vec<u64>,
    kernel_wall: Vec<u64>,
    events: Vec<f64>,
    ahead: Vec<f64>,
    service: Vec<u64>,
}

impl StreamSeries {
    /// First-touches `order`'s pages of a fresh anonymous region (within its budget, zero
    /// clusters on by default) and records the loop's wall time and the region's counters.
    fn pager(
        &mut self,
        order: &[usize],
        service: FaultService,
        zero_around: usize,
    ) -> Result<(), crate::BenchError> {
        let len = order.len() * sys::PAGE;
        let opts = RegionOptions::new(Backing::Anonymous { len }, len, "fifo")
            .with_readahead(1)
            .with_zero_around(zero_around)
            .with_fault_service(service);
        let region = Region::map(opts)?;
        let start = Instant::now();
        for &p in order {
            // SAFETY: `order` holds page indices below its length: inside the region, which
            // stays mapped until unmap below.
            unsafe { std::ptr::write_volatile(region.as_ptr().add(p * sys::PAGE), 1) };
        }
        self.wall.push(start.elapsed().as_nanos() as u64);
        let stats = region.stats();
        region.unmap()?;
        let n = order.len().max(1) as f64;
        self.events.push(stats.fault_events as f64 / n);
        self.ahead.push(stats.zero_around_pages as f64 / n);
        self.service.push(stats.latency.p50_ns);
        Ok(())
    }

    fn row(&self, pages: usize) -> StreamRow {
        let per_page = |xs: &[u64]| median(xs.to_vec()) / pages.max(1) as u64;
        StreamRow {
            per_page_ns: per_page(&self.wall),
            kernel_per_page_ns: per_page(&self.kernel_wall),
            ratio_wall: median(
                self.wall
                    .iter()
                    .zip(&self.kernel_wall)
                    .map(|(&x, &y)| ratio(x as f64, y as f64).unwrap_or(0.0))
                    .collect(),
            ),
            fault_events_per_page: median(self.events.clone()),
            zero_around_per_page: median(self.ahead.clone()),
            service_p50_ns: median(self.service.clone()),
        }
    }
}

/// Per-round samples of one kind.
#[derive(Default)]
struct Series {
    times: Vec<u64>,
    p50: Vec<u64>,
    mean: Vec<u64>,
    wall: Vec<u64>,
    wait: u64,
}

impl Series {
    fn add(&mut self, times: &[u64], wall: u64, wait: u64) {
        self.times.extend_from_slice(times);
        self.p50.push(median(times.to_vec()));
        self.mean.push(mean(times));
        self.wall.push(wall);
        self.wait += wait;
    }

    fn vs(&self, k: &Series) -> VsKernel {
        let per_round = |a: &[u64], b: &[u64]| {
            median(
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| ratio(x as f64, y as f64).unwrap_or(0.0))
                    .collect(),
            )
        };
        VsKernel {
            cost: Cost::of(&self.times),
            ratio_p50: per_round(&self.p50, &k.p50),
            ratio_mean: per_round(&self.mean, &k.mean),
            ratio_wall: per_round(&self.wall, &k.wall),
        }
    }

    fn wait_per_fault(&self) -> u64 {
        self.wait / self.times.len().max(1) as u64
    }
}

fn mean(xs: &[u64]) -> u64 {
    xs.iter().sum::<u64>() / xs.len().max(1) as u64
}

/// The handler-thread probe's splits of one kind, pooled.
#[derive(Default)]
struct Pool {
    series: Series,
    delivery: Vec<u64>,
    fill: Vec<u64>,
    map: Vec<u64>,
    continue_ioctl: Vec<u64>,
}

impl Pool {
    fn add(&mut self, s: Split, handler_wait: u64) {
        self.series
            .add(&s.total, s.wall_ns, s.app_wait_ns + handler_wait);
        self.delivery.extend(s.delivery);
        self.fill.extend(s.fill);
        self.map.extend(s.map);
        self.continue_ioctl.extend(s.continue_ioctl);
    }

    fn breakdown(&self, kernel: &Series) -> Breakdown {
        let vs = self.series.vs(kernel);
        Breakdown {
            total: vs.cost,
            delivery: Cost::of(&self.delivery),
            fill: Cost::of(&self.fill),
            map_and_resume: Cost::of(&self.map),
            continue_ioctl: Cost::of(&self.continue_ioctl),
            cpu_wait_per_fault_ns: self.series.wait_per_fault(),
            ratio_to_kernel_p50: vs.ratio_p50,
            ratio_to_kernel_mean: vs.ratio_mean,
        }
    }
}

/// Runs `rounds` rounds of `pages` first touches of every kind.
fn rounds(
    pages: usize,
    zero_around: usize,
    rounds: usize,
    cgroup: &'static str,
) -> Result<Rounds, crate::BenchError> {
    let (mut k_missing, mut k_minor) = (Series::default(), Series::default());
    let mut k_anon = Series::default();
    let (mut handler, mut ft, mut sig) = (Series::default(), Series::default(), Series::default());
    let (mut pinned, mut p_svc) = (Series::default(), Vec::new());
    let (mut per_cpu, mut c_svc) = (Series::default(), Vec::new());
    let (mut default, mut d_svc) = (Series::default(), Vec::new());
    let (mut h_svc, mut ft_svc, mut sig_ioctl) = (Vec::new(), Vec::new(), Vec::new());
    let (mut zero, mut copy, mut minor) = (Pool::default(), Pool::default(), Pool::default());
    // Streams: [sequential, random] x [faulting thread, handler thread].
    let mut streams: [[StreamSeries; 2]; 2] = Default::default();
    let mut rng = StdRng::seed_from_u64(0x5EED_F17E);
    let sequential: Vec<usize> = (0..pages).collect();
    for r in 0..rounds {
        // A new random order each round, the same for the kernel and the pager.
        let mut random = sequential.clone();
        random.shuffle(&mut rng);
        // Which order goes first alternates too (the first run after another kind's gets the
        // pages that kind freed).
        let mut orders = [(0, &sequential), (1, &random)];
        if r % 2 == 1 {
            orders.reverse();
        }
        // Back to back, the kernel first in even rounds and last in odd ones: drift on the
        // noisy machine, and the temperature of recycled pages, hit every kind alike.
        let mut steps: Vec<u8> = (0..12).collect();
        if r % 2 == 1 {
            steps.reverse();
        }
        for step in steps {
            match step {
                0 => {
                    let waited = run_delay_ns();
                    let (m, n, wall) =
                        probe::kernel_faults(pages).doing("probing the kernel's file faults")?;
                    k_missing.add(&m, wall, run_delay_ns().saturating_sub(waited));
                    k_minor.add(&n, 0, 0);
                    let (a, wall) = probe::kernel_anon_faults(pages)
                        .doing("probing the kernel's anonymous faults")?;
                    k_anon.add(&a, wall, 0);
                }
                1 => {
                    let b = pager_block(pages, FaultService::FaultingThread)?;
                    ft.add(&b.times, b.wall_ns, b.app_wait_ns);
                    ft_svc.push(b.service_p50_ns);
                }
                2 => {
                    let s = sigprobe::sigbus_probe(pages)
                        .doing("probing faults served by a SIGBUS handler")?;
                    sig.add(&s.total, s.wall_ns, 0);
                    sig_ioctl.extend(s.ioctl);
                }
                3 => {
                    let b = pager_block(pages, FaultService::HandlerThreads)?;
                    handler.add(&b.times, b.wall_ns, b.app_wait_ns);
                    h_svc.push(b.service_p50_ns);
                }
                10 => {
                    let b = pager_block(pages, FaultService::HandlerPerCpu)?;
                    per_cpu.add(&b.times, b.wall_ns, b.app_wait_ns);
                    c_svc.push(b.service_p50_ns);
                }
                11 => {
                    let b = pager_block(pages, RegionOptions::default().fault_service)?;
                    default.add(&b.times, b.wall_ns, b.app_wait_ns);
                    d_svc.push(b.service_p50_ns);
                }
                6 => {
                    let b = pager_block_pinned(pages)?;
                    pinned.add(&b.times, b.wall_ns, b.app_wait_ns);
                    p_svc.push(b.service_p50_ns);
                }
                4 => {
                    let run = probe::pagepilot_probe(pages, Fill::Zero)
                        .doing("probing pagepilot's faults (zero fill)")?;
                    zero.add(run.missing, run.handler_wait_ns);
                    minor.add(run.minor, 0);
                }
                5 => {
                    let run = probe::pagepilot_probe(pages, Fill::Copy)
                        .doing("probing pagepilot's faults (copy fill)")?;
                    copy.add(run.missing, run.handler_wait_ns);
                }
                // The streams: the kernel's next to the pager's, both orders each.
                7 => {
                    for (o, order) in orders {
                        let wall = probe::kernel_stream(order)
                            .doing("streaming a file through the kernel")?;
                        for series in streams[o].iter_mut() {
                            series.kernel_wall.push(wall);
                        }
                    }
                }
                8 | 9 => {
                    let (i, service) = match step {
                        8 => (0, FaultService::FaultingThread),
                        _ => (1, FaultService::HandlerThreads),
                    };
                    for (o, order) in orders {
                        streams[o][i].pager(order, service, zero_around)?;
                    }
                }
                _ => {}
            }
        }
    }
    let row = |s: &Series, svc: Vec<u64>| PagerRow {
        vs: s.vs(&k_missing),
        service_p50_ns: median(svc),
        app_wait_per_fault_ns: s.wait_per_fault(),
    };
    let probe_vs = sig.vs(&k_missing);
    let ioctl = median(sig_ioctl);
    let bookkeeping = ft
        .p50
        .iter()
        .zip(&sig.p50)
        .map(|(&a, &b)| a as i64 - b as i64)
        .collect::<Vec<i64>>();
    Ok(Rounds {
        cgroup,
        kernel_missing: Cost::of(&k_missing.times),
        kernel_minor: Cost::of(&k_minor.times),
        kernel_missing_private_anon: Cost::of(&k_anon.times),
        faulting_thread_vs_private_anon: ft.vs(&k_anon),
        pager_missing: row(&handler, h_svc),
        pager_missing_handler_per_cpu: row(&per_cpu, c_svc),
        pager_missing_default_service: row(&default, d_svc),
        default_service: format!("{:?}", RegionOptions::default().fault_service),
        pager_missing_handler_pinned: row(&pinned, p_svc),
        pager_missing_faulting_thread: row(&ft, ft_svc),
        faulting_thread_breakdown: SigbusBreakdown {
            probe: probe_vs,
            delivery_ns: probe_vs.cost.p50_ns.saturating_sub(ioctl),
            zeropage_ioctl_ns: ioctl,
            bookkeeping_ns: median(bookkeeping),
        },
        probe_missing_zero: zero.breakdown(&k_missing),
        probe_missing_copy: copy.breakdown(&k_missing),
        probe_minor: minor.breakdown(&k_minor),
        stream: Streams {
            sequential_faulting_thread: streams[0][0].row(pages),
            sequential_handler_thread: streams[0][1].row(pages),
            random_faulting_thread: streams[1][0].row(pages),
            random_handler_thread: streams[1][1].row(pages),
        },
    })
}

/// Steal time of all CPUs so far, ms (`/proc/stat`, ticks of 10 ms).
fn steal_ms() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: u64 = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(8)?.parse().ok())
        .unwrap_or(0);
    ticks * 10
}

fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text.split_whitespace().map(|x| x.parse().unwrap_or(0.0));
    [(); 3].map(|()| it.next().unwrap_or(0.0))
}

/// The memory cgroup (v1) this process is in, to come back to.
fn own_memory_cgroup() -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        ctl.split(',')
            .any(|c| c == "memory")
            .then(|| path.to_string())
    })?;
    Some(std::path::Path::new(cgroup::MEMORY_ROOT).join(rel.trim_start_matches('/')))
}

/// The rounds inside a fresh memory cgroup (no limit that matters: 1 GiB), then back.
fn rounds_in_fresh_cgroup(
    pages: usize,
    zero_around: usize,
    n: usize,
) -> Result<Rounds, crate::BenchError> {
    let home = own_memory_cgroup().ok_or_else(|| crate::BenchError::Measurement {
        bench: "faults",
        what: "--cgroup: this process's memory cgroup is unknown".into(),
    })?;
    let cg = MemCgroup::create(1 << 30)?;
    cgroup::enter(cg.dir(), cgroup::Entry::AsIs)?;
    let result = rounds(pages, zero_around, n, "fresh");
    // Back home before the cgroup is removed (its drop empties it).
    cgroup::join(&home)?;
    drop(cg);
    result
}

/// Runs `pagepilot bench faults`.
pub fn run(args: Args) -> BenchResult {
    let report = measure(&args)?;
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| {
        print_text(&report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

/// Runs the rounds `args` ask for.
pub(crate) fn measure(args: &Args) -> Result<FaultsReport, crate::BenchError> {
    check_range("--pages", args.pages, 1 << 20)?;
    check_range("--rounds", args.rounds, 1000)?;
    let (load_before, steal_before) = (loadavg(), steal_ms());
    check_range("--zero-around", args.zero_around, 1 << 16)?;
    let process = rounds(args.pages, args.zero_around, args.rounds, "process")?;
    let cgroup_refused = args
        .cgroup
        .then(super::kernel::baseline_available)
        .and_then(Result::err);
    if let Some(why) = &cgroup_refused {
        eprintln!("bench faults: no --cgroup rounds: {why}");
    }
    let fresh_cgroup = if args.cgroup && cgroup_refused.is_none() {
        Some(rounds_in_fresh_cgroup(
            args.pages,
            args.zero_around,
            args.rounds,
        )?)
    } else {
        None
    };
    let report = FaultsReport {
        bench: "faults",
        pages: args.pages,
        rounds: args.rounds,
        zero_around_max_pages: args.zero_around,
        load_before,
        load_after: loadavg(),
        steal_ms: steal_ms().saturating_sub(steal_before),
        process,
        fresh_cgroup,
    };
    Ok(report)
}

fn us(c: Cost) -> String {
    format!(
        "{:>7.2} / {:>7.2}",
        c.p50_ns as f64 / 1e3,
        c.mean_ns as f64 / 1e3
    )
}

fn vs_line(v: &VsKernel) -> String {
    format!(
        "{}   x kernel: p50 {:.2} mean {:.2} wall {:.2}",
        us(v.cost),
        v.ratio_p50,
        v.ratio_mean,
        v.ratio_wall
    )
}

fn print_text(r: &FaultsReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "fault cost: {} rounds x {} first touches per kind (p50 / mean us; ratios: median over \
         rounds of per-round ratios); load {:.2} -> {:.2}, steal {} ms",
        r.rounds, r.pages, r.load_before[0], r.load_after[0], r.steal_ms
    )?;
    print_rounds(&r.process, r.zero_around_max_pages, out)?;
    if let Some(f) = &r.fresh_cgroup {
        print_rounds(f, r.zero_around_max_pages, out)?;
    }
    Ok(())
}

fn print_rounds(r: &Rounds, zero_around: usize, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "[memory cgroup: {}]", r.cgroup)?;
    writeln!(
        out,
        "  kernel missing (shmem first touch)     {}",
        us(r.kernel_missing)
    )?;
    writeln!(
        out,
        "  kernel minor (shmem after DONTNEED)    {}",
        us(r.kernel_minor)
    )?;
    writeln!(
        out,
        "  kernel private anonymous first touch   {}",
        us(r.kernel_missing_private_anon)
    )?;
    let ft = &r.pager_missing_faulting_thread;
    writeln!(
        out,
        "  pager, faulting thread (SIGBUS)        {}",
        vs_line(&ft.vs)
    )?;
    let a = &r.faulting_thread_vs_private_anon;
    writeln!(
        out,
        "    against the private anonymous touch  x kernel: p50 {:.2} mean {:.2} wall {:.2}",
        a.ratio_p50, a.ratio_mean, a.ratio_wall
    )?;
    let b = &r.faulting_thread_breakdown;
    writeln!(
        out,
        "    probe: SIGBUS + ZEROPAGE only        {}",
        vs_line(&b.probe)
    )?;
    writeln!(
        out,
        "    = fault entry + signal + sigreturn {:.2} us | ZEROPAGE ioctl {:.2} us | \
         pagepilot bookkeeping {:+.2} us (service p50 {:.2} us)",
        b.delivery_ns as f64 / 1e3,
        b.zeropage_ioctl_ns as f64 / 1e3,
        b.bookkeeping_ns as f64 / 1e3,
        ft.service_p50_ns as f64 / 1e3
    )?;
    let h = &r.pager_missing;
    writeln!(
        out,
        "  pager, 1 handler thread                {}",
        vs_line(&h.vs)
    )?;
    writeln!(
        out,
        "    service p50 {:.2} us; application thread waited for a CPU {:.2} us per fault",
        h.service_p50_ns as f64 / 1e3,
        h.app_wait_per_fault_ns as f64 / 1e3
    )?;
    let p = &r.pager_missing_handler_pinned;
    writeln!(
        out,
        "  pager, handler on the application's CPU {}",
        vs_line(&p.vs)
    )?;
    let c = &r.pager_missing_handler_per_cpu;
    writeln!(
        out,
        "  pager, a handler kept to each CPU      {}",
        vs_line(&c.vs)
    )?;
    let d = &r.pager_missing_default_service;
    writeln!(
        out,
        "  pager, defaults ({:<16})     {}",
        r.default_service,
        vs_line(&d.vs)
    )?;
    for (name, b) in [
        (
            "probe, handler: zero (POPULATE_WRITE)",
            &r.probe_missing_zero,
        ),
        ("probe, handler: copy (pwrite)", &r.probe_missing_copy),
        ("probe, handler: minor (CONTINUE)", &r.probe_minor),
    ] {
        writeln!(
            out,
            "  {name:<38} {}   x kernel: p50 {:.2} mean {:.2}",
            us(b.total),
            b.ratio_to_kernel_p50,
            b.ratio_to_kernel_mean
        )?;
        writeln!(
            out,
            "    delivery {} | fill {} | map+resume {} (CONTINUE ioctl {}) | waiting for a CPU \
             {:.2} us/fault",
            us(b.delivery),
            us(b.fill),
            us(b.map_and_resume),
            us(b.continue_ioctl),
            b.cpu_wait_per_fault_ns as f64 / 1e3
        )?;
    }
    writeln!(
        out,
        "  first-touch stream, zero clusters of up to {} pages (wall per page, against the \
         kernel's first touch of as many pages in the same order):",
        zero_around
    )?;
    let st = &r.stream;
    for (name, s) in [
        (
            "sequential, faulting thread",
            &st.sequential_faulting_thread,
        ),
        (
            "sequential, 1 handler thread",
            &st.sequential_handler_thread,
        ),
        ("random, faulting thread", &st.random_faulting_thread),
        ("random, 1 handler thread", &st.random_handler_thread),
    ] {
        writeln!(
            out,
            "    {name:<29} {:>6.2} us/page (kernel {:>5.2})   x kernel: wall {:.2}   fault \
             events/page {:.3}, zero-filled ahead/page {:.3}, service p50 {:.2} us/event",
            s.per_page_ns as f64 / 1e3,
            s.kernel_per_page_ns as f64 / 1e3,
            s.ratio_wall,
            s.fault_events_per_page,
            s.zero_around_per_page,
            s.service_p50_ns as f64 / 1e3
        )?;
    }
    Ok(())
}
