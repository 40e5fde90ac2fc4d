//! `pagepilot trace ...`.

use super::CmdResult;

/// Subcommands of `pagepilot trace`.
#[derive(clap::Subcommand)]
pub enum Command {}

/// Runs `pagepilot trace ...`.
pub fn run(command: Command) -> CmdResult {
    match command {}
}
