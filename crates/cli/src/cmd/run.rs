//! `pagepilot run`: runs an unmodified program with the interposer
//! (`libpagepilot_run.so`, loaded with `LD_PRELOAD`), which pages the
//! program's file mappings that match the rules (docs/run.md).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use pagepilot_run::{parse_size, Config, Rule};

/// The interposer's file name.
const LIBRARY: &str = "libpagepilot_run.so";
/// Overrides where the interposer is found.
const LIBRARY_ENV: &str = "PAGEPILOT_RUN_LIB";

/// `pagepilot run [OPTIONS] -- PROGRAM [ARGS...]`.
#[derive(clap::Args)]
pub struct Args {
    /// Memory for all taken-over mappings together (no rule budget of
    /// their own), e.g. 256M. Default: half of what the memory cgroup's
    /// limit leaves beside the program's anonymous and shared memory when
    /// its first file is taken over, or a quarter of the machine's memory.
    #[arg(long, value_parser = size)]
    budget: Option<u64>,
    /// The policy of files no rule names: a built-in (`pagepilot sim
    /// --help` lists them) or a policy program.
    #[arg(long, default_value = pagepilot_run::DEFAULT_POLICY)]
    policy: String,
    /// A per-file rule `GLOB=POLICY[:BUDGET]` (repeatable, first match
    /// wins). A GLOB without `/` matches the file name.
    #[arg(long = "map", value_name = "RULE")]
    rules: Vec<String>,
    /// Mappings smaller than this stay with the kernel (0 takes every file
    /// mapping).
    #[arg(long, value_parser = size, default_value = "1M")]
    min_size: u64,
    /// Log what was taken over, what was left and why, and each region's
    /// counts at its end, to this file (appended).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Log to stderr.
    #[arg(short, long)]
    verbose: bool,
    /// Draw frames from the pagepilot daemon at this socket (default:
    /// $PAGEPILOT_DAEMON): it also writes a killed program's stores back.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1, default_missing_value = "")]
    daemon: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

fn size(text: &str) -> Result<u64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// Why the program was not started.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A rule or policy was refused.
    #[error(transparent)]
    Config(#[from] pagepilot_run::ConfigError),
    /// The interposer is not where it should be.
    #[error("the interposer {0} is missing (build it with `cargo build -p pagepilot-interpose`, or set {LIBRARY_ENV})")]
    NoLibrary(PathBuf),
    /// `--daemon` without a socket and no $PAGEPILOT_DAEMON.
    #[error(
        "--daemon: no socket given and ${} is not set",
        pagepilot_pager::DAEMON_ENV
    )]
    NoDaemon,
    /// The program could not be started.
    #[error("cannot run {program:?}: {source}")]
    Exec {
        /// The program.
        program: OsString,
        /// Why.
        source: std::io::Error,
    },
}

/// Checks the configuration, then replaces this process with the program.
pub fn run(args: Args) -> super::CmdResult {
    let mut config = Config {
        budget: args.budget,
        policy: args.policy,
        min_size: args.min_size,
        log: args.log.or(args.verbose.then(|| PathBuf::from("-"))),
        ..Config::default()
    };
    for r in &args.rules {
        config.rules.push(
            r.parse::<Rule>()
                .map_err(pagepilot_run::ConfigError::from)?,
        );
    }
    config.check().map_err(RunError::from)?;
    let library = library()?;
    let mut command = std::process::Command::new(&args.program[0]);
    command.args(&args.program[1..]);
    for (var, value) in config.to_env() {
        command.env(var, value);
    }
    match args.daemon {
        Some(socket)
            if socket.as_os_str().is_empty()
                && std::env::var_os(pagepilot_pager::DAEMON_ENV).is_none() =>
        {
            return Err(RunError::NoDaemon.into());
        }
        Some(socket) if socket.as_os_str().is_empty() => {}
        Some(socket) => {
            command.env(pagepilot_pager::DAEMON_ENV, socket);
        }
        None => {}
    }
    let mut preload = OsString::from(library);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    command.env("LD_PRELOAD", preload);
    let source = command.exec();
    Err(RunError::Exec {
        program: args.program[0].clone(),
        source,
    }
    .into())
}

/// The interposer: `$PAGEPILOT_RUN_LIB`, or beside this binary.
fn library() -> Result<PathBuf, RunError> {
    let path = match std::env::var_os(LIBRARY_ENV) {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join(LIBRARY)))
            .unwrap_or_else(|| PathBuf::from(LIBRARY)),
    };
    match path.canonicalize() {
        Ok(p) => Ok(p),
        Err(_) => Err(RunError::NoLibrary(path)),
    }
}
