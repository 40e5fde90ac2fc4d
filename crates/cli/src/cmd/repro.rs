//! `pagepilot repro`: the five papers' experiments, one report
//! (`crates/bench/src/repro/`, docs/repro.md).

use pagepilot_bench::repro;

use super::CmdResult;

/// Arguments of `pagepilot repro`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    inner: repro::Args,
}

/// Runs `pagepilot repro`.
pub fn run(args: Args) -> CmdResult {
    if args.inner.list {
        for name in repro::experiment_names() {
            println!("{name}");
        }
        return Ok(());
    }
    repro::run(args.inner)?;
    Ok(())
}
