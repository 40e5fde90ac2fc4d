//! Clients leaving with regions the daemon can write back: the write-back
//! runs on a thread of its own, and only when it is done is the client
//! answered (`Goodbye`) or disconnected from the core, which returns its
//! frames (dependency order: write back, return, forget).

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pagepilot_protocol::{Message, RegionId};

use super::connection::Client;
use super::files::RegionFds;
use super::writeback::{write_back, WriteBack, WriteBackError, WRITE_BACK_BUDGET};
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
}

#[derive(Debug)]
enum Work {
    Thread(JoinHandle<Outcomes>),
    Done(Outcomes),
}

impl Server {
    /// Writes back `regions` on a thread of their own (here, if no thread
    /// can be made); the core hears of the client when it is done.
    pub(super) fn depart(
        &mut self,
        client: Client,
        regions: Vec<(RegionId, RegionFds)>,
        goodbye: bool,
    ) {
        let work = Arc::new(Mutex::new(Some(regions)));
        let wake = self.wake_tx.clone();
        let theirs = work.clone();
        // A client gone without Goodbye is written back only once its
        // process has exited (a client killed closes its socket a moment
        // before the kernel marks it exited); one that said Goodbye gave
        // its regions up, and is written back at once.
        let process = match goodbye {
            true => None,
            false => client.process.as_ref().and_then(|p| p.try_clone().ok()),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("write-back {}", client.id.0))
            .spawn(move || {
                let regions = theirs.lock().ok().and_then(|mut w| w.take());
                let exited = process::exited_within(process.as_ref(), process::EXIT_WAIT);
                let outcomes = exited.then(|| write_back_all(regions.unwrap_or_default()));
                let _ = std::io::Write::write(&mut &*wake, &[1]);
                outcomes
            });
        let work = match spawned {
            Ok(handle) => Work::Thread(handle),
            Err(e) => {
                log!(
                    "no thread for {}'s write-back ({e}): writing back here",
                    client.name()
                );
                let regions = work.lock().ok().and_then(|mut w| w.take());
                let exited =
                    goodbye || process::exited_within(client.process.as_ref(), process::EXIT_WAIT);
                Work::Done(exited.then(|| write_back_all(regions.unwrap_or_default())))
            }
        };
        self.departing.push(Departure {
            client,
            goodbye,
            work,
        });
    }

    /// Departures whose write-back is done: logged, then the client is
    /// answered `Goodbye` or disconnected, and its frames return.
    pub(super) fn finish_departures(&mut self) {
        let mut i = 0;
        while i < self.departing.len() {
            let done = match &self.departing[i].work {
                Work::Thread(h) => h.is_finished(),
                Work::Done(_) => true,
            };
            if !done {
                i += 1;
                continue;
            }
            let d = self.departing.swap_remove(i);
            self.finish(d);
        }
    }

    fn finish(&mut self, d: Departure) {
        let outcomes = match d.work {
            Work::Thread(h) => h.join().unwrap_or_else(|_| {
                log!("{}'s write-back thread panicked", d.client.name());
                Some(Vec::new())
            }),
            Work::Done(o) => o,
        };
        log_outcomes(&d.client, outcomes);
        let id = d.client.id;
        if d.goodbye {
            self.clients.insert(id, d.client);
            let out = self.ask_core(id, Message::Goodbye);
            self.route(out);
        } else {
            drop(d.client);
            self.forget(id);
        }
    }

    /// The daemon stops: every client told (`ShuttingDown`) and closed;
    /// write-backs under way finished (live clients keep their memory and
    /// write back themselves).
    pub(super) fn shutdown(&mut self) {
        log!("stopping: {} clients connected", self.clients.len());
        let out = self.core.shutdown();
        self.route(out);
        self.end_doomed();
        for d in std::mem::take(&mut self.departing) {
            let goodbye = d.goodbye;
            let mut client = match d.work {
                Work::Thread(h) => {
                    log_outcomes(&d.client, h.join().unwrap_or_default());
                    d.client
                }
                Work::Done(_) => d.client,
            };
            if goodbye {
                let now = std::time::Instant::now();
                let _ = client
                    .out
                    .push(client.conn.stream(), &Message::Goodbye, now);
            }
        }
        self.clients.clear();
    }
}

fn log_outcomes(client: &Client, outcomes: Outcomes) {
    match outcomes {
        Some(outcomes) => {
            for (region, outcome) in outcomes {
                log_write_back(client, region, &outcome);
            }
        }
        None => log!(
            "{}: its process still runs after the connection ended: its memory is its own, not written back",
            client.name()
        ),
    }
}

fn write_back_all(
    regions: Vec<(RegionId, RegionFds)>,
) -> Vec<(RegionId, Result<WriteBack, WriteBackError>)> {
    // Each region's descriptors are closed once it is written; the
    // regions share one budget.
    let deadline = std::time::Instant::now() + WRITE_BACK_BUDGET;
    regions
        .into_iter()
        .map(|(region, fds)| (region, write_back(&fds, deadline)))
        .collect()
}

fn log_write_back(client: &Client, region: RegionId, outcome: &Result<WriteBack, WriteBackError>) {
    let name = client.name();
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
                log!("{name}: region {region}: {e}");
            }
        }
        Err(e) => log!("{name}: region {region}: WRITE-BACK FAILED: {e}"),
    }
}
