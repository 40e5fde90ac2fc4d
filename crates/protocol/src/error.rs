//! Why a frame was refused, and what a refusal means for the stream.

use crate::message::Peer;

/// Why a frame could not be decoded (or, from [`encode`](crate::encode),
/// why a message could not be encoded: the same checks run both ways).
///
/// Offsets are byte offsets from the start of the frame (the header is
/// bytes 0..12); fields are named `Message.field` as in the docs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame does not start with the protocol's magic: not a pagepilot
    /// peer, or a stream out of step.
    #[error("bad magic {found:#06x} at offset 0 (expected {expected:#06x})", expected = crate::MAGIC)]
    BadMagic {
        /// The two bytes found.
        found: u16,
    },
    /// The frame is in a protocol version this side does not speak.
    #[error("unsupported protocol version {version} at offset 2 (supported: {supported:?})", supported = crate::SUPPORTED_VERSIONS)]
    UnsupportedVersion {
        /// The version in the header.
        version: u16,
    },
    /// A message kind this version does not define.
    #[error("unknown message kind {kind} at offset 4")]
    UnknownKind {
        /// The kind in the header.
        kind: u16,
    },
    /// A message of a kind the other side never sends (a client sending a
    /// `Welcome`, a daemon sending a `Pin`).
    #[error("{kind} is not a message a {from} sends")]
    UnexpectedKind {
        /// The kind's name.
        kind: &'static str,
        /// Who sent it.
        from: Peer,
    },
    /// The header announces more file descriptors than the message carries
    /// (or any for a message that carries none).
    #[error(
        "the header announces {header} file descriptors at offset 6, {kind} carries {expected}"
    )]
    FdCount {
        /// The message's kind.
        kind: &'static str,
        /// The count in the header.
        header: u16,
        /// The count the message itself implies.
        expected: u16,
    },
    /// The body length in the header is beyond the maximum; refused before
    /// anything is read or allocated.
    #[error("body of {len} bytes announced at offset 8, the maximum is {max}")]
    BodyTooLong {
        /// The length in the header.
        len: u32,
        /// [`MAX_BODY`](crate::MAX_BODY).
        max: u32,
    },
    /// [`decode`](crate::decode) was given less than a whole frame.
    #[error("incomplete frame: {needed} bytes needed, {available} given")]
    Incomplete {
        /// Bytes the frame needs (header included, as far as known).
        needed: usize,
        /// Bytes given.
        available: usize,
    },
    /// A field runs past the end of the body.
    #[error("{field} at offset {offset}: needs {needed} bytes, the body ends after {available}")]
    Truncated {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left in the body.
        available: usize,
    },
    /// Bytes left over after the message (in the body), or after the frame
    /// (given to [`decode`](crate::decode)).
    #[error("{count} trailing bytes at offset {offset}")]
    TrailingBytes {
        /// Where they start.
        offset: usize,
        /// How many.
        count: usize,
    },
    /// A number outside its bounds.
    #[error("{field} at offset {offset}: {value} is outside {min}..={max}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// The value read.
        value: u64,
        /// The smallest value allowed.
        min: u64,
        /// The largest value allowed.
        max: u64,
    },
    /// A string or list longer than its bound, or than what is left of the
    /// body (checked before anything is allocated).
    #[error("{field} at offset {offset}: length {len}, at most {max} allowed here")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Where its length starts.
        offset: usize,
        /// The length read.
        len: usize,
        /// The bound (the field's, or what the body's remaining bytes can hold).
        max: usize,
    },
    /// A string that is not UTF-8.
    #[error("{field} at offset {offset}: not UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
        /// Where the string's bytes start.
        offset: usize,
    },
    /// A tag (a boolean, an option, a flag set, an error code) with a value
    /// it cannot take.
    #[error("{field} at offset {offset}: invalid value {value}")]
    InvalidTag {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// The value read.
        value: u64,
    },
    /// Fields that are each in bounds but inconsistent together.
    #[error("{field} at offset {offset}: {reason}")]
    Inconsistent {
        /// The field found inconsistent with an earlier one.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The stream was refused earlier for a header it could not trust; a
    /// [`Decoder`](crate::Decoder) repeats that error from then on.
    #[error("stream out of step after an earlier error: {0}")]
    Poisoned(Box<DecodeError>),
}

impl DecodeError {
    /// Whether the stream can go on after this error: errors inside a body
    /// whose header was sound skip just that frame; an error in a header
    /// (magic, version, kind, length) leaves the stream out of step, and the
    /// peer should be answered, if at all, and disconnected.
    pub fn is_recoverable(&self) -> bool {
        !matches!(
            self,
            DecodeError::BadMagic { .. }
                | DecodeError::UnsupportedVersion { .. }
                | DecodeError::BodyTooLong { .. }
                | DecodeError::Poisoned(_)
        )
    }

    /// The `Error` reply a daemon answers this refusal with: its code, the
    /// kind refused when known (see [`Decoder::refused`](crate::Decoder::refused)),
    /// and this error's text, cut to [`MAX_TEXT`](crate::MAX_TEXT).
    pub fn reply(&self, request: Option<crate::Kind>) -> crate::Message {
        crate::Message::error(self.code(), request, None, &self.to_string())
    }

    /// The error code a daemon answers this refusal with.
    pub fn code(&self) -> crate::ErrorCode {
        match self {
            DecodeError::UnsupportedVersion { .. } => crate::ErrorCode::UnsupportedVersion,
            DecodeError::UnknownKind { .. } | DecodeError::UnexpectedKind { .. } => {
                crate::ErrorCode::UnexpectedMessage
            }
            DecodeError::Poisoned(e) => e.code(),
            _ => crate::ErrorCode::Malformed,
        }
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The message breaks a bound of the protocol: the peer would refuse
    /// it. The error is the one the peer's decoder would report.
    #[error("message out of the protocol's bounds")]
    Invalid(#[from] DecodeError),
}
