//! Helpers shared by the daemon core's tests: a core on a manual clock,
//! clients that join, and lookups in what the core sends.
#![allow(dead_code)]

use pagepilot_daemon::{Config, Core, Credentials, Outgoing};
use pagepilot_frames::ManualClock;
use pagepilot_protocol::{encode, ClientId, ErrorCode, Kind, Message, RegionId, RegisterRegion};

/// Milliseconds in clock nanoseconds.
pub const MS: u64 = 1_000_000;

/// A budget of 1000 frames none of which is reclaimed for the watermark,
/// a 50 ms deadline, any user may hold it all and pin 64 frames.
pub const SHARED_BUDGET: &str = "
[machine]
budget_frames = 1000
partition_burst_frames = 1000
deadline_ms = 50

[default]
frames = 1000
pinned_frames = 64
";

/// A core on `clock` configured by the TOML `config`.
pub fn core<'c>(config: &str, clock: &'c ManualClock) -> Core<&'c ManualClock> {
    Core::new(Config::parse(config).expect("config"), clock).expect("core")
}

/// A process of user `uid` (group `gid`) that connects and says Hello.
pub fn join(core: &mut Core<&ManualClock>, uid: u32, gid: u32) -> ClientId {
    let id = core
        .connect(Credentials {
            pid: 1000 + uid,
            uid,
            gid,
        })
        .unwrap();
    let out = core
        .on_message(
            id,
            Message::Hello {
                versions: vec![1],
                pid: Some(1000 + uid),
            },
        )
        .unwrap();
    assert!(
        matches!(
            out[..],
            [Outgoing {
                message: Message::Welcome { .. },
                ..
            }]
        ),
        "{out:?}"
    );
    id
}

/// A registration with no limit and no reserve.
pub fn region(region: u32, min: u64, budget: u64) -> Message {
    Message::RegisterRegion(RegisterRegion {
        region: RegionId(region),
        min_frames: min,
        budget_frames: budget,
        ..RegisterRegion::default()
    })
}

/// `RequestFrames` of `frames` for region `region`.
pub fn request(region: u32, frames: u64) -> Message {
    Message::RequestFrames {
        region: RegionId(region),
        frames,
    }
}

/// `Pin` of `len` bytes at `offset` of region `region`.
pub fn pin(region: u32, offset: u64, len: u64) -> Message {
    Message::Pin {
        region: RegionId(region),
        offset,
        len,
    }
}

/// `Unpin` of `len` bytes at `offset` of region `region`.
pub fn unpin(region: u32, offset: u64, len: u64) -> Message {
    Message::Unpin {
        region: RegionId(region),
        offset,
        len,
    }
}

/// `ReleaseFrames` of `frames` for region `region`.
pub fn release(region: u32, frames: u64) -> Message {
    Message::ReleaseFrames {
        region: RegionId(region),
        frames,
    }
}

/// Sends `m` from `client`; every message the core returns must encode.
pub fn send(core: &mut Core<&ManualClock>, client: ClientId, m: Message) -> Vec<Outgoing> {
    let out = core.on_message(client, m).unwrap();
    for o in &out {
        encode(&o.message).unwrap_or_else(|e| panic!("{:?} does not encode: {e}", o.message));
    }
    out
}

/// The messages sent to `to`.
pub fn to(out: &[Outgoing], to: ClientId) -> Vec<Message> {
    out.iter()
        .filter(|o| o.to == to)
        .map(|o| o.message.clone())
        .collect()
}

/// The error code of a single `Error` reply, with the request it names.
pub fn refusal(out: &[Outgoing]) -> (ErrorCode, Option<Kind>) {
    match out {
        [Outgoing {
            message: Message::Error(e),
            ..
        }] => (e.code, e.request),
        other => panic!("expected one Error, got {other:?}"),
    }
}

/// `(region, frames)` of the reclaim orders sent to `client`.
pub fn orders(out: &[Outgoing], client: ClientId) -> Vec<(u32, u64)> {
    to(out, client)
        .into_iter()
        .filter_map(|m| match m {
            Message::ReclaimOrder { region, frames, .. } => Some((region.0, frames)),
            _ => None,
        })
        .collect()
}

/// Frames granted in a single `Granted` reply or `Registered`.
pub fn granted(out: &[Outgoing]) -> u64 {
    match &out[0].message {
        Message::Granted { frames, .. } => *frames,
        Message::Registered { granted_frames, .. } => *granted_frames,
        other => panic!("expected a grant, got {other:?}"),
    }
}
