//! `pagepilot bench faults`: the cost of a fault served by pagepilot against the kernel's own
//! fault on the same kind of memory (shmem), side by side in one run, with the Cache Kernel
//! paper's split of a fault (its 99 us = 32 us delivery + 67 us mapping): delivery to the
//! handler vs filling and mapping, measured with a timestamped userfaultfd loop of pagepilot's
//! shape (see `probe.rs`), and the end-to-end cost through the real pager.

use std::io::Write;

use serde::Serialize;

use super::live;
use super::measure::{check_range, median, ratio, Format};
use super::probe::{self, Fill, Split};
use crate::cmd::CmdResult;
use pagepilot_pager::FaultService;

/// Arguments of `pagepilot bench faults`.
#[derive(clap::Args)]
pub struct Args {
    /// Pages (faults) per kind and run.
    #[arg(long, default_value_t = 4096)]
    pages: usize,
    /// Runs; samples of all runs are pooled.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Summary of per-fault times.
#[derive(Serialize, Clone, Copy)]
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

/// A fault kind served by the probe, split into its parts.
#[derive(Serialize)]
pub struct Breakdown {
    /// What the application waits.
    pub total: Cost,
    /// Fault raised -> handler holds the userfaultfd message.
    pub delivery: Cost,
    /// Handler holds the message -> page filled (zero or copy; nothing for minor).
    pub fill: Cost,
    /// Page filled -> application running again (`UFFDIO_CONTINUE` and wake-up).
    pub map_and_resume: Cost,
    /// The `UFFDIO_CONTINUE` ioctl alone, handler side.
    pub continue_ioctl: Cost,
    /// total (mean) / the kernel's same kind of fault (mean).
    pub ratio_to_kernel_mean: f64,
    /// total (p50) / the kernel's (p50).
    pub ratio_to_kernel_p50: f64,
}

/// The whole report.
#[derive(Serialize)]
pub struct FaultsReport {
    /// Always "faults".
    pub bench: &'static str,
    /// Faults per kind and run.
    pub pages: usize,
    /// Runs.
    pub runs: usize,
    /// The kernel's first-touch fault on shmem (allocate, zero, map).
    pub kernel_missing: Cost,
    /// The kernel's fault on a shmem page still in the page cache after `MADV_DONTNEED`.
    pub kernel_minor: Cost,
    /// Probe: missing fault served with a zeroed page (`MADV_POPULATE_WRITE`).
    pub probe_missing_zero: Breakdown,
    /// Probe: missing fault served by copying from memory (`pwrite` into the memfd).
    pub probe_missing_copy: Breakdown,
    /// Probe: minor fault (page in the memfd, PTE zapped) served by `UFFDIO_CONTINUE`.
    pub probe_minor: Breakdown,
    /// The real pager: missing faults of an anonymous region within its budget, served by
    /// its handler thread.
    pub pager_missing: Cost,
    /// pager_missing (mean) / kernel_missing (mean).
    pub pager_missing_ratio_to_kernel: f64,
    /// pager_missing (p50) / kernel_missing (p50).
    pub pager_missing_ratio_to_kernel_p50: f64,
    /// The same, served by the faulting thread itself (SIGBUS, no hand-off).
    pub pager_missing_faulting_thread: Cost,
    /// pager_missing_faulting_thread (mean) / kernel_missing (mean).
    pub pager_faulting_thread_ratio_to_kernel: f64,
    /// pager_missing_faulting_thread (p50) / kernel_missing (p50).
    pub pager_faulting_thread_ratio_to_kernel_p50: f64,
    /// The pager's own fault-service latency p50 (handler side), ns.
    pub pager_service_p50_ns: u64,
    /// The pager's own fault-service latency p99, ns.
    pub pager_service_p99_ns: u64,
}

#[derive(Default)]
struct Pool {
    total: Vec<u64>,
    delivery: Vec<u64>,
    fill: Vec<u64>,
    map: Vec<u64>,
    continue_ioctl: Vec<u64>,
}

impl Pool {
    fn add(&mut self, s: Split) {
        self.total.extend(s.total);
        self.delivery.extend(s.delivery);
        self.fill.extend(s.fill);
        self.map.extend(s.map);
        self.continue_ioctl.extend(s.continue_ioctl);
    }

