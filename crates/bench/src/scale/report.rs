//! `bench scale`'s rows, their medians and ratios against the smallest region, the issue's
//! targets and their verdicts, as a table or JSON.

use std::io::{self, Write};

use serde::Serialize;

use super::child::{Measurement, POLICY};
use super::{size_label, Args, Backing, Order, Side, MIB};
use crate::measure::{median, ratio};

/// Resident memory a region may add beyond its budget (page tables apart), MiB.
pub const RSS_BEYOND_BUDGET_MIB: f64 = 48.0;
/// Most a large region's time per random touch, and its unmap, may exceed the 1 GiB
/// region's.
pub const MAX_RATIO: f64 = 1.25;
/// Regions from this size on are held to the targets.
const TARGET_FROM: u64 = 1 << 40;
/// Resident pages at unmap within this share of the reference's count as equal residency.
const EQUAL_RESIDENCY: f64 = 0.10;

/// How one measurement ended.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// It ran to the end.
    Measured(Measurement),
    /// The child was killed by the OOM killer (the kernel's in its cgroup of the budget, with
    /// no swap for anonymous memory; pagepilot's above `--child-limit-mb`).
    Oom,
    /// The child ran longer than `--timeout-s` and was killed.
    Timeout,
}

impl Outcome {
    /// One word for the progress lines.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Measured(_) => "ok",
            Outcome::Oom => "oom",
            Outcome::Timeout => "timeout",
        }
    }
}

/// One row: a (backing, order, size, side) and every round's outcome.
#[derive(Clone, Debug)]
pub struct Row {
    /// A sparse file or anonymous memory.
    pub backing: Backing,
    /// Random or sequential touches.
    pub order: Order,
    /// The region's size, bytes.
    pub size: u64,
    /// pagepilot or the kernel.
    pub side: Side,
    /// Each round's outcome, in order.
    pub runs: Vec<Outcome>,
}

impl Row {
    /// A row not run yet.
    pub fn new(backing: Backing, order: Order, size: u64, side: Side) -> Row {
        Row {
            backing,
            order,
            size,
            side,
            runs: Vec::new(),
        }
    }

    /// `file random 1T pagepilot`.
    pub fn label(&self) -> String {
        format!(
            "{} {} {} {}",
            lower(self.backing),
            lower(self.order),
            size_label(self.size),
            lower(self.side)
        )
    }

    fn measured(&self) -> Vec<Measurement> {
        self.runs
            .iter()
            .filter_map(|o| match o {
                Outcome::Measured(m) => Some(*m),
                _ => None,
            })
            .collect()
    }
}

