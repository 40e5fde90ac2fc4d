//! `pagepilot demo`.

use super::CmdResult;

/// Arguments of `pagepilot demo`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot demo`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
