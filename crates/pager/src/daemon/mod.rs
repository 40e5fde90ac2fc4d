//! Joining the pagepilot daemon, the machine's system resource manager
//! (the Cache Kernel's): a process that joins draws every region it maps
//! from the daemon's frames. Each region registers as a holder (its
//! `minFrame`, its budget, RAPHA's fault limit and processor reserve) and
//! passes the daemon its memory file, its backing file and its dirty map
//! (`SCM_RIGHTS`), so that the daemon can write back what a client killed
//! with `SIGKILL` had not written yet. Faults stay served in the process,
//! never through the daemon: only registrations, grants, reclaim orders,
//! pins and a fault count once a second cross the socket.
//!
//! - Join: `PAGEPILOT_DAEMON=PATH` in the environment (regions join at
//!   their first map), or [`Client::connect`] (`pp_connect` in C). A region
//!   mapped into a [`crate::Pool`] draws from the pool instead. Without a
//!   daemon everything works as before.
//! - Trust: before sending anything the client asks the kernel who listens
//!   at the socket (`SO_PEERCRED`) and goes on only for root, its own user
//!   or the user `PAGEPILOT_DAEMON_UID` names: whoever else squats the path
//!   would receive the regions' memory files and writable backing files
//!   ([`DaemonError::UntrustedDaemon`]).
//! - The daemon's `ReclaimOrder` is HiPEC's normal reclamation (the
//!   policy names the pages, dirty ones written back, `Returned` sent);
//!   `Forced` shrinks the budget at once (the engine names the pages);
//!   `Granted` and `Settled` grow it. Every one carries what the region
//!   holds as the daemon counts it, and the budget follows that.
//! - After `fork` the child does not share its parent's connection (it
//!   would keep the parent "alive" to the daemon): the socket is closed in
//!   the child, whose regions join again through the environment.

mod link;
mod member;

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use pagepilot_protocol::{
    ClientId, ErrorCode, Kind, Message, Peer, Quotas, RegionId, StatusReply, VERSION,
};
use pagepilot_transport::{trusted_daemon, uid_list, Connection, TransportError, Untrusted};

pub use pagepilot_transport::DAEMON_UID_ENV;

pub(crate) use member::{join, DaemonRegion, Membership, Terms};

/// The environment variable naming the daemon's socket: a process started
/// with it joins the daemon at its first map.
pub const DAEMON_ENV: &str = "PAGEPILOT_DAEMON";

/// How long a request waits for the daemon's answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the handshake waits.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon refused, or could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Nothing answers at the socket.
    #[error("cannot connect to the pagepilot daemon at {path}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The daemon answered with an error.
    #[error("the pagepilot daemon refused {}: {message}", request.map_or("the request", Kind::name))]
    Refused {
        /// Its code (`errno()` for C callers).
        code: ErrorCode,
        /// The request refused.
        request: Option<Kind>,
        /// The daemon's words.
        message: String,
    },
    /// The connection failed.
    #[error("the connection to the pagepilot daemon failed")]
    Transport(#[from] TransportError),
    /// No answer in time.
    #[error("the pagepilot daemon did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection is closed (the daemon stopped).
    #[error("the connection to the pagepilot daemon is closed")]
    Closed,
    /// An answer that is not the one due.
    #[error("the pagepilot daemon answered {got} where {expected} was due")]
    Unexpected {
        /// What was due.
        expected: &'static str,
        /// What came.
        got: Kind,
    },
    /// The client's thread could not start.
    #[error("cannot start the daemon client's thread: {0}")]
    Thread(std::io::Error),
    /// The socket is held by a user this process does not trust (not
    /// root, not its own, not `$PAGEPILOT_DAEMON_UID`): nothing was sent.
    #[error(
        "refusing the pagepilot daemon at {}: its socket is held by uid {uid}, not by {}, and nothing was sent to it; if uid {uid} runs your daemon, trust it with {DAEMON_UID_ENV}={uid}",
        path.display(), uid_list(expected)
    )]
    UntrustedDaemon {
        /// The socket.
        path: PathBuf,
        /// Who listens there (the user that called `listen`).
        uid: u32,
        /// The users this process trusts.
        expected: Vec<u32>,
    },
    /// `$PAGEPILOT_DAEMON_UID` is not a user id.
    #[error("{DAEMON_UID_ENV}={value:?} is not a user id (a number)")]
    DaemonUid {
        /// Its value.
        value: String,
    },
}