/// A serde enum's lowercase name.
fn lower<T: Serialize>(x: T) -> String {
    serde_json::to_value(x)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Medians over a row's measured runs, each field separately.
#[derive(Clone, Debug, Serialize)]
pub struct Medians {
    /// Map time, ms.
    pub map_ms: f64,
    /// Median time of one touch, us.
    pub touch_p50_us: f64,
    /// Mean time of one touch (sum of the touches' times / touches), us.
    pub touch_mean_us: f64,
    /// 99th percentile of a touch, us.
    pub touch_p99_us: f64,
    /// Unmap time (dirty pages written back included), ms.
    pub unmap_ms: f64,
    /// Pages resident at unmap.
    pub resident_pages: u64,
    /// Growth of `VmRSS` from before the map to after the touches, MiB.
    pub rss_growth_mib: f64,
    /// Growth of `RssAnon` (private memory: heap, the pager's records, thread stacks), MiB.
    pub anon_growth_mib: f64,
    /// Memory holding the region's pages after the touches, MiB: pagepilot's frames
    /// (`Region::allocated_bytes`), the kernel's resident pages.
    pub frames_mib: f64,
    /// pagepilot: `anon_growth_mib` + `frames_mib` − the budget, the memory the process holds
    /// beyond its budget, page tables apart (the target: at most 48). Not `VmRSS`,
    /// which misses frames unmapped by reference-bit emulation. `None` for the kernel.
    pub beyond_budget_mib: Option<f64>,
    /// Growth of `VmPTE` (page tables), KiB.
    pub pte_growth_kib: u64,
    /// The pager's own structures for the region after the touches
    /// (`RegionStats::bookkeeping_bytes`), MiB; `None` for the kernel.
    pub bookkeeping_mib: Option<f64>,
    /// Reads checked against the bytes written before them.
    pub reads_checked: u64,
    /// Written bytes read back from the file after the unmap and found right.
    pub writes_checked: u64,
}

impl Medians {
    fn of(runs: &[Measurement], budget_mib: f64, side: Side) -> Option<Medians> {
        if runs.is_empty() {
            return None;
        }
        let m = |f: fn(&Measurement) -> u64| median(runs.iter().map(f).collect());
        let rss = m(|r| r.rss_after_kib.saturating_sub(r.rss_before_kib)) as f64 / 1024.0;
        let anon = m(|r| r.anon_after_kib.saturating_sub(r.anon_before_kib)) as f64 / 1024.0;
        let frames = m(|r| r.frames_bytes) as f64 / MIB as f64;
        let book: Vec<u64> = runs.iter().filter_map(|r| r.bookkeeping_bytes).collect();
        Some(Medians {
            map_ms: m(|r| r.map_ns) as f64 / 1e6,
            touch_p50_us: m(|r| r.touch_p50_ns) as f64 / 1e3,
            touch_mean_us: m(|r| r.touch_mean_ns) as f64 / 1e3,
            touch_p99_us: m(|r| r.touch_p99_ns) as f64 / 1e3,
            unmap_ms: m(|r| r.unmap_ns) as f64 / 1e6,
            resident_pages: m(|r| r.resident_pages),
            rss_growth_mib: rss,
            anon_growth_mib: anon,
            frames_mib: frames,
            beyond_budget_mib: (side == Side::Pagepilot).then_some(anon + frames - budget_mib),
            pte_growth_kib: m(|r| r.pte_after_kib.saturating_sub(r.pte_before_kib)),
            bookkeeping_mib: (!book.is_empty()).then(|| median(book) as f64 / MIB as f64),
            reads_checked: m(|r| r.reads_checked),
            writes_checked: m(|r| r.writes_checked),
        })
    }
}

/// Ratios of a row against the reference row (the smallest size, 1 GiB by default) of the
/// same backing, order and side.
#[derive(Clone, Debug, Serialize)]
pub struct Ratios {
    /// The reference row's size.
    pub reference_size: String,
    /// Median touch time / the reference's.
    pub touch_p50: f64,
    /// Mean touch time / the reference's (the one the target is judged on).
    pub touch_mean: f64,
    /// Unmap time / the reference's.
    pub unmap: f64,
    /// Resident pages at unmap / the reference's (1: the unmaps compare at equal residency).
    pub resident: f64,
}

/// One row of the report.
#[derive(Serialize)]
pub struct RowReport {
    /// `file` or `anon`.
    pub backing: Backing,
    /// `random` or `sequential`.
    pub order: Order,
    /// The size, as `1G`.
    pub size: String,
    /// The size in bytes.
    pub size_bytes: u64,
    /// `pagepilot` or `kernel`.
    pub side: Side,
    /// `ok`, `oom`, `timeout`, or `ok 2/3` when some rounds were not measured.
    pub status: String,
    /// Medians of the measured runs (`None`: none was).
    pub medians: Option<Medians>,
    /// Against the reference row (`None` for it, or when either is unmeasured).
    pub ratios: Option<Ratios>,
    /// Every round's outcome.
    pub runs: Vec<Outcome>,
}

/// A target of issue 13 and whether this run meets it.
#[derive(Serialize)]
pub struct Target {
    /// What is held to what.
    pub target: String,
    /// The value measured (`None`: not measured).
    pub value: Option<f64>,
    /// Its limit.
    pub limit: f64,
    /// `met`, `not met`, `not met (oom)`, `not measured (...)`, or `not comparable (...)`
    /// (a different number of pages resident at unmap).
    pub verdict: String,
}

/// The whole report.
#[derive(Serialize)]
pub struct Report {
    /// Always "scale".
    pub bench: &'static str,
    /// The budget, MiB.
    pub budget_mb: usize,
    /// Touches per measurement.
    pub touches: usize,
    /// Rounds.
    pub runs: usize,
    /// pagepilot's policy (its only option: everything else is the pager's default).
    pub policy: &'static str,
    /// A child's time limit, s.
    pub timeout_s: usize,
    /// Memory cgroup limit of a pagepilot child, MiB (none without the memory controller).
    pub child_limit_mb: usize,
    /// The kernel's file mappings of random-order rows were advised `MADV_RANDOM`.
    pub kernel_madvise_random: bool,
    /// Why the kernel rows are missing, if they are.
    pub kernel_skipped: Option<String>,
    /// The rows.
    pub rows: Vec<RowReport>,
    /// Issue 13's targets for pagepilot's regions of 1 TiB and more.
    pub targets: Vec<Target>,
    /// Wall time of the whole benchmark, s.
    pub wall_s: f64,
}

impl Report {
    /// Medians, ratios and verdicts of the rows run.
    pub fn new(args: &Args, rows: Vec<Row>, kernel_skipped: Option<String>, wall_s: f64) -> Report {
        let budget_mib = args.budget_mb as f64;
        let smallest = rows.iter().map(|r| r.size).min().unwrap_or(0);
        let medians: Vec<Option<Medians>> = rows
            .iter()
            .map(|r| Medians::of(&r.measured(), budget_mib, r.side))
            .collect();
        let reference = |r: &Row| {
            rows.iter().zip(&medians).find_map(|(o, m)| {
                let same = (o.backing, o.order, o.side) == (r.backing, r.order, r.side);
                (same && o.size == smallest).then_some(m.as_ref()).flatten()
            })
        };
        let mut out = Vec::new();
        for (row, med) in rows.iter().zip(&medians) {
            let ratios = match (med, reference(row)) {
                (Some(m), Some(base)) if row.size != smallest => Some(Ratios {
                    reference_size: size_label(smallest),
                    touch_p50: ratio(m.touch_p50_us, base.touch_p50_us).unwrap_or(0.0),
                    touch_mean: ratio(m.touch_mean_us, base.touch_mean_us).unwrap_or(0.0),
                    unmap: ratio(m.unmap_ms, base.unmap_ms).unwrap_or(0.0),
                    resident: ratio(m.resident_pages as f64, base.resident_pages as f64)
                        .unwrap_or(0.0),
                }),
                _ => None,
            };
            out.push(RowReport {
                backing: row.backing,
                order: row.order,
                size: size_label(row.size),
                size_bytes: row.size,
                side: row.side,
                status: status(&row.runs),
                medians: med.clone(),
                ratios,
                runs: row.runs.clone(),
            });
        }
        let targets = targets(&out, smallest);
        Report {
            bench: "scale",
            budget_mb: args.budget_mb,
            touches: args.touches,
            runs: args.runs,
            policy: POLICY,
            timeout_s: args.timeout_s,
            child_limit_mb: args.child_limit_mb,
            kernel_madvise_random: args.kernel_madvise_random,
            kernel_skipped,
            rows: out,
            targets,
            wall_s,
        }
    }

    /// The table, the targets' verdicts under it.
    pub fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(
            out,
            "bench scale: budget {} MiB, {} touches per row (half 1-byte writes), medians of {} \
             round(s), each measurement in a fresh process",
            self.budget_mb, self.touches, self.runs
        )?;
        writeln!(
            out,
            "pagepilot: Region::map_file/map_anon(.., \"{}\") with no option; kernel: mmap in a \
             memory cgroup of the budget + its page tables (file: MAP_SHARED, unmap = msync + \
             munmap; anon: MAP_NORESERVE){}",
            self.policy,
            if self.kernel_madvise_random {
                "; random rows' file mappings MADV_RANDOM"
            } else {
                ""
            }
        )?;
        if let Some(why) = &self.kernel_skipped {
            writeln!(out, "kernel rows skipped: {why}")?;
        }
        writeln!(
            out,
            "touch: p50 and mean (sum / touches) of each touch's time; RSS+: VmRSS growth, anon+: \
             RssAnon growth, over: anon+ + frames (memfd) - budget; PTE+: VmPTE growth; book: the pager's RegionStats::bookkeeping_bytes; x: ratio to the {} \
             row of the same backing, order and side",
            self.rows
                .iter()
                .find_map(|r| r.ratios.as_ref().map(|x| x.reference_size.clone()))
                .unwrap_or_else(|| "smallest".into())
        )?;
        writeln!(
            out,
            "{:<6} {:<10} {:>5} {:<9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} \
             {:>7} {:>7} {:<8}",
            "back",
            "order",
            "size",
            "side",
            "map ms",
            "p50 us",
            "mean us",
            "unmap ms",
            "resident",
            "RSS+ MiB",
            "anon+ MiB",
            "over MiB",
            "PTE+ KiB",
            "book MiB",
            "touch x",
            "unmap x",
            "status"
        )?;
        for r in &self.rows {
            write!(
                out,
                "{:<6} {:<10} {:>5} {:<9} ",
                lower(r.backing),
                lower(r.order),
                r.size,
                lower(r.side)
            )?;
            match &r.medians {
                Some(m) => write!(
                    out,
                    "{:>9.2} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8.1} {:>9.1} {:>8} {:>8} {:>8} ",
                    m.map_ms,
                    m.touch_p50_us,
                    m.touch_mean_us,
                    m.unmap_ms,
                    m.resident_pages,
                    m.rss_growth_mib,
                    m.anon_growth_mib,
                    m.beyond_budget_mib
                        .map_or_else(|| "-".into(), |b| format!("{b:.1}")),
                    m.pte_growth_kib,
                    m.bookkeeping_mib
                        .map_or_else(|| "-".into(), |b| format!("{b:.1}"))
                )?,
                None => write!(
                    out,
                    "{:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} ",
                    "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"
                )?,
            }
            match &r.ratios {
                Some(x) => write!(out, "{:>7.2} {:>7.2} ", x.touch_mean, x.unmap)?,
                None => write!(out, "{:>7} {:>7} ", "-", "-")?,
            }
            writeln!(out, "{}", r.status)?;
        }
        writeln!(out, "targets (issue 13, pagepilot's defaults):")?;
        if self.targets.is_empty() {
            writeln!(out, "  none evaluated: no size of 1T or more")?;
        }
        for t in &self.targets {
            let value = t.value.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
            writeln!(
                out,
                "  {:<62} {:>8} (limit {:.2}): {}",
                t.target, value, t.limit, t.verdict
            )?;
        }
        writeln!(out, "wall time {:.0} s", self.wall_s)
    }
}

