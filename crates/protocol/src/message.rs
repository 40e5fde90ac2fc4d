//! The messages, their kinds and the types they carry.

use std::fmt;

/// The two ends of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A process whose regions draw frames from the daemon (an application
    /// kernel, in the Cache Kernel's words).
    Client,
    /// The daemon: the system resource manager.
    Daemon,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Peer::Client => "client",
            Peer::Daemon => "daemon",
        })
    }
}

/// A region, named by the client that maps it (unique within that client).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u32);

/// A client, named by the daemon in its `Welcome`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u32);

/// A holder in the daemon's frame manager (`pagepilot_frames::HolderId`'s
/// number): one per registered region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HolderId(pub u32);

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $sender:expr;)*) => {
        /// A message's kind, as numbered in the frame header.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Kind {
            $($(#[$doc])* $name = $value,)*
        }

        impl Kind {
            /// Every kind, in number order.
            pub const ALL: &'static [Kind] = &[$(Kind::$name,)*];

            /// The kind numbered `n`, if this version defines it.
            pub fn from_u16(n: u16) -> Option<Kind> {
                match n {
                    $($value => Some(Kind::$name),)*
                    _ => None,
                }
            }

            /// Its name, as in the docs.
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$name => stringify!($name),)*
                }
            }

            /// Whether `peer` may send it.
            pub fn sent_by(self, peer: Peer) -> bool {
                let senders: &[Peer] = match self {
                    $(Kind::$name => $sender,)*
                };
                senders.contains(&peer)
            }
        }
    };
}

const C: &[Peer] = &[Peer::Client];
const D: &[Peer] = &[Peer::Daemon];
const BOTH: &[Peer] = &[Peer::Client, Peer::Daemon];

kinds! {
    /// Client → daemon: the versions it speaks.
    Hello = 1, C;
    /// Daemon → client: the version chosen, the client's id and quotas.
    Welcome = 2, D;
    /// Daemon → client: a request refused, or a message not understood.
    Error = 3, D;
    /// Either way: the connection ends (the daemon echoes it once the
    /// client's regions are unloaded).
    Goodbye = 4, BOTH;
    /// Client → daemon: a region becomes a holder of frames.
    RegisterRegion = 16, C;
    /// Daemon → client: the region's holder and the frames granted.
    Registered = 17, D;
    /// Client → daemon: a region leaves (its frames return to the pool).
    UnregisterRegion = 18, C;
    /// Daemon → client: the region is gone, with the frames it returned.
    Unregistered = 19, D;
    /// Client → daemon: frames beyond the minimum (HiPEC's `Request`).
    RequestFrames = 32, C;
    /// Daemon → client: frames granted (possibly fewer, possibly none).
    Granted = 33, D;
    /// Client → daemon: frames given back unasked (HiPEC's `Release`).
    ReleaseFrames = 34, C;
    /// Daemon → client: the release counted, with what the region holds.
    Released = 35, D;
    /// Daemon → client (event): give frames back by a deadline.
    ReclaimOrder = 48, D;
    /// Client → daemon (notification): frames given back after an order.
    Returned = 49, C;
    /// Daemon → client (event): frames taken by force after a deadline.
    Forced = 50, D;
    /// Daemon → client (event): frames given to a region still short of
    /// its minimum as they came free (HiPEC's Allocation, completed late).
    Settled = 51, D;
    /// Client → daemon (notification): a region's fault counts, for status.
    Report = 52, C;
    /// Client → daemon: lock a range of a region (never a victim).
    Pin = 64, C;
    /// Client → daemon: unlock a range.
    Unpin = 65, C;
    /// Daemon → client: a pin or unpin done, with the region's pinned frames.
    Pinned = 66, D;
    /// Client → daemon: what the daemon holds and for whom.
    Status = 80, C;
    /// Daemon → client: the answer to `Status`.
    StatusReply = 81, D;
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $errno:literal;)*) => {
        /// What an [`Message::Error`] reports.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum ErrorCode {
            $($(#[$doc])* $name = $value,)*
        }

        impl ErrorCode {
            /// Every code, in number order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// The code numbered `n`, if this version defines it.
            pub fn from_u16(n: u16) -> Option<ErrorCode> {
                match n {
                    $($value => Some(ErrorCode::$name),)*
                    _ => None,
                }
            }

            /// The Linux errno the client library reports it as (a positive
            /// number; the C API returns it negated).
            pub fn errno(self) -> i32 {
                match self {
                    $(ErrorCode::$name => $errno,)*
                }
            }
        }
    };
}

