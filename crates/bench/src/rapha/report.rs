//! The report of `pagepilot bench rapha`: its JSON document and its table.

use std::io::Write;

use serde::Serialize;

use super::job::Priority;
use super::limits::Limits;
use super::summary::{LauncherTimeline, Row};

/// The benchmark's findings.
#[derive(Serialize)]
pub struct Report {
    /// `rapha`.
    pub bench: &'static str,
    /// The decoder's period.
    pub period_ms: u64,
    /// Its compute per period.
    pub compute_ms: u64,
    /// Chunks it reads per period.
    pub chunks: usize,
    /// Size of a chunk.
    pub chunk_kb: usize,
    /// Its file.
    pub decoder_mb: usize,
    /// Its frames.
    pub decoder_budget_mb: usize,
    /// The launcher's file.
    pub launcher_mb: usize,
    /// Its frames.
    pub launcher_budget_mb: usize,
    /// Its threads.
    pub launcher_threads: usize,
    /// Rounds.
    pub runs: usize,
    /// The decoder's priority (its processor reserve).
    pub decoder_priority: Priority,
    /// Whether it could be set in every run (root).
    pub decoder_priority_set: bool,
    /// RAPHA's reserves and limits.
    pub limits: Limits,
    /// One row per configuration.
    pub rows: Vec<Row>,
    /// RAPHA's miss ratio over the kernel's (the target: at most 0.5).
    pub miss_vs_kernel: Option<f64>,
    /// RAPHA's average delay over the kernel's (at most 0.5).
    pub delay_vs_kernel: Option<f64>,
    /// RAPHA's miss ratio over pagepilot-without-limits' (at most 0.5).
    pub miss_vs_pagepilot: Option<f64>,
    /// RAPHA's average delay over pagepilot-without-limits' (at most 0.5).
    pub delay_vs_pagepilot: Option<f64>,
    /// The launcher's completion time under RAPHA over pagepilot's without limits.
    pub launcher_slowdown_vs_pagepilot: Option<f64>,
    /// The same over the kernel's.
    pub launcher_slowdown_vs_kernel: Option<f64>,
    /// The decoder's miss ratio under the daemon over RAPHA's in-process
    /// (target 0.9..1.1; `None` when RAPHA's is 0).
    pub daemon_miss_vs_rapha: Option<f64>,
    /// The same for the average delay.
    pub daemon_delay_vs_rapha: Option<f64>,
    /// The launcher's completion time under the daemon over RAPHA's
    /// in-process (target 0.9..1.1).
    pub daemon_launcher_vs_rapha: Option<f64>,
    /// The launcher's samples of the last round, per configuration.
    pub timelines: Vec<LauncherTimeline>,
    /// Why the kernel's row is missing.
    pub kernel_skipped: Option<String>,
}

/// Writes the report as a table.
pub fn print_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let l = &r.limits;
    writeln!(
        out,
        "RAPHA (Figures 8-11): decoder period {} ms, {} ms of compute, {} chunks of {} KiB a \
         period from {} MB (budget {} MB){}; launcher {} MB (budget {} MB), {} threads; median \
         of {}",
        r.period_ms,
        r.compute_ms,
        r.chunks,
        r.chunk_kb,
        r.decoder_mb,
        r.decoder_budget_mb,
        match (r.decoder_priority, r.decoder_priority_set) {
            (Priority::Normal, _) => "",
            (Priority::Nice, true) => ", nice -20",
            (Priority::Fifo, true) => ", SCHED_FIFO",
            (_, false) => ", priority NOT set (not root)",
        },
        r.launcher_mb,
        r.launcher_budget_mb,
        r.launcher_threads,
        r.runs
    )?;
    writeln!(
        out,
        "limits: fault_unit {} us; decoder reserve {:.3} and {} faults/period; system limit {} \
         faults/100 ms (Eq. 4); launcher {} faults/{} ms (Eq. 1: {:.3} of the fault service)",
        l.fault_unit_us,
        l.decoder_pc,
        l.decoder_fault_limit,
        l.system_fault_limit,
        l.launcher_fault_limit,
        l.launcher_fault_period_ms,
        l.launcher_fault_pc
    )?;
    writeln!(
        out,
        "  {:<12} {:>7} {:>7} {:>7} {:>10} {:>8} {:>9} {:>12} {:>10} {:>10} {:>12}",
        "config",
        "frames",
        "misses",
        "miss %",
        "delay ms",
        "alone %",
        "read ms",
        "launcher ms",
        "l. faults",
        "postponed",
        "max/sample"
    )?;
    for row in &r.rows {
        let d = &row.with_launcher;
        writeln!(
            out,
            "  {:<12} {:>7} {:>7} {:>7.1} {:>10.2} {:>8.1} {:>9} {:>12.0} {:>10} {:>10} {:>12}",
            row.config,
            d.frames,
            d.misses,
            d.miss_pct,
            d.avg_delay_ms,
            row.alone.miss_pct,
            format!("{:.1}/{:.1}", row.alone.read_ms, d.read_ms),
            row.launcher_ms,
            row.launcher_faults,
            row.launcher_postponed,
            row.launcher_max_faults_per_sample
        )?;
    }
    let x = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
    writeln!(
        out,
        "rapha / kernel: misses {}, delay {}; rapha / pagepilot: misses {}, delay {} \
         (target: each at most 0.50x)",
        x(r.miss_vs_kernel),
        x(r.delay_vs_kernel),
        x(r.miss_vs_pagepilot),
        x(r.delay_vs_pagepilot)
    )?;
    writeln!(
        out,
        "launcher slowdown under rapha: {} of pagepilot's time, {} of the kernel's",
        x(r.launcher_slowdown_vs_pagepilot),
        x(r.launcher_slowdown_vs_kernel)
    )?;
    if let Some(d) = r.rows.iter().find(|row| row.config == "rapha+daemon") {
        let rapha = r.rows.iter().find(|row| row.config == "rapha");
        let miss = |row: Option<&Row>| {
            row.map_or("-".into(), |w| format!("{:.1}%", w.with_launcher.miss_pct))
        };
        let per = |m: Option<u64>, f: Option<f64>| match (m, f) {
            (Some(m), Some(f)) => format!("{m} messages, {f:.5} per fault"),
            _ => "-".into(),
        };
        writeln!(
            out,
            "rapha+daemon / rapha: misses {} ({} vs {}), delay {}, launcher time {} (target: \
             0.90x..1.10x); decoder {} ({} postponed by its declared limit), launcher {}",
            x(r.daemon_miss_vs_rapha),
            miss(Some(d)),
            miss(rapha),
            x(r.daemon_delay_vs_rapha),
            x(r.daemon_launcher_vs_rapha),
            per(d.decoder_messages, d.decoder_messages_per_fault),
            d.decoder_postponed,
            per(d.launcher_messages, d.launcher_messages_per_fault),
        )?;
    }
    writeln!(
        out,
        "frames: the decoder's periods released while the launcher ran; delay: mean lateness of \
         the missed ones; read ms: a frame's time reading its chunks, alone / with the launcher; \
         l. faults: fault events (pagepilot), major faults (kernel); rapha+daemon: rapha with both \
         tasks joined to a daemon of their budgets, the decoder declaring its reserve"
    )?;
    if let Some(why) = &r.kernel_skipped {
        writeln!(out, "no kernel row: {why}")?;
    }
    Ok(())
}
