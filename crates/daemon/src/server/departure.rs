//! Clients leaving with regions the daemon can write back: the write-back
//! runs on a thread of its own, within a time budget, and only when it is
//! done (or its budget spent) is the client answered (`Goodbye`) or
//! disconnected from the core, which returns its frames (dependency order:
//! write back, return, forget).
//!
//! A client the daemon ends itself (a timeout, a protocol error) while some
//! process still holds its connection (a forked child, its parent gone)
//! is not written back under that process: it lingers, unserved, until no
//! process holds the connection (the daemon's end of it reports a hang-up),
//! and is written back then.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pagepilot_policy::chain;
use pagepilot_protocol::{Message, RegionId};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

use super::connection::Client;
use super::files::RegionFds;
use super::vetting::retire;
use super::writeback::{write_back, WriteBack, WriteBackError};
use super::{log, process, Server};

/// What a write-back thread returns: each region's outcome, or `None`
/// when the client's process still runs (its memory is its own).
type Outcomes = Option<Vec<(RegionId, Result<WriteBack, WriteBackError>)>>;

/// A client whose regions are being written back before the core hears
/// that it left.
#[derive(Debug)]
pub(crate) struct Departure {
    client: Client,
    /// It said `Goodbye` (it is answered once the write-back is done);
    /// else it is gone.
    goodbye: bool,
    work: Work,
    /// When the loop stops waiting for the write-back.
    deadline: Instant,
}

#[derive(Debug)]
enum Work {
    /// No thread could be started yet: tried again each turn (never on
    /// the loop thread, whose every client would wait).
    Waiting(Vec<(RegionId, RegionFds)>),
    Thread(JoinHandle<Outcomes>),
}

/// Whether a process still holds the other end of `client`'s connection:
/// the daemon's end reports a hang-up only once every holder has closed it
/// (or exited, which a process does after its memory is gone).
pub(super) fn connection_held(client: &Client) -> bool {
    let mut fds = [PollFd::new(client.conn.stream(), PollFlags::empty())];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(_) => !fds[0]
            .revents()
            .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
        Err(_) => false,
    }
}

/// Reads and drops what a lingering client still sends (a writer must not
/// block on a connection nobody reads), at most a few reads a turn, its
/// descriptors closed off the loop; returns whether a process still holds
/// the other end: the daemon shut only its sending side, so the end of
/// the stream is the last holder closing it.
pub(super) fn drain(client: &Client) -> bool {
    let mut buf = [0u8; 16 * 1024];
    for _ in 0..4 {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_READ))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let flags = RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC;
        let read = recvmsg(client.conn.stream(), &mut iov, &mut control, flags);
        let fds: Vec<OwnedFd> = control
            .drain()
            .filter_map(|m| match m {
                RecvAncillaryMessage::ScmRights(fds) => Some(fds),
                _ => None,
            })
            .flatten()
            .collect();
        if !fds.is_empty() {
            retire(fds);
        }
        match read {
            Ok(r) if r.bytes == 0 => return false,
            Ok(_) | Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => break,
            Err(_) => return false,
        }
    }
    true
}

/// Descriptors taken per read of a lingering connection.
const MAX_FDS_PER_READ: usize = 16;

impl Server {
    /// Writes back `regions` on a thread of their own; the core hears of
    /// the client when it is done.
    pub(super) fn depart(
        &mut self,
        client: Client,
        regions: Vec<(RegionId, RegionFds)>,
        goodbye: bool,
    ) {
        // Time to see the process exit, then the write-back's own budget.
        let deadline = Instant::now() + process::EXIT_WAIT + self.options.write_back_budget;
        let mut d = Departure {
            client,
            goodbye,
            work: Work::Waiting(regions),
            deadline,
        };
        start(&mut d, &self.wake_tx, self.options.write_back_budget);
        self.departing.push(d);
    }

    /// Departures whose write-back is done, or past its deadline: logged,
    /// then the client is answered `Goodbye` or disconnected, and its
    /// frames return. Those still without a thread try again. Lingering
    /// clients nobody holds any more depart.
    pub(super) fn finish_departures(&mut self, now: Instant) {
        let gone: Vec<usize> = (0..self.lingering.len())
            .filter(|&i| !drain(&self.lingering[i]))
            .collect();
        for i in gone.into_iter().rev() {
            let client = self.lingering.swap_remove(i);
            log!("{}: no process holds its connection now", client.name());
            self.leave(client);
        }
        let (wake, budget) = (self.wake_tx.clone(), self.options.write_back_budget);
        let mut i = 0;
        while i < self.departing.len() {
            let d = &mut self.departing[i];
            start(d, &wake, budget);
            let done = match &d.work {
                Work::Thread(h) => h.is_finished() || now >= d.deadline,
                Work::Waiting(_) => now >= d.deadline,
            };
            if done {
                let d = self.departing.swap_remove(i);
                self.finish(d);
            } else {
                i += 1;
            }
        }
    }

    /// When the loop must look at departures next: the earliest deadline.
    pub(super) fn next_departure_deadline(&self) -> Option<Instant> {
        self.departing.iter().map(|d| d.deadline).min()
    }

