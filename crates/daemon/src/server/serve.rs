//! What the server does with each client: admit it, hand the core its
//! frames (checking a registration's descriptors first), send what the core
//! returns, and end it, writing back its dirty pages before the core
//! returns its frames (dependency order: write back, return, forget;
//! see `departure.rs`).

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use pagepilot_policy::chain;
use pagepilot_protocol::{ClientId, ErrorCode, Kind, Message, Peer};
use pagepilot_transport::{Connection, Received};

use super::connection::{Client, End, Input};
use super::files;
use super::vetting::{retire, Verdict, Vetting};
use super::{log, Server, ACCEPTS_PER_TURN, REQUESTS_PER_TURN};
use crate::client::Credentials;
use crate::core::Outgoing;

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
        let id = match self.core.connect(peer) {
            Ok(id) => id,
            Err(e) => {
                let text = chain(&e).to_string();
                let _ = conn.send(
                    &Message::error(ErrorCode::BeyondQuota, None, None, &text),
                    &[],
                );
                log!("a connection of pid {} refused: {text}", peer.pid);
                return;
            }
        };
        let Some(account) = self.core.account_of(id) else {
            return;
        };
        let client = Client::new(id, conn, peer, account, Instant::now());
        log!("{} connected (gid {})", client.name(), peer.gid);
        self.clients.insert(id, client);
    }

    /// Reads what a ready client sent and handles it. What a client
    /// sent before its connection ended is handled before it is ended.
    pub(super) fn serve(&mut self, id: ClientId) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        match client.read(Instant::now()) {
            None => self.handle_backlog(id, false),
            Some(end) => {
                self.handle_backlog(id, true);
                self.doom(id, end);
            }
        }
    }

    /// Handles the frames a client sent, in order, while it reads its
    /// replies: at most [`REQUESTS_PER_TURN`] (`all`: every one, the
    /// connection ending), so that one client's pipeline delays each other
    /// client by a bounded amount of work.
    pub(super) fn handle_backlog(&mut self, id: ClientId, all: bool) {
        for _ in 0..if all { usize::MAX } else { REQUESTS_PER_TURN } {
            // A Goodbye, a close or a failed send ends the conversation.
            let Some(c) = self.clients.get_mut(&id) else {
                return;
            };
            if !(c.can_handle() || (all && !c.closing)) {
                return;
            }
            let Some(input) = c.backlog.pop_front() else {
                return;
            };
            match input {
                Input::Refused(reply) => {
                    log!("client {}: refused a frame: {}", id.0, error_text(&reply));
                    self.route(vec![Outgoing::send(id, reply)]);
                }
                Input::Frame(received) => self.on_frame(id, received),
            }
        }
    }

    fn on_frame(&mut self, id: ClientId, received: Received) {
        let Received { message, fds } = received;
        match message {
            // Without descriptors there is nothing to check off the loop.
            Message::RegisterRegion(r) if fds.is_empty() => {
                self.register_checked(id, r, files::check(r.files, fds));
            }
            Message::RegisterRegion(r) => self.start_vetting(id, r, fds),
            Message::UnregisterRegion { region } => {
                // The client wrote its pages back itself: the descriptors
                // are just closed (off the loop).
                let out = self.ask_core(id, message);
                if let (Some(Message::Unregistered { .. }), Some(c)) =
                    (out.first().map(|o| &o.message), self.clients.get_mut(&id))
                {
                    retire(c.regions.remove(&region));
                }
                self.route(out);
            }
            Message::Hello { .. } => {
                let out = self.ask_core(id, message);
                let welcomed = matches!(
                    out.first().map(|o| &o.message),
                    Some(Message::Welcome { .. })
                );
                if let (true, Some(c)) = (welcomed, self.clients.get_mut(&id)) {
                    c.welcomed = true;
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

    /// Checks a registration's descriptors on a worker; the client's
    /// requests wait for the verdict ([`Server::finish_vetting`]).
    fn start_vetting(
        &mut self,
        id: ClientId,
        r: pagepilot_protocol::RegisterRegion,
        fds: Vec<std::os::fd::OwnedFd>,
    ) {
        let Some(c) = self.clients.get_mut(&id) else {
            return retire(fds);
        };
        match Vetting::start(r, fds, c.account, &self.in_flight, self.wake_tx.clone()) {
            Ok(v) => c.vetting = Some(v),
            Err(e) => {
                let why = chain(&e).to_string();
                log!("{}: region {}: {why}", c.name(), r.region.0);
                let reply = bad_files(r.region, &why);
                self.route(vec![Outgoing::send(id, reply)]);
            }
        }
    }

    /// Registrations whose descriptor checks are done or late: answered,
    /// and their clients' requests served again.
    pub(super) fn finish_vetting(&mut self, now: Instant) {
        let timeout = self.options.check_timeout;
        let ready: Vec<(ClientId, Verdict)> = self
            .clients
            .values()
            .filter_map(|c| {
                let verdict = c.vetting.as_ref()?.poll(now, timeout);
                (!matches!(verdict, Verdict::Running)).then_some((c.id, verdict))
            })
            .collect();
        for (id, verdict) in ready {
            let Some(v) = self.clients.get_mut(&id).and_then(|c| c.vetting.take()) else {
                continue;
            };
            let checked = match verdict {
                Verdict::Done(checked) => checked,
                Verdict::TimedOut(after) => Err(files::FilesError::TimedOut(after)),
                Verdict::Running => continue,
            };
            self.register_checked(id, v.register, checked);
            self.handle_backlog(id, false);
        }
    }

    /// A registration whose descriptors were checked: refused naming the
    /// descriptor, or handed to the core (and its descriptors kept).
    fn register_checked(
        &mut self,
        id: ClientId,
        r: pagepilot_protocol::RegisterRegion,
        checked: Result<files::RegionFds, files::FilesError>,
    ) {
        let kept = match checked {
            Ok(kept) => kept,
            Err(e) => {
                let text = chain(&e).to_string();
                log!("client {}: region {}: {text}", id.0, r.region.0);
                let reply = bad_files(r.region, &text);
                return self.route(vec![Outgoing::send(id, reply)]);
            }
        };
        let out = self.ask_core(id, Message::RegisterRegion(r));
        let registered = matches!(
            out.first().map(|o| &o.message),
            Some(Message::Registered { region, .. }) if *region == r.region
        );
        match (registered, self.clients.get_mut(&id)) {
            (true, Some(c)) => {
                c.regions.insert(r.region, kept);
            }
            _ => retire(kept),
        }
        self.route(out);
    }

    pub(super) fn ask_core(&mut self, id: ClientId, message: Message) -> Vec<Outgoing> {
        self.core.on_message(id, message).unwrap_or_else(|e| {
            log!("core: {}", chain(&e));
            Vec::new()
        })
    }

    /// Queues what the core returned for clients still connected (a client
    /// being written back hears nothing more), never waiting for one;
    /// closing where told. A client that cannot be sent to ends alone.
    pub(super) fn route(&mut self, out: Vec<Outgoing>) {
        let now = Instant::now();
        for o in out {
            let Some(client) = self.clients.get_mut(&o.to) else {
                continue;
            };
            if client.closing {
                continue;
            }
            let sent = client.out.push(client.conn.stream(), &o.message, now);
            if o.close {
                // The core has forgotten it already (Goodbye, no version
                // in common): closed once what is queued is sent.
                log!("{} leaves ({})", client.name(), o.message.kind());
                client.closing = true;
                client.backlog.clear();
                if sent.is_err() || client.out.queued() == 0 {
                    if let Some(c) = self.clients.remove(&o.to) {
                        retire(c);
                    }
                }
            } else if let Err(e) = sent {
                let why = chain(&e).to_string();
                self.doom(o.to, End { reply: None, why });
            }
        }
    }

    /// Sends what waits for a client whose socket takes more.
    pub(super) fn flush(&mut self, id: ClientId, now: Instant) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        let flushed = client.out.flush(client.conn.stream(), now);
        match (flushed, client.closing) {
            (Ok(()), true) if client.out.queued() == 0 => {
                if let Some(c) = self.clients.remove(&id) {
                    retire(c);
                }
            }
            (Ok(()), _) => {}
            (Err(_), true) => {
                if let Some(c) = self.clients.remove(&id) {
                    retire(c);
                }
            }
            (Err(e), false) => {
                let why = chain(&e).to_string();
                self.doom(id, End { reply: None, why });
            }
        }
    }

    /// Clients that took nothing of what waits for them for
    /// `SEND_TIMEOUT`: ended (closing ones just closed).
    pub(super) fn drop_stalled(&mut self, now: Instant) {
        let stalled: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| c.out.deadline().is_some_and(|d| now >= d))
            .map(|c| c.id)
            .collect();
        for id in stalled {
            let Some(c) = self.clients.get(&id) else {
                continue;
            };
            let why = format!("it has not read {} bytes sent to it", c.out.queued());
            if c.closing {
                if let Some(c) = self.clients.remove(&id) {
                    retire(c);
                }
            } else {
                self.doom(id, End { reply: None, why });
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
    /// they can still hear it, then written back once no process holds
    /// their connection any more (until then they linger: not served,
    /// their frames still theirs), then disconnected from the core.
    pub(super) fn end_doomed(&mut self) {
        while let Some((mut client, end)) = self.doomed.pop() {
            if let Some(reply) = &end.reply {
                // Best effort: it is not waited for.
                let _ = client.out.push(client.conn.stream(), reply, Instant::now());
            }
            log!("{} gone: {}", client.name(), end.why);
            client.vetting = None;
            client.backlog.clear();
            if super::departure::connection_held(&client) {
                // Its readers see the end; the daemon keeps its end, which
                // reports a hang-up once no process holds the other.
                let _ = rustix::net::shutdown(client.conn.stream(), rustix::net::Shutdown::Write);
                log!(
                    "{}: a process still holds its connection: its regions wait until none does",
                    client.name()
                );
                self.lingering.push(client);
            } else {
                self.leave(client);
            }
        }
    }

    /// A client no process holds the connection of: written back, then
    /// forgotten.
    pub(super) fn leave(&mut self, mut client: Client) {
        let regions = client.take_writable_regions();
        if regions.is_empty() {
            self.forget(client.id);
            retire(client);
        } else {
            self.depart(client, regions, false);
        }
    }

    /// Connections that did not say `Hello` in time, and clients with no
    /// region silent for too long: ended. (A client with regions that
    /// stops, `SIGSTOP`, keeps them: its quota bounds what it holds.)
    pub(super) fn time_out_silent(&mut self, now: Instant) {
        let (hello, idle) = (self.options.hello_timeout, self.options.idle_timeout);
        let late: Vec<(ClientId, String)> = self
            .clients
            .values()
            .filter(|c| !c.closing && c.vetting.is_none())
            .filter_map(|c| {
                if !c.welcomed && now >= c.connected_at + hello {
                    Some((c.id, format!("did not say Hello within {hello:?}")))
                } else if c.welcomed && c.regions.is_empty() && now >= c.last_input + idle {
                    Some((
                        c.id,
                        format!("sent nothing for {idle:?} and holds no region"),
                    ))
                } else {
                    None
                }
            })
            .collect();
        for (id, why) in late {
            self.doom_telling(id, why);
        }
    }

    /// Ends a client that broke a rule of time, telling it which.
    fn doom_telling(&mut self, id: ClientId, why: String) {
        let reply = Message::error(ErrorCode::Malformed, None, None, &why);
        self.doom(
            id,
            End {
                reply: Some(reply),
                why,
            },
        );
    }

    /// The core unloads a client (its frames return) and forgets it.
    pub(super) fn forget(&mut self, id: ClientId) {
        match self.core.disconnect(id) {
            Ok(out) => self.route(out),
            Err(e) => log!("core: {}", chain(&e)),
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
            self.doom_telling(id, why);
        }
    }
}

/// The refusal of a registration's descriptors.
fn bad_files(region: pagepilot_protocol::RegionId, why: &str) -> Message {
    Message::error(
        ErrorCode::BadFiles,
        Some(Kind::RegisterRegion),
        Some(region),
        why,
    )
}

fn error_text(m: &Message) -> &str {
    match m {
        Message::Error(e) => &e.message,
        _ => "",
    }
}
