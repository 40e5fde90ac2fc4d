//! `pagepilot bench join`.

use crate::cmd::CmdResult;

/// Arguments of `pagepilot bench join`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot bench join`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
