//! Frames: the header, and the body of each message.

use crate::error::{DecodeError, EncodeError};
use crate::message::*;
use crate::wire::{Reader, Writer};
use crate::*;

/// A frame's header, as it arrives: checked for magic, version, length and
/// the number of descriptors, not yet for the kind's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The protocol version the body is in.
    pub version: u16,
    /// The kind's number.
    pub kind: u16,
    /// File descriptors passed alongside the frame.
    pub fds: u16,
    /// Bytes of body after the header.
    pub len: u32,
}

impl Header {
    /// Reads and checks a header: magic, version in
    /// [`SUPPORTED_VERSIONS`], body length at most [`MAX_BODY`], at most
    /// [`MAX_FDS`] descriptors. The kind is checked with the body.
    pub fn parse(bytes: &[u8; HEADER_LEN]) -> Result<Header, DecodeError> {
        let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let magic = u16_at(0);
        if magic != MAGIC {
            return Err(DecodeError::BadMagic { found: magic });
        }
        let version = u16_at(2);
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(DecodeError::UnsupportedVersion { version });
        }
        let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if len > MAX_BODY {
            return Err(DecodeError::BodyTooLong { len, max: MAX_BODY });
        }
        let h = Header {
            version,
            kind: u16_at(4),
            fds: u16_at(6),
            len,
        };
        if h.fds > MAX_FDS {
            return Err(DecodeError::OutOfRange {
                field: "header.fds",
                offset: 6,
                value: h.fds.into(),
                min: 0,
                max: MAX_FDS.into(),
            });
        }
        Ok(h)
    }

    /// The whole frame's length, header included.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.len as usize
    }

    /// Writes the header into `out`, 12 bytes.
    fn write(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        out[2..4].copy_from_slice(&self.version.to_le_bytes());
        out[4..6].copy_from_slice(&self.kind.to_le_bytes());
        out[6..8].copy_from_slice(&self.fds.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
    }
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The version it was framed in.
    pub version: u16,
    /// The message; [`Message::fds`] says how many descriptors came along.
    pub message: Message,
}

/// Encodes `message` as a frame of version [`VERSION`] (the version the
/// handshake and, so far, everything else is framed in).
///
/// The frame is decoded again before it is returned, so that a message the
/// peer would refuse (a field beyond its bound, a text too long) is refused
/// here, with the same error.
pub fn encode(message: &Message) -> Result<Vec<u8>, EncodeError> {
    let mut w = Writer::default();
    w.buf.resize(HEADER_LEN, 0);
    write_body(message, &mut w);
    let body = w.buf.len() - HEADER_LEN;
    let len = u32::try_from(body).unwrap_or(u32::MAX);
    if len > MAX_BODY {
        return Err(DecodeError::BodyTooLong { len, max: MAX_BODY }.into());
    }
    let header = Header {
        version: VERSION,
        kind: message.kind() as u16,
        fds: message.fds(),
        len,
    };
    header.write(&mut w.buf[..HEADER_LEN]);
    decode(&w.buf)?;
    Ok(w.buf)
}

/// Decodes exactly one frame from `bytes`: less is
/// [`DecodeError::Incomplete`], more is [`DecodeError::TrailingBytes`].
/// Accepts messages from either side; see [`decode_from`].
pub fn decode(bytes: &[u8]) -> Result<Frame, DecodeError> {
    decode_inner(bytes, None)
}

/// As [`decode`], and refuses a kind `from` never sends.
pub fn decode_from(from: Peer, bytes: &[u8]) -> Result<Frame, DecodeError> {
    decode_inner(bytes, Some(from))
}

fn decode_inner(bytes: &[u8], from: Option<Peer>) -> Result<Frame, DecodeError> {
    let Some(head) = bytes.first_chunk::<HEADER_LEN>() else {
        return Err(DecodeError::Incomplete {
            needed: HEADER_LEN,
            available: bytes.len(),
        });
    };
    let header = Header::parse(head)?;
    let end = header.frame_len();
    if bytes.len() < end {
        return Err(DecodeError::Incomplete {
            needed: end,
            available: bytes.len(),
        });
    }
    if bytes.len() > end {
        return Err(DecodeError::TrailingBytes {
            offset: end,
            count: bytes.len() - end,
        });
    }
    decode_body(&header, &bytes[HEADER_LEN..], from)
}

/// Decodes a body whose header was parsed.
pub(crate) fn decode_body(
    header: &Header,
    body: &[u8],
    from: Option<Peer>,
) -> Result<Frame, DecodeError> {
    let kind = Kind::from_u16(header.kind).ok_or(DecodeError::UnknownKind { kind: header.kind })?;
    if let Some(peer) = from {
        if !kind.sent_by(peer) {
            return Err(DecodeError::UnexpectedKind {
                kind: kind.name(),
                from: peer,
            });
        }
    }
    let mut r = Reader::new(body, HEADER_LEN);
    let message = read_body(kind, &mut r)?;
    r.finish()?;
    if message.fds() != header.fds {
        return Err(DecodeError::FdCount {
            kind: kind.name(),
            header: header.fds,
            expected: message.fds(),
        });
    }
    Ok(Frame {
        version: header.version,
        message,
    })
}

