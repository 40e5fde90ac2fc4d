//! The daemon's wire protocol ([`pagepilot_protocol`]) over a Unix stream
//! socket: a [`Connection`] sends whole frames with the file descriptors
//! they announce (`SCM_RIGHTS`), receives frames as they arrive and hands
//! each its descriptors, and names its peer as the kernel reports it
//! (`SO_PEERCRED`). The daemon reads non-blocking from its poll loop
//! ([`Connection::read_available`], [`Connection::next_received`]); a
//! client blocks ([`Connection::receive`]). Sends never wait longer than
//! [`SEND_TIMEOUT`]: a peer that stops reading is dropped, not waited for.
//! A client checks who listens before it sends anything
//! ([`trusted_daemon`]).

mod connection;
mod error;
mod trust;

pub use connection::{Connection, Credentials, ReadOutcome, Received, SEND_TIMEOUT};
pub use error::TransportError;
pub use trust::{trusted_daemon, uid_list, DaemonTrust, Untrusted, DAEMON_UID_ENV};
