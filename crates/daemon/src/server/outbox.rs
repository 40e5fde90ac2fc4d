//! What the daemon has to send a client and has not yet: frames queued and
//! written without ever blocking the loop. A client that does not read its
//! replies stops being read itself (backpressure); one that takes nothing
//! for [`SEND_TIMEOUT`] is disconnected. Nobody else waits for it.

use std::os::unix::net::UnixStream;
use std::time::Instant;

use pagepilot_protocol::{encode, Message};
use pagepilot_transport::SEND_TIMEOUT;
use rustix::io::Errno;
use rustix::net::{send, SendFlags};

/// Bytes queued beyond which the client's requests wait (it must read
/// its replies first).
pub const HIGH_WATER: usize = 256 * 1024;
/// Bytes queued beyond which the client is dropped (a bound on the
/// daemon's memory: events to a client that never reads).
const MAX_QUEUED: usize = 8 * 1024 * 1024;

/// Why a client's frames cannot be delivered.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The socket refused the bytes.
    #[error("a send failed: {0}")]
    Send(std::io::Error),
    /// The client does not read.
    #[error("it has not read {0} bytes sent to it")]
    Full(usize),
    /// A message beyond the protocol's bounds (a daemon bug).
    #[error("a message could not be encoded")]
    Encode(#[from] pagepilot_protocol::EncodeError),
}

/// Frames for one client, written as its socket takes them.
#[derive(Debug)]
pub struct Outbox {
    bytes: Vec<u8>,
    /// Bytes of `bytes` already sent.
    sent: usize,
    /// When the socket last took bytes (or the outbox was last empty).
    progress: Instant,
}

impl Outbox {
    /// An empty outbox.
    pub fn new(now: Instant) -> Outbox {
        Outbox {
            bytes: Vec::new(),
            sent: 0,
            progress: now,
        }
    }

    /// Bytes waiting.
    pub fn queued(&self) -> usize {
        self.bytes.len() - self.sent
    }

    /// Queues `message` and sends what the socket takes now.
    pub fn push(
        &mut self,
        stream: &UnixStream,
        message: &Message,
        now: Instant,
    ) -> Result<(), OutboxError> {
        if self.queued() == 0 {
            self.progress = now;
        }
        self.bytes.extend_from_slice(&encode(message)?);
        if self.queued() > MAX_QUEUED {
            return Err(OutboxError::Full(self.queued()));
        }
        self.flush(stream, now)
    }

    /// Sends what the socket takes now, never waiting.
    pub fn flush(&mut self, stream: &UnixStream, now: Instant) -> Result<(), OutboxError> {
        while self.sent < self.bytes.len() {
            match send(stream, &self.bytes[self.sent..], SendFlags::NOSIGNAL) {
                Ok(n) => {
                    self.sent += n;
                    self.progress = now;
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break,
                Err(e) => return Err(OutboxError::Send(e.into())),
            }
        }
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
        } else if self.sent > self.bytes.len() / 2 {
            // Keep the buffer from growing with everything ever sent.
            self.bytes.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }

    /// When the client is dropped for not reading, if bytes wait.
    pub fn deadline(&self) -> Option<Instant> {
        (self.queued() > 0).then(|| self.progress + SEND_TIMEOUT)
    }
}
