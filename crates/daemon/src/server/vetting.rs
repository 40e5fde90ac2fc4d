//! System calls on the descriptors clients pass never run on the loop
//! thread: a file on a hung file system (a FUSE server that stops
//! answering, a dead NFS server) blocks `fstat`, `pread` and even `close`
//! forever, and the thread that made the call with it. A registration's
//! descriptors are checked on a thread of their own, given
//! [`super::ServerOptions::check_timeout`] (the client's requests wait
//! meanwhile, others are served); descriptors the daemon lets go of are
//! closed on threads too. A worker that never returns costs one thread and
//! the descriptors it holds; a user may have at most [`STUCK_PER_ACCOUNT`]
//! checks stuck (and one running a connection), so one user's hung files
//! cannot take the daemon's threads.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pagepilot_protocol::RegisterRegion;

use super::files::{self, FilesError, RegionFds};
use super::log;
use crate::AccountId;

/// Checks of one account's descriptors that may be stuck (timed out and
/// not returned) before its registrations with descriptors are refused.
/// Checks still within their time are bounded already: one a connection.
pub const STUCK_PER_ACCOUNT: u32 = 4;

/// What a finished check says.
pub(crate) type Checked = Result<RegionFds, FilesError>;

/// Why a check could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VetError {
    /// The account has checks that timed out and never returned.
    #[error(
        "{0} has {STUCK_PER_ACCOUNT} descriptor checks that timed out and have not returned \
         (files on a file system that does not answer?)"
    )]
    TooMany(AccountId),
    /// No thread could be started for it.
    #[error("no thread for the descriptor check: {0}")]
    Thread(std::io::Error),
}

/// Checks stuck per account, shared with the workers, which count
/// themselves out when they return at last.
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlight(Arc<Mutex<BTreeMap<AccountId, u32>>>);

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<AccountId, u32>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn admits(&self, account: AccountId) -> bool {
        self.lock()
            .get(&account)
            .is_none_or(|&n| n < STUCK_PER_ACCOUNT)
    }
}

/// One check's fate, decided under the [`InFlight`] lock so that a check
/// that returns just as it times out is counted stuck exactly as long as
/// it is.
#[derive(Debug, Default)]
struct Fate {
    returned: bool,
    stuck: bool,
}

/// A check as its worker and the loop both see it.
#[derive(Clone, Debug)]
struct Ticket {
    in_flight: InFlight,
    account: AccountId,
    fate: Arc<Mutex<Fate>>,
}

impl Ticket {
    /// The worker returned: no longer stuck, if it was.
    fn returned(&self) {
        let mut map = self.in_flight.lock();
        let mut fate = self.fate.lock().unwrap_or_else(|e| e.into_inner());
        fate.returned = true;
        if fate.stuck {
            if let Some(n) = map.get_mut(&self.account) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&self.account);
                }
            }
        }
    }

    /// The loop gave up on it: stuck until it returns.
    fn abandoned(&self) {
        let mut map = self.in_flight.lock();
        let mut fate = self.fate.lock().unwrap_or_else(|e| e.into_inner());
        if !fate.returned && !fate.stuck {
            fate.stuck = true;
            *map.entry(self.account).or_insert(0) += 1;
        }
    }
}

/// A registration waiting for its descriptors' check.
#[derive(Debug)]
pub(crate) struct Vetting {
    /// The registration.
    pub register: RegisterRegion,
    started: Instant,
    verdict: Receiver<Checked>,
    ticket: Ticket,
}

impl Drop for Vetting {
    /// A check its client no longer waits for (it left, or timed out) is
    /// stuck until its worker returns: leaving does not reset the count.
    fn drop(&mut self) {
        self.ticket.abandoned();
    }
}

/// Where a check is.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Still running.
    Running,
    /// Done in time.
    Done(Checked),
    /// Not done in time: the client is refused; the worker closes the
    /// descriptors itself if it ever returns.
    TimedOut(Duration),
}

impl Vetting {
    /// Starts checking `fds` for `register` on a worker, which writes to
    /// `wake` when done.
    pub fn start(
        register: RegisterRegion,
        fds: Vec<OwnedFd>,
        account: AccountId,
        in_flight: &InFlight,
        wake: Arc<UnixStream>,
    ) -> Result<Vetting, VetError> {
        if !in_flight.admits(account) {
            retire(fds);
            return Err(VetError::TooMany(account));
        }
        let ticket = Ticket {
            in_flight: in_flight.clone(),
            account,
            fate: Arc::default(),
        };
        let theirs = ticket.clone();
        let (tx, verdict) = mpsc::channel();
        let files = register.files;
        std::thread::Builder::new()
            .name("descriptor check".into())
            .spawn(move || {
                let checked = files::check(files, fds);
                // A loop that gave up on it dropped the receiver: the
                // descriptors are closed here, not there.
                let unsent = tx.send(checked).err();
                drop(unsent);
                theirs.returned();
                let _ = std::io::Write::write(&mut &*wake, &[2]);
            })
            // A failed spawn drops the closure, and the descriptors with
            // it, here: there is no thread to close them on either.
            .map_err(VetError::Thread)?;
        Ok(Vetting {
            register,
            started: Instant::now(),
            verdict,
            ticket,
        })
    }

    /// Whether the check is done, at `now`, given `timeout`. A check timed
    /// out counts as stuck for its account until its worker returns.
    pub fn poll(&self, now: Instant, timeout: Duration) -> Verdict {
        match self.verdict.try_recv() {
            Ok(checked) => Verdict::Done(checked),
            Err(TryRecvError::Empty) if now < self.started + timeout => Verdict::Running,
            Err(TryRecvError::Empty) => {
                self.ticket.abandoned();
                Verdict::TimedOut(timeout)
            }
            Err(TryRecvError::Disconnected) => Verdict::TimedOut(Duration::ZERO),
        }
    }

    /// When it times out.
    pub fn deadline(&self, timeout: Duration) -> Instant {
        self.started + timeout
    }
}

/// Closes descriptors the daemon lets go of on a thread of their own
/// (`close` of a file on a hung FUSE mount waits for its `FLUSH`). If no
/// thread can be started they are closed here, as the failed spawn drops
/// them: better a stall than a leak that ends in a daemon out of
/// descriptors.
pub(crate) fn retire<T: Send + 'static>(what: T) {
    let spawned = std::thread::Builder::new()
        .name("descriptor close".into())
        .spawn(move || drop(what));
    if let Err(e) = spawned {
        log!("no thread to close descriptors ({e}): closed on the loop");
    }
}