impl DaemonError {
    /// The errno a C caller gets.
    pub fn errno(&self) -> i32 {
        match self {
            DaemonError::Connect { source, .. } => {
                source.raw_os_error().unwrap_or(libc::ECONNREFUSED)
            }
            DaemonError::Refused { code, .. } => code.errno(),
            DaemonError::Timeout(_) => libc::ETIMEDOUT,
            DaemonError::Closed => libc::ENOTCONN,
            DaemonError::Transport(_) | DaemonError::Unexpected { .. } => libc::EPROTO,
            DaemonError::Thread(e) => e.raw_os_error().unwrap_or(libc::EAGAIN),
            DaemonError::UntrustedDaemon { .. } => libc::EPERM,
            DaemonError::DaemonUid { .. } => libc::EINVAL,
        }
    }
}

/// A process's connection to the daemon. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Client {
    inner: Arc<RegionState>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("path", &self.inner.path)
            .field("id", &self.inner.id)
            .field("quotas", &self.inner.quotas)
            .finish()
    }
}

/// What waits for the next reply from the daemon (replies come in the
/// order of the requests).
enum Waiter {
    /// A caller, blocked until it comes.
    Caller(mpsc::Sender<Message>),
    /// A region's `Request` (answered by `Granted`, the budget grows).
    Grant(RegionId),
    /// A region's `Release` (answered by `Released`).
    Release(RegionId),
    /// Nobody (an unregistration from a region being dropped).
    Nobody,
}

/// The sending side, and the replies due, under one lock so that their
/// orders agree.
struct Writer {
    conn: Connection,
    waiting: VecDeque<Waiter>,
}

pub(crate) struct RegionState {
    path: PathBuf,
    id: ClientId,
    quotas: Quotas,
    /// The process that connected: a child after fork never uses it.
    pid: u32,
    /// The descriptors of the connection (the reader's and the writer's).
    sockets: [RawFd; 2],
    writer: Mutex<Writer>,
    regions: Mutex<HashMap<RegionId, Arc<member::Link>>>,
    next_region: AtomicU32,
    closed: AtomicBool,
    /// Messages sent (requests and notifications): what the daemon costs
    /// a process, for the benchmarks.
    sent: AtomicU64,
}

