//! `pagepilot policy ...`: compile, check and disassemble policy programs.

use super::CmdResult;

/// Subcommands of `pagepilot policy`.
#[derive(clap::Subcommand)]
pub enum Command {}

/// Runs `pagepilot policy ...`.
pub fn run(command: Command) -> CmdResult {
    match command {}
}
