//! What the server does with each client: admit it, hand the core its
//! frames (checking a registration's descriptors first), send what the core
//! returns, and end it, writing back its dirty pages before the core
//! returns its frames (dependency order: write back, return, forget).

use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pagepilot_protocol::{ClientId, ErrorCode, Kind, Message, Peer, RegionId};
use pagepilot_transport::{Connection, Received};

use super::connection::{Client, End, Input};
use super::files::{self, RegionFds};
use super::writeback::{write_back, WriteBack, WriteBackError};
use super::{log, Server, ACCEPTS_PER_TURN};
use crate::client::Credentials;
use crate::core::Outgoing;

/// What a write-back thread returns: each region's outcome.
type Outcomes = Vec<(RegionId, Result<WriteBack, WriteBackError>)>;

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
    /// Accepts the connections waiting, refusing those beyond the cap.
    pub(super) fn accept(&mut self) {
        for _ in 0..ACCEPTS_PER_TURN {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    // Out of descriptors or memory: the listener stays
                    // readable, so stop polling it for a while.
                    log!("accept failed: {e}; pausing accepts");
                    self.accept_paused_until = Some(Instant::now() + Duration::from_millis(100));
                    break;
                }
            }
        }
    }

    fn admit(&mut self, stream: UnixStream) {
        if let Err(e) = stream.set_nonblocking(true) {
            log!("a connection could not be made non-blocking: {e}");
            return;
        }
        let conn = Connection::new(stream, Peer::Client);
        let max = self.options.max_clients;
        if self.clients.len() + self.departing.len() >= max {
            let text = format!("the daemon serves at most {max} clients");
            let _ = conn.send(
                &Message::error(ErrorCode::BeyondQuota, None, None, &text),
                &[],
            );
            log!("a connection refused: {text}");
            return;
        }
        let peer = match conn.peer_credentials() {
            Ok(c) => Credentials {
                pid: c.pid,
                uid: c.uid,
                gid: c.gid,
            },
            Err(e) => {
                log!("a connection without credentials: {e}");
                return;
            }
        };
        let id = self.core.connect(peer);
        let client = Client {
            id,
            conn,
            peer,
            partial_since: None,
            regions: Default::default(),
        };
        log!("{} connected (gid {})", client.name(), peer.gid);
        self.clients.insert(id, client);
    }

    /// Reads what a ready client sent and acts on it.
    pub(super) fn serve(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        let (inputs, end) = client.read(Instant::now());
        for input in inputs {
            // A Goodbye, a close or a failed send ends the conversation.
            if !self.clients.contains_key(&id) {
                return;
            }
            match input {
                Input::Refused(reply) => {
                    log!("client {}: refused a frame: {}", id.0, error_text(&reply));
                    self.route(vec![Outgoing::send(id, reply)]);
                }
                Input::Frame(received) => self.on_frame(id, received),
            }
        }
        if let Some(end) = end {
            self.doom(id, end);
        }
    }

    fn on_frame(&mut self, id: ClientId, received: Received) {
        let Received { message, fds } = received;
        match message {
            Message::RegisterRegion(r) => {
                let kept = match files::check(r.files, fds) {
                    Ok(kept) => kept,
                    Err(e) => {
                        log!("client {}: region {}: {e}", id.0, r.region.0);
                        let m = e.to_string();
                        let reply = Message::error(
                            ErrorCode::BadFiles,
                            Some(Kind::RegisterRegion),
                            Some(r.region),
                            &m,
                        );
                        return self.route(vec![Outgoing::send(id, reply)]);
                    }
                };
                let out = self.ask_core(id, Message::RegisterRegion(r));
                let registered = matches!(
                    out.first().map(|o| &o.message),
                    Some(Message::Registered { region, .. }) if *region == r.region
                );
                if let (true, Some(c)) = (registered, self.clients.get_mut(&id)) {
                    c.regions.insert(r.region, kept);
                }
                self.route(out);
            }
            Message::UnregisterRegion { region } => {
                // The client wrote its pages back itself: the descriptors
                // are just closed.
                let out = self.ask_core(id, message);
                if let (Some(Message::Unregistered { .. }), Some(c)) =
                    (out.first().map(|o| &o.message), self.clients.get_mut(&id))
                {
                    c.regions.remove(&region);
                }
                self.route(out);
            }
            Message::Goodbye => {
                let Some(mut client) = self.clients.remove(&id) else {
                    return;
                };
                let regions = client.take_writable_regions();
                if regions.is_empty() {
                    self.clients.insert(id, client);
                    let out = self.ask_core(id, Message::Goodbye);
                    self.route(out);
                } else {
                    self.depart(client, regions, true);
                }
            }
            other => {
                let out = self.ask_core(id, other);
                self.route(out);
            }
        }
    }

    fn ask_core(&mut self, id: ClientId, message: Message) -> Vec<Outgoing> {
        self.core.on_message(id, message).unwrap_or_else(|e| {
            log!("core: {e}");
            Vec::new()
        })
    }

    /// Sends what the core returned: to clients still connected (a client
    /// being written back hears nothing more), closing where told. A send
    /// that fails ends that client only.
    pub(super) fn route(&mut self, out: Vec<Outgoing>) {
        for o in out {
            let Some(client) = self.clients.get(&o.to) else {
                continue;
            };
            let sent = client.conn.send(&o.message, &[]);
            if o.close {
                // The core has forgotten it already (Goodbye, no version in common).
                if let Some(c) = self.clients.remove(&o.to) {
                    log!("{} left ({})", c.name(), o.message.kind());
                }
            } else if let Err(e) = sent {
                let why = format!("a send failed: {e}");
                self.doom(o.to, End { reply: None, why });
            }
        }
    }

    /// Ends a client's connection (it is written back and the core told by
    /// [`Server::end_doomed`]).
    pub(super) fn doom(&mut self, id: ClientId, end: End) {
        if let Some(client) = self.clients.remove(&id) {
            self.doomed.push((client, end));
        }
    }

    /// Clients whose connection ended without `Goodbye`: told why when
    /// they can still hear it, then written back, then disconnected from
    /// the core.
    pub(super) fn end_doomed(&mut self) {
        while let Some((mut client, end)) = self.doomed.pop() {
            if let Some(reply) = &end.reply {
                let _ = client.conn.send(reply, &[]);
            }
            log!("{} gone: {}", client.name(), end.why);
            let regions = client.take_writable_regions();
            if regions.is_empty() {
                self.forget(client.id);
            } else {
                self.depart(client, regions, false);
            }
        }
    }

    /// The core unloads a client (its frames return) and forgets it.
    fn forget(&mut self, id: ClientId) {
        match self.core.disconnect(id) {
            Ok(out) => self.route(out),
            Err(e) => log!("core: {e}"),
        }
    }

    /// Clients whose connection ended for want of a whole frame in time.
    pub(super) fn time_out_partial_frames(&mut self, now: Instant) {
        let timeout = self.options.frame_timeout;
        let late: Vec<(ClientId, usize)> = self
            .clients
            .values()
            .filter(|c| c.partial_since.is_some_and(|s| now >= s + timeout))
            .map(|c| (c.id, c.conn.pending()))
            .collect();
        for (id, pending) in late {
            let why =
                format!("sent {pending} bytes of a frame and not the rest within {timeout:?}");
            let reply = Message::error(ErrorCode::Malformed, None, None, &why);
            self.doom(
                id,
                End {
                    reply: Some(reply),
                    why,
                },
            );
        }
    }

    /// Writes back `regions` on a thread of their own (here, if no thread
    /// can be made); the core hears of the client when it is done.
    fn depart(&mut self, client: Client, regions: Vec<(RegionId, RegionFds)>, goodbye: bool) {
        let work = Arc::new(Mutex::new(Some(regions)));
        let wake = self.wake_tx.clone();
        let theirs = work.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("write-back {}", client.id.0))
            .spawn(move || {
                let regions = theirs.lock().ok().and_then(|mut w| w.take());
                let outcomes = write_back_all(regions.unwrap_or_default());
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
                Work::Done(write_back_all(regions.unwrap_or_default()))
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
                Vec::new()
            }),
            Work::Done(o) => o,
        };
        for (region, outcome) in outcomes {
            log_write_back(&d.client, region, &outcome);
        }
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
            let client = match d.work {
                Work::Thread(h) => {
                    let outcomes = h.join().unwrap_or_default();
                    for (region, outcome) in outcomes {
                        log_write_back(&d.client, region, &outcome);
                    }
                    d.client
                }
                Work::Done(_) => d.client,
            };
            if goodbye {
                let _ = client.conn.send(&Message::Goodbye, &[]);
            }
        }
        self.clients.clear();
    }
}

fn write_back_all(regions: Vec<(RegionId, RegionFds)>) -> Outcomes {
    // Each region's descriptors are closed once it is written.
    regions
        .into_iter()
        .map(|(region, fds)| (region, write_back(&fds)))
        .collect()
}

fn log_write_back(client: &Client, region: RegionId, outcome: &Result<WriteBack, WriteBackError>) {
    let name = client.name();
    let region = region.0;
    match outcome {
        Ok(w) if w.failed == 0 => log!(
            "{name}: region {region}: wrote back {} dirty pages ({} already freed, {} past the file's end)",
            w.written, w.holes, w.beyond_end
        ),
        Ok(w) => {
            log!(
                "{name}: region {region}: WRITE-BACK FAILED for {} dirty pages ({} written)",
                w.failed, w.written
            );
            for e in &w.errors {
                log!("{name}: region {region}: {e}");
            }
        }
        Err(e) => log!("{name}: region {region}: WRITE-BACK FAILED: {e}"),
    }
}

fn error_text(m: &Message) -> &str {
    match m {
        Message::Error(e) => &e.message,
        _ => "",
    }
}
