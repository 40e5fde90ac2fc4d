//! `pagepilot-rtt-proxy`: a TCP proxy that adds a fixed delay to each
//! direction of every connection, so that a server on this machine seems
//! `--rtt` further away (scripts/redis-cluster --rtt, docs/far-memory.md).
//! Byte order is kept, and chunks are pipelined through the delay (it adds
//! latency, not a bandwidth limit). SIGTERM or SIGINT shut every
//! connection down and end it with status 0.

mod delay;
mod duration;
mod proxy;
mod signals;

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

/// Command-line arguments.
#[derive(Parser)]
#[command(
    name = "pagepilot-rtt-proxy",
    about = "Forwards TCP connections from --listen to --upstream, adding half of --rtt to each direction"
)]
struct Args {
    /// Address to listen on (host:port).
    #[arg(long)]
    listen: String,
    /// Address to forward each connection to (host:port).
    #[arg(long)]
    upstream: String,
    /// Round-trip time to add: half of it to each direction (0, 750ns, 200us, 1ms, 2s).
    #[arg(long, value_parser = duration::parse_duration)]
    rtt: Duration,
    /// A file to write the process id to once listening (removed at exit).
    #[arg(long)]
    pidfile: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pagepilot-rtt-proxy: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What ended the proxy with an error.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Proxy(#[from] proxy::ProxyError),
    #[error("signals: {0}")]
    Signals(std::io::Error),
    #[error("--pidfile {path}: {source}", path = .0.display(), source = .1)]
    Pidfile(PathBuf, std::io::Error),
    #[error("no thread for the listener: {0}")]
    Thread(std::io::Error),
}

fn run(args: &Args) -> Result<(), RunError> {
    // Sleeps end within a microsecond or so of when asked, not 50 us late
    // (the default slack); threads started later inherit it. Best effort.
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    // Before any thread starts, so that all of them inherit the mask.
    let signals = signals::Signals::block().map_err(RunError::Signals)?;
    let proxy = Arc::new(proxy::Proxy::bind(
        &args.listen,
        &args.upstream,
        args.rtt / 2,
    )?);
    if let Some(path) = &args.pidfile {
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(|e| RunError::Pidfile(path.clone(), e))?;
    }
    let serving = proxy.clone();
    std::thread::Builder::new()
        .name("accept".into())
        .spawn(move || serving.serve())
        .map_err(RunError::Thread)?;
    let waited = signals.wait();
    proxy.close_all();
    if let Some(path) = &args.pidfile {
        let _ = std::fs::remove_file(path);
    }
    waited.map(drop).map_err(RunError::Signals)
}
