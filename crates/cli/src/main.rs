//! `pagepilot`: application-controlled virtual memory, simulated and live.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pagepilot_policy::chain;

mod cmd;

/// Application-controlled virtual memory for stock Linux.
#[derive(Parser)]
#[command(name = "pagepilot", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the embedded default workload through LRU, SEQ and OPT.
    Demo(cmd::demo::Args),
    /// Simulate policies over a trace.
    Sim(cmd::sim::Args),
    /// Check what pagepilot needs, for the user who runs it.
    Doctor(cmd::doctor::Args),
    /// Record, convert and inspect traces.
    #[command(subcommand)]
    Trace(cmd::trace::Command),
    /// Plot traces and simulations.
    #[command(subcommand)]
    Plot(cmd::plot::Command),
    /// Compile, check and disassemble policy programs.
    #[command(subcommand)]
    Policy(cmd::policy::Command),
    /// Benchmarks, reporting ratios measured side by side in one run.
    #[command(subcommand)]
    Bench(cmd::bench::Command),
    /// Run the five papers' experiments and write a report (Markdown, JSON, PNG figures).
    Repro(cmd::repro::Args),
    /// Run an unmodified program with its file mappings paged by pagepilot.
    Run(cmd::run::Args),
    /// The daemon: the machine's frame budget and quotas across processes.
    Daemon(cmd::daemon::Args),
    /// What the daemon holds and for whom.
    Status(cmd::status::Args),
    /// Persistent dataspaces: list, create, inspect, delete.
    #[command(subcommand)]
    Dataspaces(cmd::dataspaces::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Trace(c) => cmd::trace::run(c),
        Command::Plot(c) => cmd::plot::run(c),
        Command::Policy(c) => cmd::policy::run(c),
        Command::Bench(c) => cmd::bench::run(c).map_err(Into::into),
        Command::Repro(a) => cmd::repro::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Daemon(a) => cmd::daemon::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Dataspaces(c) => cmd::dataspaces::run(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pagepilot: {}", chain(&*e));
            ExitCode::FAILURE
        }
    }
}
