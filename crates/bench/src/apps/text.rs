//! `bench apps`'s report for people: the table of every application's rows, then a closing
//! line per application with kernel/defaults and kernel/best.

use std::io::{self, Write};

use super::report::AppsReport;
use super::variant::Variant;

const MB: f64 = (1u64 << 20) as f64;

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".into(), f)
}

/// The table, then a closing line per application.
pub fn write_text(out: &mut impl Write, r: &AppsReport) -> io::Result<()> {
    writeln!(
        out,
        "bench apps: every row in a memory cgroup of {:.0} MB, the page cache dropped before \
         each run; medians of {} run(s)",
        r.memory_bytes as f64 / MB,
        r.runs
    )?;
    writeln!(
        out,
        "{:<8} {:<9} {:<7} {:<9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8}  note",
        "app",
        "row",
        "policy",
        "budget",
        "wall s",
        "kernel/row",
        "disk MB",
        "page-ins",
        "majflt",
        "peak MB"
    )?;
    for a in &r.apps {
        for row in &a.rows {
            let m = row.median;
            let page_ins = match (row.variant, m) {
                (Variant::Kernel, _) | (_, None) => "-".into(),
                (_, Some(m)) => m
                    .pages_read
                    .map_or_else(|| "none".into(), |p| p.to_string()),
            };
            writeln!(
                out,
                "{:<8} {:<9} {:<7} {:<9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8}  {}",
                a.app.name(),
                row.variant.name(),
                row.policy,
                row.budget,
                opt(m, |m| format!("{:.2}", m.wall_s)),
                opt(row.kernel_over_row, |x| format!("{x:.2}")),
                opt(m, |m| format!("{:.1}", m.bytes_read as f64 / MB)),
                page_ins,
                opt(m, |m| m.major_faults.to_string()),
                opt(m, |m| format!("{:.1}", m.peak_bytes as f64 / MB)),
                row.note()
            )?;
        }
    }
    writeln!(out)?;
    for a in &r.apps {
        writeln!(
            out,
            "{}: kernel/defaults {}, kernel/best {}  ({}; data {:.0} MB)",
            a.app.name(),
            opt(a.kernel_over_defaults, |x| format!("{x:.2}x")),
            opt(a.kernel_over_best, |x| format!("{x:.2}x")),
            a.what,
            a.data_bytes as f64 / MB
        )?;
    }
    writeln!(out, "(total {:.0} s)", r.wall_s)
}
