//! `pagepilot plot ...`.

use super::CmdResult;

/// Subcommands of `pagepilot plot`.
#[derive(clap::Subcommand)]
pub enum Command {}

/// Runs `pagepilot plot ...`.
pub fn run(command: Command) -> CmdResult {
    match command {}
}
