//! `pagepilot bench sim`.

use crate::cmd::CmdResult;

/// Arguments of `pagepilot bench sim`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot bench sim`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