/// The version both sides speak: the highest of the client's `offered`
/// versions this side `supports`, if any.
pub fn negotiate(offered: &[u16], supported: &[u16]) -> Option<u16> {
    offered
        .iter()
        .copied()
        .filter(|v| supported.contains(v))
        .max()
}

fn write_body(m: &Message, w: &mut Writer) {
    match m {
        Message::Hello { versions, pid } => {
            w.len(versions.len());
            for &v in versions {
                w.u16(v);
            }
            w.opt_u32(*pid);
        }
        Message::Welcome {
            version,
            client,
            quotas,
        } => {
            w.u16(*version);
            w.u32(client.0);
            w.u64(quotas.frames);
            w.u64(quotas.pinned_frames);
            w.u64(quotas.fault_rate);
            w.u32(quotas.regions);
        }
        Message::Error(e) => {
            w.u16(e.code as u16);
            w.u16(e.request.map_or(0, |k| k as u16));
            w.opt_u32(e.region.map(|r| r.0));
            w.str(&e.message);
        }
        Message::Goodbye | Message::Status => {}
        Message::RegisterRegion(r) => {
            w.u32(r.region.0);
            w.u64(r.min_frames);
            w.u64(r.budget_frames);
            w.u64(r.fault_limit);
            w.u64(r.fault_period_us);
            w.u32(r.cpu_reserve_ppm);
            w.u8(r.files.bits());
        }
        Message::Registered {
            region,
            holder,
            granted_frames,
        } => {
            w.u32(region.0);
            w.u32(holder.0);
            w.u64(*granted_frames);
        }
        Message::UnregisterRegion { region } => w.u32(region.0),
        Message::Report {
            region,
            faults,
            postponed_faults,
        } => {
            w.u32(region.0);
            w.u64(*faults);
            w.u64(*postponed_faults);
        }
        Message::Unregistered { region, frames }
        | Message::RequestFrames { region, frames }
        | Message::ReleaseFrames { region, frames }
        | Message::Returned { region, frames }
        | Message::Released {
            region,
            held_frames: frames,
        }
        | Message::Pinned {
            region,
            pinned_frames: frames,
        } => {
            w.u32(region.0);
            w.u64(*frames);
        }
        Message::Granted {
            region,
            frames,
            held_frames,
        }
        | Message::Forced {
            region,
            frames,
            held_frames,
        }
        | Message::Settled {
            region,
            frames,
            held_frames,
        } => {
            w.u32(region.0);
            w.u64(*frames);
            w.u64(*held_frames);
        }
        Message::ReclaimOrder {
            region,
            frames,
            deadline_ms,
        } => {
            w.u32(region.0);
            w.u64(*frames);
            w.u32(*deadline_ms);
        }
        Message::Pin {
            region,
            offset,
            len,
        }
        | Message::Unpin {
            region,
            offset,
            len,
        } => {
            w.u32(region.0);
            w.u64(*offset);
            w.u64(*len);
        }
        Message::StatusReply(s) => {
            w.u64(s.total_frames);
            w.u64(s.free_frames);
            w.bool(s.truncated);
            w.len(s.clients.len());
            for c in &s.clients {
                w.u32(c.client.0);
                w.u32(c.pid);
                w.u32(c.uid);
                w.len(c.regions.len());
                for r in &c.regions {
                    w.u32(r.region.0);
                    w.u32(r.holder.0);
                    for v in [
                        r.min_frames,
                        r.held_frames,
                        r.pinned_frames,
                        r.faults_per_sec,
                        r.postponed_faults,
                        r.reclaimed_frames,
                        r.forced_frames,
                    ] {
                        w.u64(v);
                    }
                }
            }
        }
    }
}

/// Bytes of a [`ClientStatus`] without its regions.
const CLIENT_STATUS_LEN: usize = 4 + 4 + 4 + 2;
/// Bytes of a [`RegionStatus`].
const REGION_STATUS_LEN: usize = 4 + 4 + 7 * 8;

fn region(r: &mut Reader<'_>, field: &'static str) -> Result<RegionId, DecodeError> {
    Ok(RegionId(r.u32(field)?))
}

/// A count of frames, `min..=MAX_FRAMES`.
fn frames(r: &mut Reader<'_>, field: &'static str, min: u64) -> Result<u64, DecodeError> {
    r.u64_in(field, min, MAX_FRAMES)
}

