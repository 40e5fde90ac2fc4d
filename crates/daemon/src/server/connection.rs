//! One client's connection as the server keeps it: the socket and its
//! decoder, who is at the other end, since when it has been sending half a
//! frame, the frames it sent and the daemon has not handled yet, those the
//! daemon sends it, and the descriptors of its regions.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use pagepilot_policy::chain;
use pagepilot_protocol::{ClientId, ErrorCode, Message, RegionId, MAX_FDS};
use pagepilot_transport::{Connection, ReadOutcome, Received, TransportError};

use super::files::RegionFds;
use super::outbox::{Outbox, HIGH_WATER};
use super::vetting::Vetting;
use crate::client::Credentials;
use crate::AccountId;

/// Reads per wake-up and connection (16 KiB each), so that one client
/// sending without pause cannot starve the others.
const READS_PER_TURN: usize = 4;

/// A connected client.
#[derive(Debug)]
pub(crate) struct Client {
    /// Its id in the core.
    pub id: ClientId,
    /// The socket, non-blocking.
    pub conn: Connection,
    /// Who it is (`SO_PEERCRED`).
    pub peer: Credentials,
    /// Whose quotas it draws on.
    pub account: AccountId,
    /// When it connected (it must say `Hello` in time).
    pub connected_at: Instant,
    /// When it last sent something (a client with no region must not stay
    /// silent for ever).
    pub last_input: Instant,
    /// Whether it said `Hello`.
    pub welcomed: bool,
    /// The registration whose descriptors are being checked: its requests
    /// wait meanwhile.
    pub vetting: Option<Vetting>,
    /// Its process, held (a pidfd) to know when it has exited.
    pub process: Option<std::os::fd::OwnedFd>,
    /// When the unfinished frame it is sending began to arrive.
    pub partial_since: Option<Instant>,
    /// The descriptors of its registered regions.
    pub regions: BTreeMap<RegionId, RegionFds>,
    /// Frames read and not handled yet (waiting while it does not read).
    pub backlog: VecDeque<Input>,
    /// What the daemon sends it.
    pub out: Outbox,
    /// The core has forgotten it (`Goodbye`, no version in common): it is
    /// closed once its outbox is empty.
    pub closing: bool,
}

/// What a turn of reading found, in order.
#[derive(Debug)]
pub(crate) enum Input {
    /// A whole frame with its descriptors.
    Frame(Received),
    /// A frame refused in its body: the error to answer it with (the
    /// client goes on).
    Refused(Message),
}

/// Why a connection ends from the client's side.
#[derive(Debug)]
pub(crate) struct End {
    /// What to tell the client first, when it can still be told.
    pub reply: Option<Message>,
    /// For the log.
    pub why: String,
}

impl Client {
    /// A client just connected.
    pub fn new(
        id: ClientId,
        conn: Connection,
        peer: Credentials,
        account: AccountId,
        now: Instant,
    ) -> Client {
        Client {
            id,
            conn,
            peer,
            account,
            connected_at: now,
            last_input: now,
            welcomed: false,
            vetting: None,
            process: super::process::open(peer.pid),
            partial_since: None,
            regions: BTreeMap::new(),
            backlog: VecDeque::new(),
            out: Outbox::new(now),
            closing: false,
        }
    }

    /// Whether to read more of what it sends: not while it has frames
    /// waiting or leaves its replies unread.
    pub fn wants_input(&self) -> bool {
        self.ready() && self.backlog.is_empty()
    }

    /// Whether a frame of its backlog may be handled now.
    pub fn can_handle(&self) -> bool {
        self.ready() && !self.backlog.is_empty()
    }

    /// Not closing, not waiting for a check, reading its replies.
    fn ready(&self) -> bool {
        !self.closing && self.vetting.is_none() && self.out.queued() <= HIGH_WATER
    }

