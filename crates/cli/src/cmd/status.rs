//! `pagepilot status`: what the daemon holds and for whom: its clients,
//! their regions, frames held, minFrame, pinned, faults per second,
//! postponed faults, frames reclaimed and forced. This command's own
//! connection is left out.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pagepilot_protocol::{ClientId, Message, RegionStatus, StatusReply, SUPPORTED_VERSIONS};
use pagepilot_transport::Connection;
use serde::Serialize;

use super::daemon::{parse_seconds, socket_path};
use super::CmdResult;

/// How long the daemon has to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Arguments of `pagepilot status`.
#[derive(clap::Args)]
pub struct Args {
    /// The daemon's socket [default: $PAGEPILOT_DAEMON, else /run/pagepilot.sock].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Refresh every SECS seconds until interrupted (JSON: one document per
    /// line).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    watch: Option<Duration>,
}

/// How the status is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// A table, one line per region.
    Text,
    /// One JSON document.
    Json,
}

/// Why no status could be shown.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// Nothing answers at the socket.
    #[error("no daemon answers at {path} (start one with `pagepilot daemon`)")]
    NotRunning {
        /// The socket.
        path: PathBuf,
        /// Why the connection failed.
        source: pagepilot_transport::TransportError,
    },
    /// The conversation failed.
    #[error("the daemon at {path}")]
    Transport {
        /// The socket.
        path: PathBuf,
        /// What failed.
        source: pagepilot_transport::TransportError,
    },
    /// The socket is held by a user this process does not trust: nothing
    /// was sent (`pagepilot_transport::trusted_daemon`).
    #[error("refusing the daemon at {path}")]
    Untrusted {
        /// The socket.
        path: PathBuf,
        /// Who holds it, and who would have been trusted.
        source: pagepilot_transport::Untrusted,
    },
    /// The daemon did not answer in time.
    #[error("the daemon at {0} did not answer within 5 s")]
    Silent(PathBuf),
    /// The daemon refused.
    #[error("the daemon at {path} refused: {message}")]
    Refused {
        /// The socket.
        path: PathBuf,
        /// Its error.
        message: String,
    },
}

/// Asks the daemon and prints its status (again every `--watch`).
pub fn run(args: Args) -> CmdResult {
    let path = socket_path(args.socket);
    let mut daemon = Daemon::connect(&path)?;
    loop {
        let status = daemon.status()?;
        let report = Report::new(&status, daemon.me);
        let mut out = std::io::stdout().lock();
        match (args.format, args.watch.is_some()) {
            (Format::Json, false) => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
            (Format::Json, true) => writeln!(out, "{}", serde_json::to_string(&report)?)?,
            (Format::Text, watching) => {
                if watching && out.is_terminal() {
                    // Clear the screen and go home, as watch(1) does.
                    write!(out, "\x1b[H\x1b[2J")?;
                } else if watching {
                    writeln!(out)?;
                }
                write!(out, "{}", report.table())?;
            }
        }
        out.flush()?;
        match args.watch {
            Some(every) => std::thread::sleep(every),
            None => break,
        }
    }
    daemon.goodbye();
    Ok(())
}

/// A conversation with the daemon.
struct Daemon<'p> {
    path: &'p Path,
    conn: Connection,
    me: ClientId,
}