    fn finish(&mut self, d: Departure) {
        let name = d.client.name();
        match d.work {
            Work::Thread(h) if h.is_finished() => {
                let outcomes = h.join().unwrap_or_else(|_| {
                    log!("{name}'s write-back thread panicked");
                    Some(Vec::new())
                });
                log_outcomes(&name, outcomes);
            }
            Work::Thread(_) => log!(
                "{name}: WRITE-BACK NOT FINISHED within {:?} (a backing file that does not \
                 answer?): what it has not written stays in the client's memory file, unwritten",
                process::EXIT_WAIT + self.options.write_back_budget
            ),
            Work::Waiting(regions) => {
                log!(
                    "{name}: WRITE-BACK NOT STARTED: no thread could be made; {} regions left \
                     unwritten",
                    regions.len()
                );
                retire(regions);
            }
        }
        let id = d.client.id;
        if d.goodbye {
            self.clients.insert(id, d.client);
            let out = self.ask_core(id, Message::Goodbye);
            self.route(out);
        } else {
            retire(d.client);
            self.forget(id);
        }
    }

    /// The daemon stops: every client told (`ShuttingDown`) and closed;
    /// write-backs under way given until `shutdown_timeout` to finish, then
    /// what is left is reported (live clients keep their memory and write
    /// back themselves).
    pub(super) fn shutdown(&mut self) {
        log!("stopping: {} clients connected", self.clients.len());
        let out = self.core.shutdown();
        self.route(out);
        self.end_doomed();
        let until = Instant::now() + self.options.shutdown_timeout;
        for mut d in std::mem::take(&mut self.departing) {
            start(&mut d, &self.wake_tx, self.options.write_back_budget);
            let name = d.client.name();
            match d.work {
                Work::Thread(h) => {
                    while !h.is_finished() && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if h.is_finished() {
                        log_outcomes(&name, h.join().unwrap_or_default());
                    } else {
                        log!(
                            "{name}: WRITE-BACK NOT FINISHED when the daemon stopped \
                             (shutdown timeout {:?}): what it has not written stays in its \
                             memory file, unwritten",
                            self.options.shutdown_timeout
                        );
                    }
                }
                Work::Waiting(regions) => log!(
                    "{name}: WRITE-BACK NOT STARTED when the daemon stopped: {} regions unwritten",
                    regions.len()
                ),
            }
            if d.goodbye {
                let mut client = d.client;
                let now = Instant::now();
                let _ = client
                    .out
                    .push(client.conn.stream(), &Message::Goodbye, now);
            }
        }
        for client in std::mem::take(&mut self.lingering) {
            log!(
                "{}: still held by a process when the daemon stopped: its memory is its own",
                client.name()
            );
            retire(client);
        }
        std::mem::take(&mut self.clients)
            .into_values()
            .for_each(retire);
    }
}

/// Starts a departure's thread, if it has none yet and one can be made.
fn start(d: &mut Departure, wake: &Arc<UnixStream>, budget: Duration) {
    let Work::Waiting(regions) = &mut d.work else {
        return;
    };
    let regions = std::mem::take(regions);
    let wake = wake.clone();
    // A client gone without Goodbye is written back only once its
    // process has exited (a client killed closes its socket a moment
    // before the kernel marks it exited); one that said Goodbye gave
    // its regions up, and is written back at once.
    let process = match d.goodbye {
        true => None,
        false => d.client.process.as_ref().and_then(|p| p.try_clone().ok()),
    };
    let (tx, rx) = std::sync::mpsc::channel::<Vec<(RegionId, RegionFds)>>();
    let spawned = std::thread::Builder::new()
        .name(format!("write-back {}", d.client.id.0))
        .spawn(move || {
            let regions = rx.recv().unwrap_or_default();
            let exited = process::exited_within(process.as_ref(), process::EXIT_WAIT);
            let deadline = Instant::now() + budget;
            let outcomes = exited.then(|| write_back_all(regions, deadline));
            let _ = std::io::Write::write(&mut &*wake, &[1]);
            outcomes
        });
    match spawned {
        Ok(handle) => {
            // The receiver lives until the thread has them.
            let _ = tx.send(regions);
            d.work = Work::Thread(handle);
        }
        Err(e) => {
            log!(
                "no thread for {}'s write-back ({e}): trying again",
                d.client.name()
            );
            d.work = Work::Waiting(regions);
        }
    }
}

fn log_outcomes(name: &str, outcomes: Outcomes) {
    match outcomes {
        Some(outcomes) => {
            for (region, outcome) in outcomes {
                log_write_back(name, region, &outcome);
            }
        }
        None => log!(
            "{name}: its process still runs after the connection ended: its memory is its own, not written back"
        ),
    }
}

fn write_back_all(
    regions: Vec<(RegionId, RegionFds)>,
    deadline: Instant,
) -> Vec<(RegionId, Result<WriteBack, WriteBackError>)> {
    // Each region's descriptors are closed once it is written; the
    // regions share one budget.
    regions
        .into_iter()
        .map(|(region, fds)| (region, write_back(&fds, deadline)))
        .collect()
}

fn log_write_back(name: &str, region: RegionId, outcome: &Result<WriteBack, WriteBackError>) {
    let region = region.0;
    match outcome {
        Ok(w) if w.is_complete() => log!(
            "{name}: region {region}: wrote back {} dirty pages (pages 0..{} looked at, {} past the file's end not)",
            w.written, w.considered, w.past_end
        ),
        Ok(w) => {
            if w.out_of_time {
                log!(
                    "{name}: region {region}: WRITE-BACK INCOMPLETE, out of time: {} dirty pages written, {} found and not written, {} pages not examined",
                    w.written, w.left, w.unexamined
                );
            }
            if !w.out_of_time || w.failed > 0 {
                log!(
                    "{name}: region {region}: WRITE-BACK FAILED for {} dirty pages ({} written)",
                    w.failed, w.written
                );
            }
            for e in &w.errors {
                log!("{name}: region {region}: {}", chain(e));
            }
        }
        Err(e) => log!("{name}: region {region}: WRITE-BACK FAILED: {}", chain(&e)),
    }
}
