//! `pagepilot bench faults`.

use crate::cmd::CmdResult;

/// Arguments of `pagepilot bench faults`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot bench faults`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
