//! One module per subcommand.

pub mod demo;
pub mod plot;
pub mod sim;
pub mod trace;

/// A subcommand's failure, printed by `main` as `pagepilot: ...`.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
