//! The Cache Kernel (Cheriton and Duda): a page fault's cost split into the
//! transfer to the application kernel and the mapping load (§5: 99 us = 32 +
//! 67), from `bench faults`; and the cost of loading a mapping when another
//! must be written back first (Table 2: 45 us without write-back, 145 with),
//! from two `bench scan` runs of uniform page reads under a budget below the
//! file, one reading only, one writing every page it touches (so that every
//! eviction writes a dirty page back). Write-back here includes the disk
//! write; the paper's excludes I/O: compare the direction, not the size.

use super::report::{Claim, Relation};
use super::{bench_args, json, strings, Ctx, ExpError, Outcome};

/// §5: a fault costs 99 us, 32 of them the transfer to the application kernel.
const FAULT_US: f64 = 99.0;
const TRANSFER_US: f64 = 32.0;
/// Table 2, mappings: load without write-back, with write-back, unload (us).
const LOAD_US: f64 = 45.0;
const LOAD_WRITEBACK_US: f64 = 145.0;
const UNLOAD_US: f64 = 160.0;

/// The fault-cost split: `bench faults`.
pub(super) fn faults(cx: &Ctx) -> Result<Outcome, ExpError> {
    super::need_userfaultfd()?;
    let argv = strings(&[
        "--pages",
        cx.size.pick("256", "1024", "1024"),
        "--rounds",
        cx.size.pick("3", "7", "15"),
        "--format",
        "json",
    ]);
    let (args, command) = bench_args::<crate::faults::Args>("faults", &argv)?;
    let r = crate::faults::measure(&args)?;
    let b = &r.process.faulting_thread_breakdown;
    let whole = (b.delivery_ns + b.zeropage_ioctl_ns) as f64 + b.bookkeeping_ns.max(0) as f64;
    let minor = &r.process.probe_minor;
    let claims = vec![
        Claim::new("transfer / whole fault, faulting thread (SIGBUS)", "Section 5", Relation::About, TRANSFER_US / FAULT_US, (whole > 0.0).then(|| b.delivery_ns as f64 / whole), "")
            .with_note(format!("delivery {} ns, UFFDIO_ZEROPAGE {} ns, pagepilot {} ns", b.delivery_ns, b.zeropage_ioctl_ns, b.bookkeeping_ns)),
        Claim::new("transfer / whole fault, handler thread, minor fault", "Section 5", Relation::About, TRANSFER_US / FAULT_US, (minor.total.p50_ns > 0).then(|| minor.delivery.p50_ns as f64 / minor.total.p50_ns as f64), "")
            .with_note(format!("delivery {} ns of {} ns (p50)", minor.delivery.p50_ns, minor.total.p50_ns)),
        Claim::new("user-level fault / the kernel's own fault", "Section 5", Relation::About, 1.0, Some(r.process.pager_missing_faulting_thread.vs.ratio_p50), "x")
            .with_note("paper: comparable to Ultrix's fault; ours: pagepilot's faulting thread against Linux's first touch of shmem"),
    ];
    Ok(Outcome {
        claims,
        commands: vec![command],
        data: json(&r),
        ..Outcome::default()
    })
}

/// One `bench scan` run of uniform reads, writing `write` of the pages.
fn scan(cx: &Ctx, write: &str) -> Result<(Option<f64>, String, serde_json::Value), ExpError> {
    let argv = strings(&[
        "--file-mb",
        cx.size.pick("16", "64", "256"),
        "--budgets-mb",
        cx.size.pick("4", "16", "64"),
        "--patterns",
        "uniform",
        "--cache",
        "cold",
        "--threads",
        "1",
        "--ops",
        cx.size.pick("1500", "3000", "20000"),
        "--runs",
        cx.size.pick("1", "1", "3"),
        "--write-fraction",
        write,
        "--format",
        "json",
    ]);
    let (args, command) = bench_args::<crate::scan::Args>("scan", &argv)?;
    let r = crate::scan::measure(args)?;
    let pps = r.points.first().and_then(|p| p.defaults_pages_per_s);
    Ok((pps, command, json(&r)))
}

/// Load with and without write-back: two `bench scan` runs.
pub(super) fn writeback(cx: &Ctx) -> Result<Outcome, ExpError> {
    super::need_userfaultfd()?;
    let (clean, c1, d1) = scan(cx, "0")?;
    let (dirty, c2, d2) = scan(cx, "1")?;
    let ratio = clean.zip(dirty).and_then(|(c, d)| (d > 0.0).then(|| c / d));
    let claims = vec![
        Claim::new("page-in with write-back / without", "Table 2", Relation::AtLeast, LOAD_WRITEBACK_US / LOAD_US, ratio, "x")
            .with_note("ours: pagepilot's pages/s reading / writing every touched page, uniform order, budget a quarter of the file"),
        Claim::new("unload / load of a mapping", "Table 2", Relation::About, UNLOAD_US / LOAD_US, None, "x")
            .with_note("not measured: no benchmark times an unmap alone (scan's writing runs include the unmap's write-back)"),
    ];
    Ok(Outcome {
        claims,
        commands: vec![c1, c2],
        notes: vec![
            "`>=`: ours includes writing the page to disk, the paper's does not; the paper's ratio is a floor.".into(),
            format!(
                "pagepilot (defaults) pages/s: reading {}, writing {}",
                clean.map_or("-".into(), |v| format!("{v:.0}")),
                dirty.map_or("-".into(), |v| format!("{v:.0}"))
            ),
        ],
        data: serde_json::json!({ "read_only": d1, "writing": d2 }),
        ..Outcome::default()
    })
}
