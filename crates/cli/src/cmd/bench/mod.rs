//! `pagepilot bench ...`: benchmarks that report ratios measured side by side.

use super::CmdResult;

mod cgroup;
mod datafile;
mod faults;
mod fork;
pub mod join;
mod kernel;
mod live;
mod measure;
mod policy;
mod probe;
mod scan;
mod sigprobe;
mod sim;
mod window;
mod workload;

/// Benchmarks.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Simulator throughput and whole-curve cost.
    Sim(sim::Args),
    /// Policy-program interpretation against the native decision.
    Policy(policy::Args),
    /// The nested-loops join, live, against the kernel.
    Join(join::Args),
    /// Cost of a fault served by pagepilot against the kernel's own.
    Faults(faults::Args),
    /// Random and sequential page reads against the kernel's mmap.
    Scan(scan::Args),
    /// Cost of a fork with dirty pages in a file region against the kernel's mapping.
    Fork(fork::Args),
}

/// Runs a benchmark.
pub fn run(command: Command) -> CmdResult {
    match command {
        Command::Sim(a) => sim::run(a),
        Command::Policy(a) => policy::run(a),
        Command::Join(a) => join::run(a),
        Command::Faults(a) => faults::run(a),
        Command::Scan(a) => scan::run(a),
        Command::Fork(a) => fork::run(a),
    }
}
