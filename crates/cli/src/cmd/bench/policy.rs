//! `pagepilot bench policy`.

use crate::cmd::CmdResult;

/// Arguments of `pagepilot bench policy`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pagepilot bench policy`.
pub fn run(_args: Args) -> CmdResult {
    Err("not built yet".into())
}