    fn breakdown(&self, kernel: &[u64]) -> Breakdown {
        let total = Cost::of(&self.total);
        let k = Cost::of(kernel);
        Breakdown {
            total,
            delivery: Cost::of(&self.delivery),
            fill: Cost::of(&self.fill),
            map_and_resume: Cost::of(&self.map),
            continue_ioctl: Cost::of(&self.continue_ioctl),
            ratio_to_kernel_mean: ratio(total.mean_ns as f64, k.mean_ns as f64),
            ratio_to_kernel_p50: ratio(total.p50_ns as f64, k.p50_ns as f64),
        }
    }
}

/// Runs `pagepilot bench faults`.
pub fn run(args: Args) -> CmdResult {
    check_range("--pages", args.pages, 1 << 20)?;
    check_range("--runs", args.runs, 100)?;
    let (mut k_missing, mut k_minor, mut pager) = (Vec::new(), Vec::new(), Vec::new());
    let mut pager_ft = Vec::new();
    let (mut zero, mut copy, mut minor) = (Pool::default(), Pool::default(), Pool::default());
    let (mut svc50, mut svc99) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        // Interleaved, so drift on the noisy machine hits every kind alike.
        let (km, kn) = probe::kernel_faults(args.pages)?;
        k_missing.extend(km);
        k_minor.extend(kn);
        let (m, n) = probe::pagepilot_probe(args.pages, Fill::Zero)?;
        zero.add(m);
        minor.add(n);
        let (m, _) = probe::pagepilot_probe(args.pages, Fill::Copy)?;
        copy.add(m);
        let (t, p50, p99) = live::anon_missing_faults(args.pages, FaultService::HandlerThreads)?;
        pager.extend(t);
        let (t, _, _) = live::anon_missing_faults(args.pages, FaultService::FaultingThread)?;
        pager_ft.extend(t);
        svc50.push(p50);
        svc99.push(p99);
    }
    let kernel_missing = Cost::of(&k_missing);
    let pager_missing = Cost::of(&pager);
    let pager_ft = Cost::of(&pager_ft);
    let vs_kernel = |c: Cost| {
        (
            ratio(c.mean_ns as f64, kernel_missing.mean_ns as f64),
            ratio(c.p50_ns as f64, kernel_missing.p50_ns as f64),
        )
    };
    let report = FaultsReport {
        bench: "faults",
        pages: args.pages,
        runs: args.runs,
        kernel_missing,
        kernel_minor: Cost::of(&k_minor),
        probe_missing_zero: zero.breakdown(&k_missing),
        probe_missing_copy: copy.breakdown(&k_missing),
        probe_minor: minor.breakdown(&k_minor),
        pager_missing,
        pager_missing_ratio_to_kernel: vs_kernel(pager_missing).0,
        pager_missing_ratio_to_kernel_p50: vs_kernel(pager_missing).1,
        pager_missing_faulting_thread: pager_ft,
        pager_faulting_thread_ratio_to_kernel: vs_kernel(pager_ft).0,
        pager_faulting_thread_ratio_to_kernel_p50: vs_kernel(pager_ft).1,
        pager_service_p50_ns: median(svc50),
        pager_service_p99_ns: median(svc99),
    };
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Format::Text => print_text(&report, &mut out)?,
    }
    Ok(())
}

fn print_text(r: &FaultsReport, out: &mut dyn Write) -> std::io::Result<()> {
    let us = |c: Cost| {
        format!(
            "{:>7.2} / {:>7.2}",
            c.p50_ns as f64 / 1e3,
            c.mean_ns as f64 / 1e3
        )
    };
    writeln!(
        out,
        "fault cost, {} faults per kind x {} runs (p50 / mean, us)",
        r.pages, r.runs
    )?;
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
    for (name, b) in [
        ("uffd missing, zero (POPULATE_WRITE)", &r.probe_missing_zero),
        ("uffd missing, copy (pwrite)", &r.probe_missing_copy),
        ("uffd minor (CONTINUE only)", &r.probe_minor),
    ] {
        writeln!(
            out,
            "  {name:<38} {}   ratio to kernel {:.2}x (p50 {:.2}x)",
            us(b.total),
            b.ratio_to_kernel_mean,
            b.ratio_to_kernel_p50
        )?;
        writeln!(
            out,
            "    delivery {} | fill {} | map+resume {} (CONTINUE ioctl {})",
            us(b.delivery),
            us(b.fill),
            us(b.map_and_resume),
            us(b.continue_ioctl)
        )?;
    }
    writeln!(
        out,
        "  pagepilot pager, anon missing          {}   ratio to kernel {:.2}x (p50 {:.2}x)",
        us(r.pager_missing),
        r.pager_missing_ratio_to_kernel,
        r.pager_missing_ratio_to_kernel_p50
    )?;
    writeln!(
        out,
        "  pager, faulting thread serves (SIGBUS) {}   ratio to kernel {:.2}x (p50 {:.2}x)",
        us(r.pager_missing_faulting_thread),
        r.pager_faulting_thread_ratio_to_kernel,
        r.pager_faulting_thread_ratio_to_kernel_p50
    )?;
    writeln!(
        out,
        "    pager's own service latency p50 {:.2} us, p99 {:.2} us",
        r.pager_service_p50_ns as f64 / 1e3,
        r.pager_service_p99_ns as f64 / 1e3
    )
}
