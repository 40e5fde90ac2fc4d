//! `pagepilot sim`.

use super::CmdResult;

/// Arguments of `pagepilot sim`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot sim`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