codes! {
    /// A message that could not be decoded (`EPROTO`).
    Malformed = 1, 71;
    /// No version in common (`EPROTONOSUPPORT`).
    UnsupportedVersion = 2, 93;
    /// A message of a kind not expected now: unknown, from the wrong side,
    /// before `Hello`, or a second `Hello` (`EPROTO`).
    UnexpectedMessage = 3, 71;
    /// Beyond the client's quota of frames, regions or fault rate (`EDQUOT`).
    BeyondQuota = 4, 122;
    /// The region's `minFrame` does not fit beside the other holders'
    /// minimums (`ENOMEM`).
    MinFrameDoesNotFit = 5, 12;
    /// RAPHA's admission control: the processor reserve and fault limit do
    /// not fit (`EBUSY`).
    ReserveDoesNotFit = 6, 16;
    /// No such region registered by this client (`ENOENT`).
    UnknownRegion = 7, 2;
    /// A region id this client already registered (`EEXIST`).
    RegionExists = 8, 17;
    /// Pinning would pass the client's pin quota (`EDQUOT`).
    PinQuota = 9, 122;
    /// A pin or unpin range outside the region, or not pinned (`EINVAL`).
    BadRange = 10, 22;
    /// The file descriptors announced did not arrive, or are not usable
    /// (`EBADF`).
    BadFiles = 11, 9;
    /// The daemon is shutting down (`ESHUTDOWN`).
    ShuttingDown = 12, 108;
    /// The daemon failed on its side (`EIO`).
    Internal = 13, 5;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Which file descriptors come with a `RegisterRegion`, passed alongside
/// the frame (`SCM_RIGHTS`) in this order: memory, backing, dirty.
/// The codec only counts them; the frame header carries the count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegionFiles {
    /// The region's memory file (its memfd).
    pub memory: bool,
    /// The backing file its pages are written back to.
    pub backing: bool,
    /// The memory shared with the daemon that holds the region's dirty
    /// state, so the daemon can write back for a client that died.
    pub dirty: bool,
}

impl RegionFiles {
    pub(crate) const MEMORY: u8 = 1;
    pub(crate) const BACKING: u8 = 2;
    pub(crate) const DIRTY: u8 = 4;

    /// How many descriptors come along.
    pub fn count(self) -> u16 {
        u16::from(self.memory) + u16::from(self.backing) + u16::from(self.dirty)
    }

    pub(crate) fn bits(self) -> u8 {
        (if self.memory { Self::MEMORY } else { 0 })
            | (if self.backing { Self::BACKING } else { 0 })
            | (if self.dirty { Self::DIRTY } else { 0 })
    }

    pub(crate) fn from_bits(b: u8) -> Option<Self> {
        if b & !(Self::MEMORY | Self::BACKING | Self::DIRTY) != 0 {
            return None;
        }
        Some(RegionFiles {
            memory: b & Self::MEMORY != 0,
            backing: b & Self::BACKING != 0,
            dirty: b & Self::DIRTY != 0,
        })
    }
}

/// A client's quotas, from the daemon's configuration for its uid or gid
/// (the Cache Kernel's system resource manager).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Quotas {
    /// Frames its regions may hold together.
    pub frames: u64,
    /// Of those, frames it may pin (at most `frames`).
    pub pinned_frames: u64,
    /// Faults per second its regions' limits may add up to.
    pub fault_rate: u64,
    /// Regions it may register.
    pub regions: u32,
}

/// A region joining the daemon's frame manager as a holder, and RAPHA's
/// rate controller as a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegisterRegion {
    /// The client's name for it.
    pub region: RegionId,
    /// Its guaranteed minimum (`minFrame`).
    pub min_frames: u64,
    /// The most frames it will ask for (at least `min_frames`).
    pub budget_frames: u64,
    /// Faults allowed per period (RAPHA); 0: no limit of its own, and then
    /// `fault_period_us` is 0 too.
    pub fault_limit: u64,
    /// The period of `fault_limit`, microseconds.
    pub fault_period_us: u64,
    /// The processor capacity it reserves, parts per million of one
    /// processor (RAPHA's `pc`, fixed-point).
    pub cpu_reserve_ppm: u32,
    /// The descriptors passed alongside.
    pub files: RegionFiles,
}