impl<'p> Daemon<'p> {
    fn connect(path: &'p Path) -> Result<Daemon<'p>, StatusError> {
        let conn = Connection::connect(path).map_err(|source| StatusError::NotRunning {
            path: path.to_owned(),
            source,
        })?;
        // Before Hello: the same check as every client's.
        pagepilot_transport::trusted_daemon(conn.stream()).map_err(|source| {
            StatusError::Untrusted {
                path: path.to_owned(),
                source,
            }
        })?;
        let mut d = Daemon {
            path,
            conn,
            me: ClientId(0),
        };
        let hello = Message::Hello {
            versions: SUPPORTED_VERSIONS.to_vec(),
            pid: Some(std::process::id()),
        };
        match d.ask(&hello)? {
            Message::Welcome { client, .. } => d.me = client,
            other => return Err(d.unexpected(other)),
        }
        Ok(d)
    }

    fn status(&mut self) -> Result<StatusReply, StatusError> {
        match self.ask(&Message::Status)? {
            Message::StatusReply(s) => Ok(s),
            other => Err(self.unexpected(other)),
        }
    }

    fn goodbye(mut self) {
        let _ = self.ask(&Message::Goodbye);
    }

    fn ask(&mut self, m: &Message) -> Result<Message, StatusError> {
        let path = self.path.to_owned();
        let failed = |source| StatusError::Transport {
            path: path.clone(),
            source,
        };
        self.conn.send(m, &[]).map_err(failed)?;
        match self.conn.receive_within(Some(ANSWER_WITHIN)) {
            Ok(Some(r)) => Ok(r.message),
            Ok(None) => Err(StatusError::Silent(path.clone())),
            Err(e) => Err(failed(e)),
        }
    }

    fn unexpected(&self, m: Message) -> StatusError {
        let message = match m {
            Message::Error(e) => format!("{} ({})", e.message, e.code),
            other => format!("unexpected {}", other.kind()),
        };
        StatusError::Refused {
            path: self.path.to_owned(),
            message,
        }
    }
}

/// The status as printed (JSON field names are the protocol's).
#[derive(Serialize)]
struct Report {
    total_frames: u64,
    free_frames: u64,
    held_frames: u64,
    truncated: bool,
    clients: Vec<ClientReport>,
}

#[derive(Serialize)]
struct ClientReport {
    client: u32,
    pid: u32,
    uid: u32,
    regions: Vec<RegionReport>,
}

#[derive(Serialize)]
struct RegionReport {
    region: u32,
    holder: u32,
    min_frames: u64,
    held_frames: u64,
    pinned_frames: u64,
    faults_per_sec: u64,
    postponed_faults: u64,
    reclaimed_frames: u64,
    forced_frames: u64,
}

impl From<&RegionStatus> for RegionReport {
    fn from(r: &RegionStatus) -> RegionReport {
        RegionReport {
            region: r.region.0,
            holder: r.holder.0,
            min_frames: r.min_frames,
            held_frames: r.held_frames,
            pinned_frames: r.pinned_frames,
            faults_per_sec: r.faults_per_sec,
            postponed_faults: r.postponed_faults,
            reclaimed_frames: r.reclaimed_frames,
            forced_frames: r.forced_frames,
        }
    }
}

impl Report {
    fn new(s: &StatusReply, me: ClientId) -> Report {
        Report {
            total_frames: s.total_frames,
            free_frames: s.free_frames,
            held_frames: s.total_frames - s.free_frames.min(s.total_frames),
            truncated: s.truncated,
            clients: s
                .clients
                .iter()
                .filter(|c| c.client != me)
                .map(|c| ClientReport {
                    client: c.client.0,
                    pid: c.pid,
                    uid: c.uid,
                    regions: c.regions.iter().map(RegionReport::from).collect(),
                })
                .collect(),
        }
    }

    /// One line per region (a client without regions: one line, dashes).
    fn table(&self) -> String {
        let mut t = format!(
            "frames: {} total, {} held, {} free; {} clients\n",
            self.total_frames,
            self.held_frames,
            self.free_frames,
            self.clients.len()
        );
        t += &format!(
            "{:>6} {:>8} {:>6} {:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>7}\n",
            "client",
            "pid",
            "uid",
            "region",
            "holder",
            "minFrame",
            "held",
            "pinned",
            "faults/s",
            "postponed",
            "reclaimed",
            "forced"
        );
        for c in &self.clients {
            let who = format!("{:>6} {:>8} {:>6}", c.client, c.pid, c.uid);
            if c.regions.is_empty() {
                t += &format!("{who} {:>6}\n", "-");
            }
            for r in &c.regions {
                t += &format!(
                    "{who} {:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>7}\n",
                    r.region,
                    r.holder,
                    r.min_frames,
                    r.held_frames,
                    r.pinned_frames,
                    r.faults_per_sec,
                    r.postponed_faults,
                    r.reclaimed_frames,
                    r.forced_frames
                );
            }
        }
        if self.truncated {
            t += "(more clients or regions than one reply holds: some are left out)\n";
        }
        t
    }
}