    /// Reads what the client sent (a few reads at most) and decodes it
    /// into its backlog; returns why the connection ends, if it does. A
    /// frame refused in its body is an input; a header refused (the stream
    /// out of step), descriptors missing or too many, a read error or the
    /// peer closing end it.
    pub fn read(&mut self, now: Instant) -> Option<End> {
        let (inputs, end) = self.read_inputs(now);
        if !inputs.is_empty() {
            self.last_input = now;
        }
        self.backlog.extend(inputs);
        end
    }

    fn read_inputs(&mut self, now: Instant) -> (Vec<Input>, Option<End>) {
        let mut inputs = Vec::new();
        for _ in 0..READS_PER_TURN {
            let outcome = self.conn.read_available();
            if let Some(end) = self.decode(&mut inputs) {
                return (inputs, Some(end));
            }
            match outcome {
                Ok(ReadOutcome::Read(_)) => {}
                Ok(ReadOutcome::WouldBlock) => break,
                Ok(ReadOutcome::Closed) => {
                    let pending = self.conn.pending();
                    let why = match pending {
                        0 => "closed the connection".to_owned(),
                        n => format!("closed the connection {n} bytes into a frame"),
                    };
                    return (inputs, Some(End { reply: None, why }));
                }
                Err(TransportError::TooManyFds) => {
                    let text = "more file descriptors than the frames announce";
                    let reply = Message::error(ErrorCode::BadFiles, None, None, text);
                    let why = format!("sent {text}");
                    return (
                        inputs,
                        Some(End {
                            reply: Some(reply),
                            why,
                        }),
                    );
                }
                Err(e) => {
                    let why = format!("read failed: {}", chain(&e));
                    return (inputs, Some(End { reply: None, why }));
                }
            }
        }
        let (pending, fds) = (self.conn.pending(), self.conn.queued_fds());
        // Descriptors beyond those of the frame under way came with frames
        // that did not announce them: kept, they would pile up until the
        // daemon ran out.
        if fds > usize::from(MAX_FDS) || (pending == 0 && fds > 0) {
            let text = format!("{fds} file descriptors came with frames that do not announce them");
            let reply = Message::error(ErrorCode::BadFiles, None, None, &text);
            return (
                inputs,
                Some(End {
                    reply: Some(reply),
                    why: text,
                }),
            );
        }
        self.partial_since = match pending {
            0 => None,
            _ => self.partial_since.or(Some(now)),
        };
        (inputs, None)
    }

    /// Takes the whole frames decoded so far.
    fn decode(&mut self, inputs: &mut Vec<Input>) -> Option<End> {
        loop {
            match self.conn.next_received() {
                Ok(Some(received)) => inputs.push(Input::Frame(received)),
                Ok(None) => return None,
                Err(TransportError::Decode(e)) if e.is_recoverable() => {
                    inputs.push(Input::Refused(e.reply(self.conn.refused_kind())));
                }
                Err(TransportError::Decode(e)) => {
                    return Some(End {
                        reply: Some(e.reply(None)),
                        why: format!("sent a frame that leaves the stream out of step: {e}"),
                    })
                }
                Err(e @ TransportError::MissingFds { .. }) => {
                    let text = e.to_string();
                    return Some(End {
                        reply: Some(Message::error(ErrorCode::BadFiles, None, None, &text)),
                        why: text,
                    });
                }
                Err(e) => {
                    return Some(End {
                        reply: None,
                        why: format!("decoding failed: {}", chain(&e)),
                    })
                }
            }
        }
    }

    /// Takes the descriptors of the regions the daemon can write back.
    /// The others' are closed off the loop.
    pub fn take_writable_regions(&mut self) -> Vec<(RegionId, RegionFds)> {
        let (writable, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.regions)
            .into_iter()
            .partition(|(_, fds)| fds.can_write_back());
        if !others.is_empty() {
            super::vetting::retire(others);
        }
        writable
    }

    /// For the log: `client 3 (pid 1234, uid 1000)`.
    pub fn name(&self) -> String {
        format!(
            "client {} (pid {}, uid {})",
            self.id.0, self.peer.pid, self.peer.uid
        )
    }
}