/// A range of a region: `len` at least 1, `offset + len` within
/// [`MAX_REGION_BYTES`].
fn range(
    r: &mut Reader<'_>,
    fields: [&'static str; 3],
) -> Result<(RegionId, u64, u64), DecodeError> {
    let region = region(r, fields[0])?;
    let offset = r.u64_in(fields[1], 0, MAX_REGION_BYTES - 1)?;
    let len = r.u64_in(fields[2], 1, MAX_REGION_BYTES - offset)?;
    Ok((region, offset, len))
}

fn read_body(kind: Kind, r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    Ok(match kind {
        Kind::Hello => {
            let n = r.len("Hello.versions", MAX_VERSIONS, 2)?;
            if n == 0 {
                return Err(DecodeError::OutOfRange {
                    field: "Hello.versions",
                    offset: r.offset() - 2,
                    value: 0,
                    min: 1,
                    max: MAX_VERSIONS as u64,
                });
            }
            let mut versions = Vec::with_capacity(n);
            for _ in 0..n {
                let offset = r.offset();
                let v = r.u16_in("Hello.versions", 1, u16::MAX)?;
                if versions.last().is_some_and(|&last| v <= last) {
                    return Err(DecodeError::Inconsistent {
                        field: "Hello.versions",
                        offset,
                        reason: "versions must be strictly increasing",
                    });
                }
                versions.push(v);
            }
            let offset = r.offset();
            let pid = r.opt_u32("Hello.pid")?;
            if pid == Some(0) {
                return Err(DecodeError::OutOfRange {
                    field: "Hello.pid",
                    offset: offset + 1,
                    value: 0,
                    min: 1,
                    max: u32::MAX.into(),
                });
            }
            Message::Hello { versions, pid }
        }
        Kind::Welcome => {
            let version = r.u16_in("Welcome.version", 1, u16::MAX)?;
            let client = ClientId(r.u32("Welcome.client")?);
            let frames_q = frames(r, "Welcome.quotas.frames", 0)?;
            let pinned = r.u64_in("Welcome.quotas.pinned_frames", 0, frames_q)?;
            let fault_rate = r.u64_in("Welcome.quotas.fault_rate", 0, MAX_FAULT_RATE)?;
            let regions = r.u32_in("Welcome.quotas.regions", 0, MAX_REGIONS)?;
            Message::Welcome {
                version,
                client,
                quotas: Quotas {
                    frames: frames_q,
                    pinned_frames: pinned,
                    fault_rate,
                    regions,
                },
            }
        }
        Kind::Error => {
            let offset = r.offset();
            let code = r.u16("Error.code")?;
            let code = ErrorCode::from_u16(code).ok_or(DecodeError::InvalidTag {
                field: "Error.code",
                offset,
                value: code.into(),
            })?;
            let offset = r.offset();
            let request = match r.u16("Error.request")? {
                0 => None,
                k => Some(Kind::from_u16(k).ok_or(DecodeError::InvalidTag {
                    field: "Error.request",
                    offset,
                    value: k.into(),
                })?),
            };
            let region = r.opt_u32("Error.region")?.map(RegionId);
            let message = r.str("Error.message", MAX_TEXT)?;
            Message::Error(ErrorReply {
                code,
                request,
                region,
                message,
            })
        }
        Kind::Goodbye => Message::Goodbye,
        Kind::Status => Message::Status,
        Kind::RegisterRegion => {
            let region = region(r, "RegisterRegion.region")?;
            let min_frames = frames(r, "RegisterRegion.min_frames", 0)?;
            let budget_frames = r.u64_in(
                "RegisterRegion.budget_frames",
                min_frames.max(1),
                MAX_FRAMES,
            )?;
            let fault_limit = r.u64_in("RegisterRegion.fault_limit", 0, MAX_FAULT_LIMIT)?;
            let fault_period_us = if fault_limit == 0 {
                r.u64_in("RegisterRegion.fault_period_us", 0, 0)?
            } else {
                r.u64_in("RegisterRegion.fault_period_us", 1, MAX_FAULT_PERIOD_US)?
            };
            let cpu_reserve_ppm = r.u32_in("RegisterRegion.cpu_reserve_ppm", 0, PPM)?;
            let offset = r.offset();
            let bits = r.u8("RegisterRegion.files")?;
            let files = RegionFiles::from_bits(bits).ok_or(DecodeError::InvalidTag {
                field: "RegisterRegion.files",
                offset,
                value: bits.into(),
            })?;
            Message::RegisterRegion(RegisterRegion {
                region,
                min_frames,
                budget_frames,
                fault_limit,
                fault_period_us,
                cpu_reserve_ppm,
                files,
            })
        }
        Kind::Registered => Message::Registered {
            region: region(r, "Registered.region")?,
            holder: HolderId(r.u32("Registered.holder")?),
            granted_frames: frames(r, "Registered.granted_frames", 0)?,
        },
        Kind::UnregisterRegion => Message::UnregisterRegion {
            region: region(r, "UnregisterRegion.region")?,
        },
        Kind::Unregistered => Message::Unregistered {
            region: region(r, "Unregistered.region")?,
            frames: frames(r, "Unregistered.frames", 0)?,
        },
        Kind::RequestFrames => Message::RequestFrames {
            region: region(r, "RequestFrames.region")?,
            frames: frames(r, "RequestFrames.frames", 1)?,
        },
        Kind::Granted => Message::Granted {
            region: region(r, "Granted.region")?,
            frames: frames(r, "Granted.frames", 0)?,
            held_frames: frames(r, "Granted.held_frames", 0)?,
        },
        Kind::ReleaseFrames => Message::ReleaseFrames {
            region: region(r, "ReleaseFrames.region")?,
            frames: frames(r, "ReleaseFrames.frames", 1)?,
        },
        Kind::Released => Message::Released {
            region: region(r, "Released.region")?,
            held_frames: frames(r, "Released.held_frames", 0)?,
        },
        Kind::ReclaimOrder => Message::ReclaimOrder {
            region: region(r, "ReclaimOrder.region")?,
            frames: frames(r, "ReclaimOrder.frames", 1)?,
            deadline_ms: r.u32_in("ReclaimOrder.deadline_ms", 1, MAX_DEADLINE_MS)?,
        },
        Kind::Returned => Message::Returned {
            region: region(r, "Returned.region")?,
            frames: frames(r, "Returned.frames", 1)?,
        },
        Kind::Forced => Message::Forced {
            region: region(r, "Forced.region")?,
            frames: frames(r, "Forced.frames", 1)?,
            held_frames: frames(r, "Forced.held_frames", 0)?,
        },
        Kind::Settled => Message::Settled {
            region: region(r, "Settled.region")?,
            frames: frames(r, "Settled.frames", 1)?,
            held_frames: frames(r, "Settled.held_frames", 0)?,
        },
        Kind::Report => {
            let region = region(r, "Report.region")?;
            let faults = r.u64_in("Report.faults", 0, MAX_FAULT_COUNT)?;
            let postponed_faults = r.u64_in("Report.postponed_faults", 0, faults)?;
            Message::Report {
                region,
                faults,
                postponed_faults,
            }
        }
        Kind::Pin => {
            let (region, offset, len) = range(r, ["Pin.region", "Pin.offset", "Pin.len"])?;
            Message::Pin {
                region,
                offset,
                len,
            }
        }
        Kind::Unpin => {
            let (region, offset, len) = range(r, ["Unpin.region", "Unpin.offset", "Unpin.len"])?;
            Message::Unpin {
                region,
                offset,
                len,
            }
        }
        Kind::Pinned => Message::Pinned {
            region: region(r, "Pinned.region")?,
            pinned_frames: frames(r, "Pinned.pinned_frames", 0)?,
        },
        Kind::StatusReply => {
            let total_frames = frames(r, "StatusReply.total_frames", 0)?;
            let free_frames = r.u64_in("StatusReply.free_frames", 0, total_frames)?;
            let truncated = r.bool("StatusReply.truncated")?;
            let n = r.len("StatusReply.clients", MAX_STATUS_CLIENTS, CLIENT_STATUS_LEN)?;
            let mut clients = Vec::with_capacity(n);
            let mut regions_left = MAX_STATUS_REGIONS;
            for _ in 0..n {
                let client = ClientId(r.u32("StatusReply.client")?);
                let pid = r.u32("StatusReply.pid")?;
                let uid = r.u32("StatusReply.uid")?;
                let m = r.len("StatusReply.regions", regions_left, REGION_STATUS_LEN)?;
                regions_left -= m;
                let mut regions = Vec::with_capacity(m);
                for _ in 0..m {
                    regions.push(RegionStatus {
                        region: region(r, "StatusReply.region")?,
                        holder: HolderId(r.u32("StatusReply.holder")?),
                        min_frames: frames(r, "StatusReply.min_frames", 0)?,
                        held_frames: frames(r, "StatusReply.held_frames", 0)?,
                        pinned_frames: frames(r, "StatusReply.pinned_frames", 0)?,
                        faults_per_sec: r.u64("StatusReply.faults_per_sec")?,
                        postponed_faults: r.u64("StatusReply.postponed_faults")?,
                        reclaimed_frames: r.u64("StatusReply.reclaimed_frames")?,
                        forced_frames: r.u64("StatusReply.forced_frames")?,
                    });
                }
                clients.push(ClientStatus {
                    client,
                    pid,
                    uid,
                    regions,
                });
            }
            Message::StatusReply(StatusReply {
                total_frames,
                free_frames,
                truncated,
                clients,
            })
        }
    })
}
