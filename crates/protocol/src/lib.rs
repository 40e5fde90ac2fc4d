//! The pagepilot daemon's wire protocol, as pure logic: messages encoded to
//! and decoded from bytes, with no sockets and no system calls, so that the
//! daemon, the client library and fuzz tests drive it directly.
//!
//! - Framing: a 12-byte little-endian [`Header`] (magic, version, kind,
//!   file descriptors alongside, body length), then the body. A body longer
//!   than [`MAX_BODY`] is refused from the header, before anything is read
//!   or allocated.
//! - [`encode`] a [`Message`], [`decode`] one frame, or feed a [`Decoder`]
//!   the bytes as they arrive.
//! - Versions: a client's `Hello` lists the versions it speaks, the daemon's
//!   `Welcome` picks one ([`negotiate`]) or an `Error`
//!   ([`ErrorCode::UnsupportedVersion`]) names the problem. The handshake
//!   (`Hello`, `Welcome`, `Error`) is framed in [`HANDSHAKE_VERSION`]
//!   whatever is negotiated.
//! - Bounds on every field ([`MAX_FRAMES`], [`MAX_TEXT`], ...), strings
//!   checked as UTF-8, list lengths checked against their bound and the
//!   bytes left before anything is allocated, trailing bytes refused; every
//!   refusal a [`DecodeError`] naming the field and its offset.
//! - File descriptors (`SCM_RIGHTS`) are the transport's: the header
//!   counts those passed alongside a frame ([`Message::fds`]), the codec
//!   never touches them.
//!
//! The vocabulary is HiPEC's and the Cache Kernel's: regions are *holders*
//! of *frames*; the daemon grants them, *reclaims* them by a deadline, takes
//! them by force (*forced*) when the deadline passes; *pinned* (locked)
//! ranges are never victims. See `docs/protocol.md`.
//!
//! ```
//! use pagepilot_protocol::*;
//!
//! // The client says hello; the daemon, reading what clients send, answers.
//! let hello = encode(&Message::Hello { versions: vec![1], pid: Some(4242) }).unwrap();
//! let mut from_client = Decoder::from_peer(Peer::Client);
//! from_client.feed(&hello[..5]); // half a frame waits
//! assert_eq!(from_client.next_frame(), Ok(None));
//! from_client.feed(&hello[5..]);
//! let Some(Frame { message: Message::Hello { versions, .. }, .. }) = from_client.next_frame().unwrap()
//! else { unreachable!() };
//! let reply = match negotiate(&versions, SUPPORTED_VERSIONS) {
//!     Some(version) => Message::Welcome { version, client: ClientId(1), quotas: Quotas::default() },
//!     None => Message::error(ErrorCode::UnsupportedVersion, Some(Kind::Hello), None, "no common version"),
//! };
//! let bytes = encode(&reply).unwrap();
//! assert_eq!(decode_from(Peer::Daemon, &bytes).unwrap().message, reply);
//! ```

mod codec;
mod decoder;
mod dirty;
mod error;
mod message;
mod wire;

pub use codec::{decode, decode_from, encode, negotiate, Frame, Header};
pub use decoder::Decoder;
pub use dirty::{DirtyMap, DirtyMapError, DIRTY_MAGIC};
pub use error::{DecodeError, EncodeError};
pub use message::{
    ClientId, ClientStatus, ErrorCode, ErrorReply, HolderId, Kind, Message, Peer, Quotas,
    RegionFiles, RegionId, RegionStatus, RegisterRegion, StatusReply,
};

/// The first two bytes of every frame: "pp" (`0x70 0x70`).
pub const MAGIC: u16 = 0x7070;
/// The version this crate speaks.
pub const VERSION: u16 = 1;
/// The version the handshake (`Hello`, `Welcome`, `Error`) is always
/// framed in, whatever the peers go on to speak.
pub const HANDSHAKE_VERSION: u16 = 1;
/// Every version this crate decodes.
pub const SUPPORTED_VERSIONS: &[u16] = &[VERSION];
/// Bytes of a frame header.
pub const HEADER_LEN: usize = 12;
/// The longest body: 64 KiB.
pub const MAX_BODY: u32 = 64 * 1024;
/// The most file descriptors a frame may announce.
pub const MAX_FDS: u16 = 3;
/// The most versions a `Hello` may list.
pub const MAX_VERSIONS: usize = 16;
/// The most frames any count may name: 2^40 (4 PiB of 4 KiB pages).
pub const MAX_FRAMES: u64 = 1 << 40;
/// The end of any byte range in a region: 2^52 bytes.
pub const MAX_REGION_BYTES: u64 = 1 << 52;
/// The most faults a region's limit may allow per period.
pub const MAX_FAULT_LIMIT: u64 = 1 << 32;
/// The most faults a `Report` may count (2^62).
pub const MAX_FAULT_COUNT: u64 = 1 << 62;
/// The longest fault period: one hour, in microseconds.
pub const MAX_FAULT_PERIOD_US: u64 = 3_600_000_000;
/// The largest fault-rate quota, faults per second.
pub const MAX_FAULT_RATE: u64 = 1 << 32;
/// The most regions a quota may allow.
pub const MAX_REGIONS: u32 = 1 << 20;
/// A whole processor in parts per million (the largest reserve).
pub const PPM: u32 = 1_000_000;
/// The longest reclaim deadline: ten minutes, in milliseconds.
pub const MAX_DEADLINE_MS: u32 = 600_000;
/// The longest error text, bytes of UTF-8.
pub const MAX_TEXT: usize = 256;
/// The most clients a status reply lists.
pub const MAX_STATUS_CLIENTS: usize = 256;
/// The most regions a status reply lists, over all its clients.
pub const MAX_STATUS_REGIONS: usize = 512;
