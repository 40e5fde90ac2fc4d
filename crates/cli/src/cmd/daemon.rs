//! `pagepilot daemon`: the system resource manager (issue 15). It owns the
//! machine's frame budget and runs the frame manager and RAPHA's system
//! limit across the processes that join it over a Unix socket; see
//! `docs/daemon.md`. Started as root, it becomes `--user` (`nobody`) with
//! no capability once its socket listens.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pagepilot_daemon::server::{
    drop_privileges, raise_descriptor_limit, stop_on_signals, RunAs, Server, ServerOptions,
    DEFAULT_MAX_CLIENTS,
};
use pagepilot_daemon::Config;

use super::CmdResult;

/// Where the daemon listens when neither `--socket` nor
/// `$PAGEPILOT_DAEMON` says.
pub const DEFAULT_SOCKET: &str = "/run/pagepilot.sock";

/// Bytes of a frame.
const PAGE: u64 = 4096;

/// Arguments of `pagepilot daemon`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to listen [default: $PAGEPILOT_DAEMON, else /run/pagepilot.sock].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The machine's frame budget in bytes, with K, M, G or T (1G, 512M),
    /// a multiple of 4 KiB; replaces the config file's [machine]
    /// budget_frames. This or --config is required.
    #[arg(long, value_name = "SIZE", value_parser = parse_budget)]
    budget: Option<u64>,
    /// Quotas per user and group, reclamation deadline, RAPHA's timing
    /// (TOML, docs/daemon.md).
    #[arg(long, value_name = "FILE", required_unless_present = "budget")]
    config: Option<PathBuf>,
    /// Stay in the foreground (as systemd runs it); without it the daemon
    /// detaches once it listens.
    #[arg(long)]
    foreground: bool,
    /// Clients served at once; more are refused with an error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CLIENTS)]
    max_clients: usize,
    /// Seconds a client may take to finish a message it began before it is
    /// disconnected.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    frame_timeout: Duration,
    /// Seconds a connection may take to say Hello before it is closed.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    hello_timeout: Duration,
    /// Seconds a client holding no region may stay silent before it is
    /// disconnected.
    #[arg(long, value_name = "SECS", default_value = "300", value_parser = parse_seconds)]
    idle_timeout: Duration,
    /// Seconds the checks of a registration's descriptors may take (a file
    /// on a hung file system never answers) before it is refused.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_seconds)]
    check_timeout: Duration,
    /// Seconds the write-back of one dead client may take; what is left is
    /// reported.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_seconds)]
    write_back_budget: Duration,
    /// Seconds a stopping daemon waits for write-backs under way before it
    /// reports what is left and exits.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_seconds)]
    shutdown_timeout: Duration,
    /// The user to become once the socket listens, when started as root
    /// (`root`: stay uid 0, without any capability all the same). Ignored
    /// when not started as root. Every capability is dropped either way.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_USER)]
    user: String,
}

/// Whom a daemon started as root becomes once its socket listens, unless
/// `--user` says.
pub const DEFAULT_USER: &str = "nobody";

/// What keeps the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration file cannot be read.
    #[error("{path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration file is refused.
    #[error("{path}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong, and on which line.
        source: pagepilot_daemon::ConfigError,
    },
    /// `--budget` alone is refused.
    #[error("--budget: {0}")]
    Budget(pagepilot_daemon::ConfigError),
    /// Detaching failed.
    #[error("cannot detach: {0}")]
    Detach(std::io::Error),
}

