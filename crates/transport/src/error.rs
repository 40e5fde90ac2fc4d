//! What can go wrong on a connection.

use pagepilot_protocol::{DecodeError, EncodeError, Kind};

/// A connection's failure.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The socket failed. The system's reason is in the message, not in
    /// `source()`: the pager's log of a lost daemon shows this error alone.
    #[error("socket: {0}")]
    Io(std::io::Error),
    /// The peer closed the connection (in the middle of a frame when
    /// `pending` is not 0).
    #[error("the peer closed the connection ({pending} bytes of a frame unread)")]
    Closed {
        /// Bytes of an unfinished frame received before the close.
        pending: usize,
    },
    /// A frame the peer sent does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A message beyond the protocol's bounds was not sent.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A frame announced descriptors that did not come with it.
    #[error("{kind} announced {announced} file descriptors, {arrived} arrived with it")]
    MissingFds {
        /// The frame's kind.
        kind: Kind,
        /// Descriptors its header announced.
        announced: u16,
        /// Descriptors that arrived.
        arrived: usize,
    },
    /// `send` was given a different number of descriptors than the message
    /// announces.
    #[error("{kind} carries {expected} file descriptors, {given} were given")]
    WrongFdCount {
        /// The message's kind.
        kind: Kind,
        /// What the message announces ([`pagepilot_protocol::Message::fds`]).
        expected: u16,
        /// What the caller passed.
        given: usize,
    },
    /// The peer sent more descriptors at once than a frame may carry, or
    /// the kernel truncated them.
    #[error("the peer sent more file descriptors than its frames announce")]
    TooManyFds,
    /// The peer did not take a frame within the send timeout.
    #[error("the peer did not read for {0:?}")]
    SendTimeout(std::time::Duration),
}

// Written out, not derived with `#[from]`, which would also make the
// reason the error's source (see `Io`).
impl From<std::io::Error> for TransportError {
    fn from(e: std::io::Error) -> TransportError {
        TransportError::Io(e)
    }
}