impl Client {
    /// Connects to the daemon at `path` and joins it: regions this process
    /// maps from now on (outside a [`crate::Pool`]) draw their frames from
    /// the daemon.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, DaemonError> {
        let client = Client::open(path.as_ref())?;
        goodbye_at_exit_once();
        *default_slot() = Some(client.clone());
        Ok(client)
    }

    /// Connects without joining (regions use it when given it explicitly
    /// with [`crate::RegionOptions::with_daemon`]).
    pub fn open(path: &Path) -> Result<Client, DaemonError> {
        let connect_err = |source| DaemonError::Connect {
            path: path.into(),
            source,
        };
        let stream = std::os::unix::net::UnixStream::connect(path).map_err(connect_err)?;
        // Before a byte is sent: see the module's doc.
        trusted_daemon(&stream).map_err(|e| untrusted(path, e))?;
        let writer = stream.try_clone().map_err(connect_err)?;
        let mut reader = Connection::new(stream, Peer::Daemon);
        let writer = Connection::new(writer, Peer::Daemon);
        let pid = std::process::id();
        writer.send(
            &Message::Hello {
                versions: vec![VERSION],
                pid: Some(pid),
            },
            &[],
        )?;
        let welcome = reader
            .receive_within(Some(HELLO_TIMEOUT))?
            .ok_or(DaemonError::Timeout(HELLO_TIMEOUT))?;
        let (id, quotas) = match welcome.message {
            Message::Welcome { client, quotas, .. } => (client, quotas),
            other => return Err(refusal(other, "Welcome")),
        };
        let sockets = [reader.stream().as_raw_fd(), writer.stream().as_raw_fd()];
        link::close_in_children(sockets);
        let inner = Arc::new(RegionState {
            path: path.into(),
            id,
            quotas,
            pid,
            sockets,
            writer: Mutex::new(Writer {
                conn: writer,
                waiting: VecDeque::new(),
            }),
            regions: Mutex::new(HashMap::new()),
            next_region: AtomicU32::new(1),
            closed: AtomicBool::new(false),
            sent: AtomicU64::new(0),
        });
        link::spawn_reader(Arc::downgrade(&inner), reader).map_err(DaemonError::Thread)?;
        Ok(Client { inner })
    }

    /// The daemon's name for this client.
    pub fn id(&self) -> ClientId {
        self.inner.id
    }

    /// The quotas the daemon applies to this process's user.
    pub fn quotas(&self) -> Quotas {
        self.inner.quotas
    }

    /// The socket it is connected to.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether the connection still stands (the daemon may have stopped).
    pub fn is_connected(&self) -> bool {
        !self.inner.closed.load(SeqCst) && self.inner.pid == std::process::id()
    }

    /// The client regions of this process join now, if any (connecting to
    /// `$PAGEPILOT_DAEMON` if the process has not yet).
    pub fn current() -> Result<Option<Client>, DaemonError> {
        default_client()
    }

    /// Messages this client has sent the daemon (the hello aside): faults
    /// send none; registrations, grants asked for, frames returned, pins
    /// and a fault count once a second do.
    pub fn messages_sent(&self) -> u64 {
        self.inner.sent.load(SeqCst)
    }

    /// What the daemon holds and for whom (`pagepilot status`).
    pub fn status(&self) -> Result<StatusReply, DaemonError> {
        match self.inner.call(&Message::Status, &[])? {
            Message::StatusReply(s) => Ok(s),
            other => Err(refusal(other, "StatusReply")),
        }
    }

    pub(crate) fn inner(&self) -> &Arc<RegionState> {
        &self.inner
    }
}

impl RegionState {
    fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn usable(&self) -> Result<(), DaemonError> {
        if self.closed.load(SeqCst) || self.pid != std::process::id() {
            return Err(DaemonError::Closed);
        }
        Ok(())
    }

