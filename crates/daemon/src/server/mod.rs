//! The daemon's I/O loop around the [`Core`]: a Unix socket whose clients
//! are named by the kernel (`SO_PEERCRED`), pass their regions' descriptors
//! (`SCM_RIGHTS`) and speak the protocol; one thread polls the listener
//! and every connection, feeds the core what arrives and sends what it
//! returns. Write-backs of dead clients run on their own threads, so that
//! a large one never stalls the others; the core hears of the client's
//! death (and its frames return) only once its pages are written.
//!
//! A client that sends garbage, half a frame and then nothing, a request
//! beyond its quota or descriptors that are not what it announced gets an
//! error naming the problem or is disconnected: never anyone else.

mod connection;
mod departure;
mod dirtyfile;
mod files;
mod logging;
mod outbox;
mod privileges;
mod process;
mod serve;
mod signals;
mod socket;
mod vetting;
mod writeback;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pagepilot_frames::Clock;
use pagepilot_protocol::ClientId;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use crate::{Config, Core, CoreError};
use connection::Client;
use departure::Departure;

pub use files::{FilesError, MAX_DIRTY_BYTES, PAGE};
pub use privileges::{
    drop_privileges, BoundingSet, Dropped, Identity, PrivilegeError, RunAs, Step,
};
pub use signals::{raise_descriptor_limit, signalled, stop_on_signals};
pub use writeback::WriteBackError;

/// Clients served at once unless told otherwise.
pub const DEFAULT_MAX_CLIENTS: usize = 1024;
/// How long a client may take to finish a frame it began, unless told
/// otherwise.
pub const DEFAULT_FRAME_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may take to say `Hello`, unless told otherwise.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client with no region may send nothing before it is
/// disconnected, unless told otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the checks of a registration's descriptors may take (a file on
/// a hung file system never answers), unless told otherwise.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the write-back of one dead client may take, unless told
/// otherwise.
pub const DEFAULT_WRITE_BACK_BUDGET: Duration = Duration::from_secs(60);
/// How long a stopping daemon waits for write-backs under way, unless told
/// otherwise.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// Descriptors kept for the daemon itself (the listener, the wake-up pair,
/// standard streams, the configuration, libraries): the rest of
/// `RLIMIT_NOFILE` is its clients'.
const RESERVED_DESCRIPTORS: u64 = 64;
/// The loop wakes at least this often (signals, finished write-backs).
const PERIOD: Duration = Duration::from_millis(100);
/// Connections accepted per wake-up.
const ACCEPTS_PER_TURN: usize = 64;
/// Requests of one client handled per pass over the clients; a wake-up
/// makes two (as a client's frames are read, then for every backlog), so
/// the others wait at most twice this many requests of each client.
const REQUESTS_PER_TURN: usize = 64;

/// Logs one line to stderr, rate-limited (`log.rs`).
macro_rules! log {
    ($($arg:tt)*) => { $crate::server::logging::write_log(format_args!($($arg)*)) };
}
pub(crate) use log;

/// How the server runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// Where it listens.
    pub socket: PathBuf,
    /// Clients served at once; those beyond are refused (`BeyondQuota`).
    pub max_clients: usize,
    /// How long a client may hold an unfinished frame before it is
    /// disconnected.
    pub frame_timeout: Duration,
    /// How long a connection may take to say `Hello`.
    pub hello_timeout: Duration,
    /// How long a client with no region may stay silent.
    pub idle_timeout: Duration,
    /// How long a registration's descriptor checks may take.
    pub check_timeout: Duration,
    /// How long the write-back of one dead client may take; what is left
    /// when it runs out is reported.
    pub write_back_budget: Duration,
    /// How long a stopping daemon waits for write-backs under way before it
    /// reports what is left and exits.
    pub shutdown_timeout: Duration,
    /// No log lines (for tests that make thousands of connections); the
    /// setting is the process's, for every server in it.
    pub quiet: bool,
}

impl ServerOptions {
    /// Listening at `socket`, the other options at their defaults.
    pub fn new(socket: impl Into<PathBuf>) -> ServerOptions {
        ServerOptions {
            socket: socket.into(),
            max_clients: DEFAULT_MAX_CLIENTS,
            frame_timeout: DEFAULT_FRAME_TIMEOUT,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            check_timeout: DEFAULT_CHECK_TIMEOUT,
            write_back_budget: DEFAULT_WRITE_BACK_BUDGET,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            quiet: false,
        }
    }
}

/// Why the server did not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration does not make a core.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A daemon answers at the socket already.
    #[error("another daemon is listening at {0}")]
    AlreadyRunning(PathBuf),
    /// Something that is not a socket is where the socket goes.
    #[error("{0} exists and is not a socket: not removing it")]
    NotASocket(PathBuf),
    /// The socket could not be made.
    #[error("cannot listen at {path}")]
    Listen {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `poll` failed.
    #[error("poll: {0}")]
    Poll(std::io::Error),
}

