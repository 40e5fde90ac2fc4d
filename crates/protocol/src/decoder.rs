//! Frames from a byte stream, as it arrives.

use crate::codec::{decode_body, Frame, Header};
use crate::error::DecodeError;
use crate::message::Peer;
use crate::HEADER_LEN;

/// A streaming decoder: fed bytes as they arrive from a socket, it yields
/// whole frames; half a frame waits for the rest (timeouts are the
/// caller's).
///
/// A header is checked as soon as its 12 bytes are in, so a length beyond
/// [`MAX_BODY`](crate::MAX_BODY) is refused without waiting for the body.
/// An error inside a body skips that frame and decoding goes on
/// ([`DecodeError::is_recoverable`]); an error in a header leaves the
/// stream out of step, and every later call returns
/// [`DecodeError::Poisoned`].
///
/// Memory: the decoder keeps at most what it was fed and has not yet
/// yielded; a caller that drains [`Decoder::next_frame`] after each
/// [`Decoder::feed`] keeps it below one frame plus one read.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    start: usize,
    from: Option<Peer>,
    refused: Option<Header>,
    poisoned: Option<DecodeError>,
}

impl Decoder {
    /// A decoder that accepts any kind.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// A decoder of what `peer` sends: the daemon decodes
    /// `Decoder::from_peer(Peer::Client)`; kinds `peer` never sends are
    /// [`DecodeError::UnexpectedKind`].
    pub fn from_peer(peer: Peer) -> Decoder {
        Decoder {
            from: Some(peer),
            ..Decoder::default()
        }
    }

    /// Adds bytes received.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.poisoned.is_some() {
            return;
        }
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet yielded as frames: nonzero when the peer
    /// stopped in the middle of a frame.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The header of the frame the last call refused, when the error was
    /// in its body: its kind lets a daemon name the request it refuses
    /// (`Kind::from_u16(h.kind)`). `None` after a frame decoded, or a
    /// header refused.
    pub fn refused(&self) -> Option<Header> {
        self.refused
    }

    /// Whether an error in a header has stopped the stream.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    /// The next whole frame: `Ok(None)` when more bytes are needed,
    /// `Err` for a frame refused (see the type's docs for what follows).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        if let Some(e) = &self.poisoned {
            return Err(DecodeError::Poisoned(Box::new(e.clone())));
        }
        let avail = &self.buf[self.start..];
        let Some(head) = avail.first_chunk::<HEADER_LEN>() else {
            self.compact();
            return Ok(None);
        };
        let header = match Header::parse(head) {
            Ok(h) => h,
            Err(e) => {
                self.refused = None;
                self.poisoned = Some(e.clone());
                self.buf = Vec::new();
                self.start = 0;
                return Err(e);
            }
        };
        let end = header.frame_len();
        if avail.len() < end {
            self.compact();
            return Ok(None);
        }
        let result = decode_body(&header, &avail[HEADER_LEN..end], self.from);
        self.start += end;
        self.refused = result.is_err().then_some(header);
        result.map(Some)
    }

    /// Moves what is left to the front, so the buffer does not grow with
    /// the stream's length.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

impl Iterator for Decoder {
    type Item = Result<Frame, DecodeError>;

    /// [`Decoder::next_frame`], ending where more bytes are needed; a
    /// header error is yielded once, and then the iterator ends for good.
    fn next(&mut self) -> Option<Self::Item> {
        let was_poisoned = self.is_poisoned();
        match self.next_frame() {
            Ok(f) => f.map(Ok),
            Err(_) if was_poisoned => None,
            Err(e) => Some(Err(e)),
        }
    }
}
