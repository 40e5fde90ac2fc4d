//! `pagepilot repro`: the five papers' experiments, one report
//! (`crates/bench/src/repro/`, docs/repro.md).

use pagepilot_bench::repro;

use super::CmdResult;

/// Arguments of `pagepilot repro` (the bench crate's, as they are: one
/// clap group, not a wrapper's and theirs of the same name).
pub type Args = repro::Args;

/// Runs `pagepilot repro`.
pub fn run(args: Args) -> CmdResult {
    if args.list {
        for name in repro::experiment_names() {
            println!("{name}");
        }
        return Ok(());
    }
    repro::run(args)?;
    Ok(())
}