/// Shares the descriptors `RLIMIT_NOFILE` allows among the clients: the
/// core refuses connections and registrations beyond them, and at most as
/// many clients as their connections fit are served.
fn budget_descriptors(core: &mut Core<MonotonicClock>, options: &mut ServerOptions) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    let Some(limit) = limit else {
        return;
    };
    let budget = limit.saturating_sub(RESERVED_DESCRIPTORS);
    core.set_descriptor_budget(budget);
    let per_client = u64::from(crate::DESCRIPTORS_PER_CONNECTION);
    let fit = usize::try_from(budget / per_client).unwrap_or(usize::MAX);
    if options.max_clients > fit {
        log!(
            "RLIMIT_NOFILE is {limit}: serving at most {fit} clients, not {} \
             (raise the limit for more)",
            options.max_clients
        );
        options.max_clients = fit;
    }
}

/// A monotonic clock for the core, from the server's start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MonotonicClock(Instant);

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Stops a running [`Server`] from another thread: it tells its clients
/// (`ShuttingDown`), waits for write-backs under way, and returns.
#[derive(Clone, Debug)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
    wake: Arc<UnixStream>,
}

impl StopHandle {
    /// Asks the server to stop; returns at once.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
        let _ = (&*self.wake).write(&[0]);
    }
}

/// The daemon: the listening socket, the core and the clients.
#[derive(Debug)]
pub struct Server {
    core: Core<MonotonicClock>,
    clock: MonotonicClock,
    listener: UnixListener,
    /// The socket's absolute path, and its (device, inode): removed at the
    /// end only if it is still this server's.
    socket: PathBuf,
    socket_id: (u64, u64),
    options: ServerOptions,
    clients: BTreeMap<ClientId, Client>,
    departing: Vec<Departure>,
    doomed: Vec<(Client, connection::End)>,
    /// Clients the daemon ended whose connection a process still holds:
    /// written back once none does.
    lingering: Vec<Client>,
    /// Descriptor checks in flight per account.
    in_flight: vetting::InFlight,
    stop: Arc<AtomicBool>,
    /// Written by write-back threads and [`StopHandle::stop`] to end a poll.
    wake_rx: UnixStream,
    wake_tx: Arc<UnixStream>,
    accept_paused_until: Option<Instant>,
}

impl Server {
    /// Listens at `options.socket` (mode 0666: quotas are per user, every
    /// user may connect), with a core handing out `config`'s budget. A
    /// socket file left by a daemon that died is replaced; one that
    /// answers is [`ServerError::AlreadyRunning`].
    pub fn bind(config: Config, options: ServerOptions) -> Result<Server, ServerError> {
        if options.quiet {
            logging::QUIET.store(true, Ordering::Relaxed);
        }
        let clock = MonotonicClock(Instant::now());
        let mut core = Core::new(config, clock)?;
        let mut options = options;
        budget_descriptors(&mut core, &mut options);
        let listen_error = |source| ServerError::Listen {
            path: options.socket.clone(),
            source,
        };
        let socket = std::path::absolute(&options.socket).map_err(listen_error)?;
        socket::claim(&socket)?;
        let listener = UnixListener::bind(&socket).map_err(listen_error)?;
        let meta = std::fs::metadata(&socket).map_err(listen_error)?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
            .map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let (wake_rx, wake_tx) = UnixStream::pair().map_err(listen_error)?;
        wake_rx.set_nonblocking(true).map_err(listen_error)?;
        wake_tx.set_nonblocking(true).map_err(listen_error)?;
        Ok(Server {
            core,
            clock,
            listener,
            socket,
            socket_id: (meta.dev(), meta.ino()),
            options,
            clients: BTreeMap::new(),
            departing: Vec::new(),
            doomed: Vec::new(),
            lingering: Vec::new(),
            in_flight: vetting::InFlight::default(),
            stop: Arc::new(AtomicBool::new(false)),
            wake_rx,
            wake_tx: Arc::new(wake_tx),
            accept_paused_until: None,
        })
    }