    /// Sends a request and waits for its reply; an `Error` reply is
    /// [`DaemonError::Refused`].
    pub(crate) fn call(
        &self,
        message: &Message,
        fds: &[BorrowedFd<'_>],
    ) -> Result<Message, DaemonError> {
        let (tx, rx) = mpsc::channel();
        self.send(message, fds, Waiter::Caller(tx))?;
        match rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(Message::Error(e)) => Err(DaemonError::Refused {
                code: e.code,
                request: e.request,
                message: e.message,
            }),
            Ok(reply) => Ok(reply),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(DaemonError::Timeout(REPLY_TIMEOUT)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(DaemonError::Closed),
        }
    }

    /// Sends `message`, its reply (if it has one) going to `waiter`.
    fn send(
        &self,
        message: &Message,
        fds: &[BorrowedFd<'_>],
        waiter: Waiter,
    ) -> Result<(), DaemonError> {
        self.usable()?;
        let mut w = self.writer();
        w.conn.send(message, fds)?;
        w.waiting.push_back(waiter);
        self.sent.fetch_add(1, SeqCst);
        Ok(())
    }

    /// Sends a notification (no reply unless refused).
    fn notify(&self, message: &Message) -> Result<(), DaemonError> {
        self.usable()?;
        self.writer().conn.send(message, &[])?;
        self.sent.fetch_add(1, SeqCst);
        Ok(())
    }

    fn regions_mut(&self) -> MutexGuard<'_, HashMap<RegionId, Arc<member::Link>>> {
        self.regions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn link(&self, region: RegionId) -> Option<Arc<member::Link>> {
        self.regions_mut().get(&region).cloned()
    }

    /// The daemon is gone: callers waiting are told (their channels
    /// close), regions keep the budgets they have.
    fn close(&self) {
        self.closed.store(true, SeqCst);
        self.writer().waiting.clear();
    }
}

impl Drop for RegionState {
    fn drop(&mut self) {
        self.closed.store(true, SeqCst);
        if self.pid == std::process::id() {
            link::forget_sockets(self.sockets);
            let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
            let _ = w.conn.send(&Message::Goodbye, &[]);
            // The reader thread sees the end of the stream and stops.
            let _ = w.conn.stream().shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The pager's error for a daemon [`trusted_daemon`] refused.
fn untrusted(path: &Path, e: Untrusted) -> DaemonError {
    match e {
        Untrusted::Peer { peer, expected } => DaemonError::UntrustedDaemon {
            path: path.into(),
            uid: peer.uid,
            expected,
        },
        Untrusted::BadVariable { value } => DaemonError::DaemonUid { value },
        Untrusted::Credentials(source) => DaemonError::Connect {
            path: path.into(),
            source,
        },
    }
}

fn refusal(got: Message, expected: &'static str) -> DaemonError {
    match got {
        Message::Error(e) => DaemonError::Refused {
            code: e.code,
            request: e.request,
            message: e.message,
        },
        other => DaemonError::Unexpected {
            expected,
            got: other.kind(),
        },
    }
}

static DEFAULT: Mutex<Option<Client>> = Mutex::new(None);

fn default_slot() -> MutexGuard<'static, Option<Client>> {
    DEFAULT.lock().unwrap_or_else(|p| p.into_inner())
}

/// The client regions of this process join: the one [`Client::connect`]
/// made, else one connected to `$PAGEPILOT_DAEMON` (at the first map, and
/// again in a child after fork); `None` without either.
pub(crate) fn default_client() -> Result<Option<Client>, DaemonError> {
    let mut slot = default_slot();
    if let Some(c) = slot.as_ref().filter(|c| c.is_connected()) {
        return Ok(Some(c.clone()));
    }
    let path = match std::env::var_os(DAEMON_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => return Ok(None),
    };
    let client = Client::open(&path)?;
    goodbye_at_exit_once();
    *slot = Some(client.clone());
    Ok(Some(client))
}

/// The process's client says goodbye at exit.
fn goodbye_at_exit_once() {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        let _ = crate::sys::at_exit(goodbye_at_exit);
    });
}

/// At a normal exit (after the pager's own handler wrote back the regions
/// still mapped: handlers run in reverse order of registration), the
/// process's client leaves with `Goodbye`, not as a client that died.
/// Never blocks: a lock held elsewhere skips it (the daemon then sees the
/// connection close, and writes back what is still marked dirty).
extern "C" fn goodbye_at_exit() {
    let Ok(slot) = DEFAULT.try_lock() else {
        return;
    };
    let Some(inner) = slot.as_ref().map(|c| c.inner.clone()) else {
        return;
    };
    drop(slot);
    if inner.usable().is_err() {
        return;
    }
    // Closed first: the reader thread then takes the end of the
    // connection that follows as expected.
    inner.closed.store(true, SeqCst);
    if let Ok(w) = inner.writer.try_lock() {
        let _ = w.conn.send(&Message::Goodbye, &[]);
    };
}

/// Whether regions mapped now would join the daemon (without connecting).
pub(crate) fn joining() -> bool {
    default_slot().as_ref().is_some_and(Client::is_connected)
        || std::env::var_os(DAEMON_ENV).is_some_and(|p| !p.is_empty())
}
