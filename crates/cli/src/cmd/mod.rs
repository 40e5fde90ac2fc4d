//! One module per subcommand.

pub use pagepilot_bench as bench;
pub mod daemon;
pub mod dataspaces;
pub mod demo;
pub mod doctor;
pub mod plot;
pub mod policy;
pub mod repro;
pub mod run;
pub mod sim;
pub mod sim_plot;
pub mod sim_pool;
pub mod status;
pub mod trace;

/// A subcommand's failure, printed by `main` as `pagepilot: ...`.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