    /// The socket's path (absolute).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A handle that stops [`Server::run`] from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            flag: self.stop.clone(),
            wake: self.wake_tx.clone(),
        }
    }

    /// Serves until stopped ([`StopHandle::stop`], or SIGTERM/SIGINT once
    /// [`stop_on_signals`] is installed); then tells every client, waits
    /// for the write-backs under way and removes the socket.
    pub fn run(mut self) -> Result<(), ServerError> {
        log!(
            "listening at {} ({} frames, at most {} clients)",
            self.socket.display(),
            self.core.total_frames(),
            self.options.max_clients
        );
        while !self.stop.load(Ordering::Relaxed) && !signalled() {
            self.turn()?;
        }
        self.shutdown();
        Ok(())
    }

    /// One wake-up: wait for something to do, then do it.
    fn turn(&mut self) -> Result<(), ServerError> {
        let timeout = self.next_wake(Instant::now());
        let (listener, wake, ready) = self.wait(timeout)?;
        if listener {
            self.accept();
        }
        if wake {
            let mut buf = [0u8; 64];
            while matches!((&self.wake_rx).read(&mut buf), Ok(n) if n > 0) {}
        }
        for (id, flags) in ready {
            if flags.intersects(PollFlags::OUT | PollFlags::ERR | PollFlags::HUP) {
                self.flush(id, Instant::now());
            }
            let wants_input = self.clients.get(&id).is_some_and(|c| c.wants_input());
            if wants_input && !(flags - PollFlags::OUT).is_empty() {
                self.serve(id);
            }
            self.end_doomed();
        }
        // Frames held back while their client left its replies unread.
        let waiting: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| c.can_handle())
            .map(|c| c.id)
            .collect();
        for id in waiting {
            self.handle_backlog(id, false);
            self.end_doomed();
        }
        let now = Instant::now();
        self.finish_vetting(now);
        self.end_doomed();
        self.finish_departures(now);
        if self
            .core
            .next_deadline_ns()
            .is_some_and(|d| d <= self.clock.now_ns())
        {
            let out = self.core.tick();
            self.route(out);
        }
        let now = Instant::now();
        self.time_out_partial_frames(now);
        self.time_out_silent(now);
        self.drop_stalled(now);
        self.end_doomed();
        Ok(())
    }

    /// The longest the loop may sleep: until the core's next deadline, a
    /// half frame's timeout, a client's send timeout, the accept pause's
    /// end, or the period; not at all while frames wait to be handled.
    fn next_wake(&self, now: Instant) -> Duration {
        let mut wake = PERIOD;
        if let Some(d) = self.core.next_deadline_ns() {
            wake = wake.min(Duration::from_nanos(d.saturating_sub(self.clock.now_ns())));
        }
        let o = &self.options;
        for c in self.clients.values() {
            if c.can_handle() {
                return Duration::ZERO;
            }
            let partial = c.partial_since.map(|s| s + o.frame_timeout);
            let check = c.vetting.as_ref().map(|v| v.deadline(o.check_timeout));
            let silent = match (c.welcomed, c.regions.is_empty()) {
                (false, _) => Some(c.connected_at + o.hello_timeout),
                (true, true) => Some(c.last_input + o.idle_timeout),
                (true, false) => None,
            };
            for due in partial
                .into_iter()
                .chain(c.out.deadline())
                .chain(check)
                .chain(silent)
            {
                wake = wake.min(due.saturating_duration_since(now));
            }
        }
        if let Some(due) = self.next_departure_deadline() {
            wake = wake.min(due.saturating_duration_since(now));
        }
        if let Some(until) = self.accept_paused_until {
            wake = wake.min(until.saturating_duration_since(now));
        }
        wake
    }

    /// Polls; returns whether the listener and the wake-up socket are
    /// ready, and the clients that are with what they are ready for. A
    /// client is polled for input unless it leaves its replies unread,
    /// for output while bytes wait for it.
    #[allow(clippy::type_complexity)]
    fn wait(
        &mut self,
        timeout: Duration,
    ) -> Result<(bool, bool, Vec<(ClientId, PollFlags)>), ServerError> {
        let now = Instant::now();
        let accepting = self.accept_paused_until.is_none_or(|t| t <= now);
        if accepting {
            self.accept_paused_until = None;
        }
        let mut fds = Vec::with_capacity(self.clients.len() + 2);
        fds.push(PollFd::from_borrowed_fd(
            self.wake_rx.as_fd(),
            PollFlags::IN,
        ));
        if accepting {
            fds.push(PollFd::new(&self.listener, PollFlags::IN));
        }
        let first = fds.len();
        let mut ids = Vec::with_capacity(self.clients.len());
        for c in self.clients.values() {
            let mut events = PollFlags::empty();
            if c.wants_input() {
                events |= PollFlags::IN;
            }
            if c.out.queued() > 0 {
                events |= PollFlags::OUT;
            }
            // Not polled at all: a hang-up would wake the loop for nothing.
            if !events.is_empty() {
                ids.push(c.id);
                fds.push(PollFd::new(c.conn.stream(), events));
            }
        }
        // Lingering clients: what they send is drained, and a hang-up
        // (no process holds their connection any more) wakes the loop.
        for c in &self.lingering {
            fds.push(PollFd::new(c.conn.stream(), PollFlags::IN));
        }
        let timeout = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok((false, false, Vec::new())),
            Err(e) => return Err(ServerError::Poll(e.into())),
        }
        let wake = !fds[0].revents().is_empty();
        let listener = accepting && !fds[1].revents().is_empty();
        let ready = ids
            .into_iter()
            .zip(&fds[first..])
            .map(|(id, fd)| (id, fd.revents()))
            .filter(|(_, flags)| !flags.is_empty())
            .collect();
        Ok((listener, wake, ready))
    }
}