/// One region in a [`StatusReply`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegionStatus {
    /// The client's name for it.
    pub region: RegionId,
    /// Its holder in the frame manager.
    pub holder: HolderId,
    /// Its `minFrame`.
    pub min_frames: u64,
    /// Frames it holds.
    pub held_frames: u64,
    /// Of those, frames pinned.
    pub pinned_frames: u64,
    /// Faults per second over the last period.
    pub faults_per_sec: u64,
    /// Faults postponed by RAPHA's limits.
    pub postponed_faults: u64,
    /// Frames given back when asked.
    pub reclaimed_frames: u64,
    /// Frames taken by force after a deadline.
    pub forced_frames: u64,
}

/// One client in a [`StatusReply`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClientStatus {
    /// Its id.
    pub client: ClientId,
    /// Its process (`SO_PEERCRED`).
    pub pid: u32,
    /// Its user (`SO_PEERCRED`).
    pub uid: u32,
    /// Its regions (at most [`MAX_STATUS_REGIONS`](crate::MAX_STATUS_REGIONS)
    /// over all clients of a reply).
    pub regions: Vec<RegionStatus>,
}

/// What the daemon holds and for whom.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct StatusReply {
    /// Frames in the daemon's budget.
    pub total_frames: u64,
    /// Of those, frames free (at most `total_frames`).
    pub free_frames: u64,
    /// Whether clients or regions were left out to keep within the bounds.
    pub truncated: bool,
    /// The clients (at most [`MAX_STATUS_CLIENTS`](crate::MAX_STATUS_CLIENTS)).
    pub clients: Vec<ClientStatus>,
}

/// A request refused or a message not understood.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ErrorReply {
    /// What went wrong.
    pub code: ErrorCode,
    /// The kind of the message refused, when it was understood that far.
    pub request: Option<Kind>,
    /// The region concerned, if any.
    pub region: Option<RegionId>,
    /// For people: at most [`MAX_TEXT`](crate::MAX_TEXT) bytes of UTF-8.
    pub message: String,
}

/// A protocol message.
///
/// Every request a client sends is answered, in order, by exactly one
/// reply: its own, or an `Error` naming the request's kind. `Returned` is
/// a notification (no reply unless refused); `ReclaimOrder` and `Forced`
/// are events the daemon sends at any time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    /// The first message of a client: the versions it speaks. Always framed
    /// in version [`HANDSHAKE_VERSION`](crate::HANDSHAKE_VERSION).
    Hello {
        /// Versions it speaks: 1..=[`MAX_VERSIONS`](crate::MAX_VERSIONS),
        /// strictly increasing, none 0.
        versions: Vec<u16>,
        /// Its process id, for logs (the daemon trusts `SO_PEERCRED`).
        pid: Option<u32>,
    },
    /// The daemon's answer to `Hello`: the version chosen, the client's id
    /// and quotas. Framed in version `HANDSHAKE_VERSION`.
    Welcome {
        /// The version both sides now speak (one of the client's).
        version: u16,
        /// The client's id.
        client: ClientId,
        /// Its quotas.
        quotas: Quotas,
    },
    /// A refusal.
    Error(ErrorReply),
    /// The connection ends.
    Goodbye,
    /// A region joins (carries the descriptors its `files` name).
    RegisterRegion(RegisterRegion),
    /// The region is a holder.
    Registered {
        /// The client's name for it.
        region: RegionId,
        /// Its holder in the frame manager.
        holder: HolderId,
        /// Frames granted now (its minimum, or what is free of it yet).
        granted_frames: u64,
    },
    /// A region leaves: its dirty pages are written back, its frames return
    /// to the pool (dependency-ordered unloading).
    UnregisterRegion {
        /// The region.
        region: RegionId,
    },
    /// The region is gone.
    Unregistered {
        /// The region.
        region: RegionId,
        /// Frames it returned to the pool.
        frames: u64,
    },
    /// Frames asked for beyond the minimum.
    RequestFrames {
        /// The region.
        region: RegionId,
        /// How many (1..=`MAX_FRAMES`).
        frames: u64,
    },
    /// Frames granted.
    Granted {
        /// The region.
        region: RegionId,
        /// How many (0 when none are free).
        frames: u64,
        /// Frames the region holds now, as the daemon counts them: the
        /// client sets its budget to this (messages crossing in flight
        /// converge on the last one).
        held_frames: u64,
    },
    /// Frames given back unasked.
    ReleaseFrames {
        /// The region.
        region: RegionId,
        /// How many (1..=`MAX_FRAMES`).
        frames: u64,
    },
    /// The release counted.
    Released {
        /// The region.
        region: RegionId,
        /// Frames it holds now.
        held_frames: u64,
    },
    /// Give frames back within a deadline, or they are taken by force.
    ReclaimOrder {
        /// The region.
        region: RegionId,
        /// How many (1..=`MAX_FRAMES`).
        frames: u64,
        /// Milliseconds from the order's sending
        /// (1..=[`MAX_DEADLINE_MS`](crate::MAX_DEADLINE_MS)).
        deadline_ms: u32,
    },
    /// Frames given back after an order.
    Returned {
        /// The region.
        region: RegionId,
        /// How many (1..=`MAX_FRAMES`).
        frames: u64,
    },
    /// Frames taken by force: the client's pager must forget those pages.
    Forced {
        /// The region.
        region: RegionId,
        /// How many (1..=`MAX_FRAMES`).
        frames: u64,
        /// Frames the region holds now, as the daemon counts them: the
        /// client sets its budget to this (messages crossing in flight
        /// converge on the last one).
        held_frames: u64,
    },
    /// Frames given to a region short of its minimum as others gave them
    /// back: unasked, unlike `Granted`, which answers a `RequestFrames`.
    Settled {
        /// The region.
        region: RegionId,
        /// How many (1..=`MAX_FRAMES`).
        frames: u64,
        /// Frames the region holds now, as the daemon counts them: the
        /// client sets its budget to this (messages crossing in flight
        /// converge on the last one).
        held_frames: u64,
    },
    /// A region's fault counts since it registered (cumulative), sent now
    /// and then by the client so that `pagepilot status` can show them;
    /// faults themselves never cross the socket.
    Report {
        /// The region.
        region: RegionId,
        /// Faults served (at most `MAX_FAULT_COUNT`).
        faults: u64,
        /// Of those, faults postponed by RAPHA's limits (at most `faults`).
        postponed_faults: u64,
    },
    /// Lock `len` bytes at `offset` of a region: never victims, counted
    /// against the pin quota.
    Pin {
        /// The region.
        region: RegionId,
        /// Bytes from the region's start.
        offset: u64,
        /// Bytes (1..; `offset + len` at most [`MAX_REGION_BYTES`](crate::MAX_REGION_BYTES)).
        len: u64,
    },
    /// Unlock a range pinned before.
    Unpin {
        /// The region.
        region: RegionId,
        /// Bytes from the region's start.
        offset: u64,
        /// Bytes (as for `Pin`).
        len: u64,
    },
    /// A pin or unpin done.
    Pinned {
        /// The region.
        region: RegionId,
        /// The region's pinned frames now.
        pinned_frames: u64,
    },
    /// Ask for the daemon's status.
    Status,
    /// The daemon's status.
    StatusReply(StatusReply),
}

