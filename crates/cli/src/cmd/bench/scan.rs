//! `pagepilot bench scan`.

use crate::cmd::CmdResult;

/// Arguments of `pagepilot bench scan`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot bench scan`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
