//! `pagepilot doctor [PATH]`: what pagepilot needs, checked for the user
//! who runs it, one line per check with the fix where one fails.

use std::path::PathBuf;

use pagepilot_pager::doctor::{self, State};

use super::CmdResult;

/// Arguments of `pagepilot doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// A data file, or the directory data files will live in: checks its
    /// file system's direct I/O and `RWF_NOWAIT`.
    path: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// How the report is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// One line per check, the fix indented below it.
    Text,
    /// One JSON document.
    Json,
}

/// The map failure reported when no region can be mapped.
#[derive(Debug, thiserror::Error)]
#[error("this user cannot map a region (see the failed checks above)")]
struct CannotMap;

/// Runs the checks and prints them; fails when no region can be mapped.
pub fn run(args: Args) -> CmdResult {
    let report = doctor::run(args.path.as_deref());
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => {
            for c in &report.checks {
                let state = match c.state {
                    State::Ok => "ok",
                    State::Warn => "warn",
                    State::Fail => "FAIL",
                };
                println!("{state:>4}  {:<28} {}", c.name, c.detail);
                if let Some(fix) = &c.fix {
                    println!("      fix: {fix}");
                }
            }
        }
    }
    if report.can_map() {
        Ok(())
    } else {
        Err(Box::new(CannotMap))
    }
}
