//! The report of `pagepilot bench aim`: its JSON document and its table.

use std::io::Write;

use serde::Serialize;

use super::pilot::PilotRun;
use crate::measure::{median, ratio};

/// One configuration's run of one (mix, users) point in one round.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// Jobs completed by all workers.
    pub jobs: u64,
    /// Jobs completed by each worker, in order.
    pub per_worker: Vec<u64>,
    /// Jobs of each kind, all workers: compute, file, memory.
    pub by_kind: [u64; 3],
    /// Throughput: each worker's jobs per minute of its own run, summed.
    pub jobs_per_minute: f64,
    /// What the specific application did beside the workers (`pagepilot`).
    pub pilot: Option<PilotRun>,
}

/// One configuration of one point over all rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    /// Median throughput over the rounds, jobs per minute.
    pub jobs_per_minute: f64,
    /// Each round, in order.
    pub rounds: Vec<Round>,
}

impl Side {
    /// The side of `rounds`, its median throughput.
    pub fn of(rounds: Vec<Round>) -> Side {
        let jobs_per_minute = median(rounds.iter().map(|r| r.jobs_per_minute).collect());
        Side {
            jobs_per_minute,
            rounds,
        }
    }
}

/// One (mix, users) point.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The mix's name.
    pub mix: &'static str,
    /// Concurrent workers.
    pub users: usize,
    /// No pagepilot anywhere.
    pub plain: Side,
    /// A pagepilot daemon and a region under it beside the workers.
    pub pagepilot: Side,
    /// pagepilot / plain throughput (medians); 0 when plain did nothing.
    pub ratio: f64,
}

impl Row {
    /// The row of both sides.
    pub fn new(mix: &'static str, users: usize, plain: Side, pagepilot: Side) -> Row {
        let ratio = ratio(pagepilot.jobs_per_minute, plain.jobs_per_minute).unwrap_or(0.0);
        Row {
            mix,
            users,
            plain,
            pagepilot,
            ratio,
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `aim`.
    pub bench: &'static str,
    /// Seconds each worker runs.
    pub seconds: f64,
    /// Rounds; throughputs are medians.
    pub runs: usize,
    /// Each mix's weights of compute, file and memory jobs.
    pub mixes: Vec<(&'static str, [u32; 3])>,
    /// The specific application's file, MB.
    pub pilot_file_mb: usize,
    /// Its region's budget, MB.
    pub pilot_budget_mb: usize,
    /// Its policy program.
    pub pilot_program: &'static str,
    /// Every point, mix by mix, users ascending.
    pub rows: Vec<Row>,
}

impl Report {
    /// The median over the users of a mix's pagepilot / plain ratios.
    pub fn median_ratio(&self, mix: &str) -> Option<f64> {
        let ratios: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.mix == mix)
            .map(|r| r.ratio)
            .collect();
        (!ratios.is_empty()).then(|| median(ratios))
    }
}

/// The table.
pub fn print_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "AIM-like throughput (HiPEC 5.2, Figure 5): workers of {} s each, median of {}; \
         pagepilot = a daemon and a {} region ({} MB over {} MB) beside them",
        r.seconds, r.runs, r.pilot_program, r.pilot_budget_mb, r.pilot_file_mb
    )?;
    writeln!(
        out,
        "  {:<9} {:>5} {:>12} {:>14} {:>7} {:>13}",
        "mix", "users", "plain/min", "pagepilot/min", "ratio", "pilot faults"
    )?;
    for row in &r.rows {
        let faults = median(
            row.pagepilot
                .rounds
                .iter()
                .filter_map(|x| x.pilot.map(|p| p.faults))
                .collect(),
        );
        writeln!(
            out,
            "  {:<9} {:>5} {:>12.0} {:>14.0} {:>7.3} {:>13}",
            row.mix,
            row.users,
            row.plain.jobs_per_minute,
            row.pagepilot.jobs_per_minute,
            row.ratio,
            faults
        )?;
    }
    for (mix, _) in &r.mixes {
        if let Some(m) = r.median_ratio(mix) {
            writeln!(out, "  {mix}: median pagepilot/plain over users {m:.3}")?;
        }
    }
    Ok(())
}
