//! The rounds of `bench apps`: in each, every application's three rows back to back, each
//! run in its own cgroup from a cold cache, its output checked against the first run's.

use std::time::Duration;

use super::exec;
use super::report::{AppReport, Run};
use super::runlog;
use super::variant::{Launcher, Variant};
use super::{App, Args, Bench};
use crate::error::IoContext;
use crate::BenchError;

/// Every round: every application, its three rows back to back, starting one row further
/// each round so that no row always runs first.
pub(super) fn rounds(
    benches: &mut [Bench],
    launcher: &Launcher,
    args: &Args,
    budget: u64,
    timeout: Duration,
) -> Result<(), BenchError> {
    for round in 0..args.runs {
        for b in benches.iter_mut() {
            for k in 0..Variant::ALL.len() {
                let at = (round + k) % Variant::ALL.len();
                let variant = Variant::ALL[at];
                let tag = format!("{}-{round}", b.workload.app.name());
                let (argv, log) =
                    launcher.argv(variant, &b.workload.argv, (&b.policy, budget), &tag);
                if let Some(l) = &log {
                    let _ = std::fs::remove_file(l);
                }
                let ran = exec::run(
                    &argv,
                    &b.workload.env,
                    args.memory,
                    &[&b.workload.data],
                    timeout,
                )?;
                let interposed = match &log {
                    Some(l) => runlog::read(l).on("reading the interposer's log", l)?,
                    None => None,
                };
                let run = Run {
                    wall_s: ran.wall.as_secs_f64(),
                    end: ran.end,
                    bytes_read: ran.bytes_read,
                    major_faults: ran.major_faults,
                    peak_bytes: ran.peak_bytes,
                    interposed,
                    output_matches: true,
                };
                let run = check_output(&mut b.report, run, &ran.stdout);
                progress(
                    round,
                    args.runs,
                    b.workload.app,
                    variant,
                    &run,
                    &ran.stderr_tail,
                );
                b.report.rows[at].runs.push(run);
            }
        }
    }
    Ok(())
}

/// Compares a successful run's output with the first one's (which it becomes if first).
fn check_output(report: &mut AppReport, mut run: Run, stdout: &str) -> Run {
    if run.ok() {
        match &report.output {
            Some(first) => run.output_matches = first == stdout.trim(),
            None => report.output = Some(stdout.trim().to_string()),
        }
    }
    run
}

/// One line on stderr per run; a failed run's stderr after it.
fn progress(round: usize, runs: usize, app: App, v: Variant, run: &Run, stderr: &str) {
    let pages = run
        .interposed
        .map_or(String::new(), |i| format!(", {} page-ins", i.pages_read));
    eprintln!(
        "[{}/{runs}] {} {}: {:.2} s, {:.1} MB read, peak {:.1} MB{pages}{}",
        round + 1,
        app.name(),
        v.name(),
        run.wall_s,
        run.bytes_read as f64 / f64::from(1 << 20),
        run.peak_bytes as f64 / f64::from(1 << 20),
        if run.ok() {
            String::new()
        } else {
            format!(" ({:?})", run.end)
        },
    );
    if !run.ok() && !stderr.is_empty() {
        eprintln!("    stderr: {stderr}");
    }
    if run.ok() && !run.output_matches {
        eprintln!("    its output differs from the first run's");
    }
}