/// The socket of `--socket`, else `$PAGEPILOT_DAEMON`, else the default.
pub fn socket_path(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| std::env::var_os("PAGEPILOT_DAEMON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// Runs the daemon until SIGTERM or SIGINT.
pub fn run(args: Args) -> CmdResult {
    let config = load(args.config.as_deref(), args.budget)?;
    let options = ServerOptions {
        max_clients: args.max_clients,
        frame_timeout: args.frame_timeout,
        hello_timeout: args.hello_timeout,
        idle_timeout: args.idle_timeout,
        check_timeout: args.check_timeout,
        write_back_budget: args.write_back_budget,
        shutdown_timeout: args.shutdown_timeout,
        ..ServerOptions::new(socket_path(args.socket))
    };
    if let Err(e) = raise_descriptor_limit() {
        eprintln!("pagepilot daemon: the descriptor limit stays as it is: {e}");
    }
    let server = Server::bind(config, options)?;
    // Root was needed for the socket (in /run) only; before any thread
    // starts (capabilities are per thread) and before the first client.
    let dropped = drop_privileges(&RunAs::User { name: args.user })?;
    let _ = writeln!(std::io::stderr(), "pagepilot daemon: {dropped}");
    stop_on_signals()?;
    if !args.foreground {
        detach(server.socket()).map_err(DaemonError::Detach)?;
    }
    server.run()?;
    Ok(())
}

/// The configuration: the file's, its budget replaced by `--budget`.
fn load(path: Option<&Path>, budget: Option<u64>) -> Result<Config, DaemonError> {
    let Some(path) = path else {
        let frames = budget.unwrap_or(1);
        return Config::with_budget(frames).map_err(DaemonError::Budget);
    };
    let text = std::fs::read_to_string(path).map_err(|source| DaemonError::Read {
        path: path.to_owned(),
        source,
    })?;
    Config::parse_with_budget(&text, budget).map_err(|source| DaemonError::Config {
        path: path.to_owned(),
        source,
    })
}

/// Leaves the foreground once the socket listens: the parent prints where
/// and the daemon's pid, and exits 0 (the socket already answers); the
/// child goes on in a session of its own, stdin and stdout on /dev/null
/// (so that whoever reads the parent's output is not kept waiting). Log
/// lines still go to stderr: redirect it when starting the daemon this way.
fn detach(socket: &Path) -> std::io::Result<()> {
    // SAFETY: the process has one thread (nothing has spawned any yet), so
    // the child may run anything; the parent only exits.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            rustix::process::setsid()?;
            std::env::set_current_dir("/")?;
            let null = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?;
            rustix::stdio::dup2_stdin(&null)?;
            rustix::stdio::dup2_stdout(&null)?;
            Ok(())
        }
        child => {
            println!(
                "pagepilot daemon: listening at {} (pid {child})",
                socket.display()
            );
            // No destructors: the socket is the child's now.
            std::process::exit(0)
        }
    }
}

/// A frame budget: bytes with an optional K, M, G or T (powers of 1024),
/// a whole number of 4 KiB frames, at least one.
fn parse_budget(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (digits, shift) = match t.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&t[..t.len() - 1], 10),
        Some(b'M') => (&t[..t.len() - 1], 20),
        Some(b'G') => (&t[..t.len() - 1], 30),
        Some(b'T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let bytes = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| {
            format!("`{s}` is not a size (a number of bytes with K, M, G or T, e.g. 1G)")
        })?;
    if bytes == 0 || bytes % PAGE != 0 {
        return Err(format!("`{s}` is not a whole number of 4 KiB frames"));
    }
    Ok(bytes / PAGE)
}

/// Seconds, fractions allowed, more than zero.
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && *v <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("`{s}` is not a number of seconds in (0, 86400]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_bytes_with_binary_units_in_whole_frames() {
        assert_eq!(parse_budget("1G"), Ok(1 << 18));
        assert_eq!(parse_budget("512M"), Ok(1 << 17));
        assert_eq!(parse_budget("64KiB"), Ok(16));
        assert_eq!(parse_budget("8192"), Ok(2));
        assert!(parse_budget("3000").is_err());
        assert!(parse_budget("0").is_err());
        assert!(parse_budget("1X").is_err());
        assert!(parse_budget("99999999999T").is_err());
    }
}