impl Message {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Message::Hello { .. } => Kind::Hello,
            Message::Welcome { .. } => Kind::Welcome,
            Message::Error(_) => Kind::Error,
            Message::Goodbye => Kind::Goodbye,
            Message::RegisterRegion(_) => Kind::RegisterRegion,
            Message::Registered { .. } => Kind::Registered,
            Message::UnregisterRegion { .. } => Kind::UnregisterRegion,
            Message::Unregistered { .. } => Kind::Unregistered,
            Message::RequestFrames { .. } => Kind::RequestFrames,
            Message::Granted { .. } => Kind::Granted,
            Message::ReleaseFrames { .. } => Kind::ReleaseFrames,
            Message::Released { .. } => Kind::Released,
            Message::ReclaimOrder { .. } => Kind::ReclaimOrder,
            Message::Returned { .. } => Kind::Returned,
            Message::Forced { .. } => Kind::Forced,
            Message::Settled { .. } => Kind::Settled,
            Message::Report { .. } => Kind::Report,
            Message::Pin { .. } => Kind::Pin,
            Message::Unpin { .. } => Kind::Unpin,
            Message::Pinned { .. } => Kind::Pinned,
            Message::Status => Kind::Status,
            Message::StatusReply(_) => Kind::StatusReply,
        }
    }

    /// How many file descriptors travel alongside it (`SCM_RIGHTS`); the
    /// frame header carries this count.
    pub fn fds(&self) -> u16 {
        match self {
            Message::RegisterRegion(r) => r.files.count(),
            _ => 0,
        }
    }

    /// A refusal with a text cut to [`MAX_TEXT`](crate::MAX_TEXT) bytes
    /// (at a character boundary), so that it always encodes.
    pub fn error(
        code: ErrorCode,
        request: Option<Kind>,
        region: Option<RegionId>,
        message: &str,
    ) -> Message {
        let mut end = message.len().min(crate::MAX_TEXT);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        Message::Error(ErrorReply {
            code,
            request,
            region,
            message: message[..end].to_owned(),
        })
    }
}