/// `ok`, `oom`, `timeout`, or `ok 2/3`.
fn status(runs: &[Outcome]) -> String {
    let ok = runs
        .iter()
        .filter(|o| matches!(o, Outcome::Measured(_)))
        .count();
    if ok == runs.len() {
        "ok".into()
    } else if ok == 0 {
        runs.first().map_or("-", Outcome::word).into()
    } else {
        let failed = runs.iter().find(|o| !matches!(o, Outcome::Measured(_)));
        format!(
            "ok {ok}/{} ({})",
            runs.len(),
            failed.map_or("-", Outcome::word)
        )
    }
}

/// Issue 13's targets for pagepilot's rows of 1 TiB and more: resident memory beyond the
/// budget (every backing and order), time per random touch and unmap (at equal residency)
/// against the reference size. A row killed by the OOM killer fails them all.
fn targets(rows: &[RowReport], smallest: u64) -> Vec<Target> {
    let mut v = Vec::new();
    let reference = size_label(smallest);
    for r in rows {
        if r.side != Side::Pagepilot || r.size_bytes < TARGET_FROM {
            continue;
        }
        let name = format!("{} {} {}", lower(r.backing), lower(r.order), r.size);
        let verdict = |value: Option<f64>, limit: f64| -> String {
            match value {
                Some(x) if x <= limit => "met".into(),
                Some(_) => "not met".into(),
                None if r.size_bytes == smallest => "no smaller size to compare with".into(),
                None if r.status == "oom" => "not met (oom)".into(),
                None => format!("not measured ({})", r.status),
            }
        };
        let rss = r.medians.as_ref().and_then(|m| m.beyond_budget_mib);
        v.push(Target {
            target: format!("{name}: memory beyond the budget, MiB"),
            value: rss,
            limit: RSS_BEYOND_BUDGET_MIB,
            verdict: match rss {
                None if r.status == "oom" => "not met (oom)".into(),
                None => format!("not measured ({})", r.status),
                _ => verdict(rss, RSS_BEYOND_BUDGET_MIB),
            },
        });
        if r.order == Order::Random {
            let touch = r.ratios.as_ref().map(|x| x.touch_mean);
            v.push(Target {
                target: format!("{name}: mean time per touch / {reference}'s"),
                value: touch,
                limit: MAX_RATIO,
                verdict: verdict(touch, MAX_RATIO),
            });
        }
        let unmap = r.ratios.as_ref().map(|x| x.unmap);
        let unequal = r
            .ratios
            .as_ref()
            .filter(|x| (x.resident - 1.0).abs() > EQUAL_RESIDENCY);
        v.push(Target {
            target: format!("{name}: unmap time / {reference}'s"),
            value: unmap,
            limit: MAX_RATIO,
            verdict: match unequal {
                Some(x) => format!("not comparable (resident pages {:.2}x)", x.resident),
                None => verdict(unmap, MAX_RATIO),
            },
        });
    }
    v
}
