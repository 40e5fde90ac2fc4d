//! Strategies for arbitrary valid messages, shared by the test binaries.

#![allow(dead_code)]

use pagepilot_protocol::*;
use proptest::collection::vec;
use proptest::prelude::*;

pub fn region() -> impl Strategy<Value = RegionId> {
    any::<u32>().prop_map(RegionId)
}

/// Frames in `min..=MAX_FRAMES`, biased to the edges.
pub fn frames(min: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(min),
        Just(MAX_FRAMES),
        min..=MAX_FRAMES,
        min..=min + 100
    ]
}

fn versions() -> impl Strategy<Value = Vec<u16>> {
    proptest::collection::btree_set(1..=u16::MAX, 1..=MAX_VERSIONS)
        .prop_map(|s| s.into_iter().collect())
}

fn quotas() -> impl Strategy<Value = Quotas> {
    (frames(0), 0..=MAX_FAULT_RATE, 0..=MAX_REGIONS).prop_flat_map(|(f, rate, regions)| {
        (0..=f).prop_map(move |pinned| Quotas {
            frames: f,
            pinned_frames: pinned,
            fault_rate: rate,
            regions,
        })
    })
}

fn files() -> impl Strategy<Value = RegionFiles> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(memory, backing, dirty)| RegionFiles {
        memory,
        backing,
        dirty,
    })
}

fn register() -> impl Strategy<Value = RegisterRegion> {
    (
        region(),
        frames(0),
        prop_oneof![
            Just(None),
            (1..=MAX_FAULT_LIMIT, 1..=MAX_FAULT_PERIOD_US).prop_map(Some)
        ],
        0..=PPM,
        files(),
    )
        .prop_flat_map(|(region, min, rate, ppm, files)| {
            (min.max(1)..=MAX_FRAMES).prop_map(move |budget| {
                let (fault_limit, fault_period_us) = rate.unwrap_or((0, 0));
                RegisterRegion {
                    region,
                    min_frames: min,
                    budget_frames: budget,
                    fault_limit,
                    fault_period_us,
                    cpu_reserve_ppm: ppm,
                    files,
                }
            })
        })
}

fn kind() -> impl Strategy<Value = Kind> {
    proptest::sample::select(Kind::ALL)
}

fn error() -> impl Strategy<Value = ErrorReply> {
    (
        proptest::sample::select(ErrorCode::ALL),
        proptest::option::of(kind()),
        proptest::option::of(region()),
        // Any Unicode, cut to MAX_TEXT bytes at a character boundary.
        ".{0,300}",
    )
        .prop_map(|(code, request, region, text)| {
            match Message::error(code, request, region, &text) {
                Message::Error(e) => e,
                _ => unreachable!(),
            }
        })
}

fn region_status() -> impl Strategy<Value = RegionStatus> {
    (
        region(),
        any::<u32>(),
        frames(0),
        frames(0),
        frames(0),
        any::<[u64; 4]>(),
    )
        .prop_map(|(region, holder, min, held, pinned, c)| RegionStatus {
            region,
            holder: HolderId(holder),
            min_frames: min,
            held_frames: held,
            pinned_frames: pinned,
            faults_per_sec: c[0],
            postponed_faults: c[1],
            reclaimed_frames: c[2],
            forced_frames: c[3],
        })
}

fn status() -> impl Strategy<Value = StatusReply> {
    let client = (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        vec(region_status(), 0..8),
    )
        .prop_map(|(client, pid, uid, regions)| ClientStatus {
            client: ClientId(client),
            pid,
            uid,
            regions,
        });
    (frames(0), any::<bool>(), vec(client, 0..12)).prop_flat_map(|(total, truncated, clients)| {
        (0..=total).prop_map(move |free| StatusReply {
            total_frames: total,
            free_frames: free,
            truncated,
            clients: clients.clone(),
        })
    })
}

fn range() -> impl Strategy<Value = (RegionId, u64, u64)> {
    (region(), 0..MAX_REGION_BYTES).prop_flat_map(|(r, offset)| {
        (1..=MAX_REGION_BYTES - offset).prop_map(move |len| (r, offset, len))
    })
}

/// Any valid message.
pub fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (versions(), proptest::option::of(1..=u32::MAX))
            .prop_map(|(versions, pid)| Message::Hello { versions, pid }),
        (1..=u16::MAX, any::<u32>(), quotas()).prop_map(|(version, c, quotas)| Message::Welcome {
            version,
            client: ClientId(c),
            quotas
        }),
        error().prop_map(Message::Error),
        Just(Message::Goodbye),
        register().prop_map(Message::RegisterRegion),
        (region(), any::<u32>(), frames(0)).prop_map(|(region, h, granted_frames)| {
            Message::Registered {
                region,
                holder: HolderId(h),
                granted_frames,
            }
        }),
        region().prop_map(|region| Message::UnregisterRegion { region }),
        (region(), frames(0)).prop_map(|(region, frames)| Message::Unregistered { region, frames }),
        (region(), frames(1))
            .prop_map(|(region, frames)| Message::RequestFrames { region, frames }),
        (region(), frames(0), frames(0)).prop_map(|(region, frames, held_frames)| {
            Message::Granted {
                region,
                frames,
                held_frames,
            }
        }),
        (region(), frames(1))
            .prop_map(|(region, frames)| Message::ReleaseFrames { region, frames }),
        (region(), frames(0)).prop_map(|(region, held_frames)| Message::Released {
            region,
            held_frames
        }),
        (region(), frames(1), 1..=MAX_DEADLINE_MS).prop_map(|(region, frames, deadline_ms)| {
            Message::ReclaimOrder {
                region,
                frames,
                deadline_ms,
            }
        }),
        (region(), frames(1)).prop_map(|(region, frames)| Message::Returned { region, frames }),
        (region(), frames(1), frames(0)).prop_map(|(region, frames, held_frames)| {
            Message::Forced {
                region,
                frames,
                held_frames,
            }
        }),
        (region(), 0..=MAX_FAULT_COUNT)
            .prop_flat_map(|(region, faults)| (Just(region), Just(faults), 0..=faults))
            .prop_map(|(region, faults, postponed_faults)| Message::Report {
                region,
                faults,
                postponed_faults,
            }),
        (region(), frames(1), frames(0)).prop_map(|(region, frames, held_frames)| {
            Message::Settled {
                region,
                frames,
                held_frames,
            }
        }),
        range().prop_map(|(region, offset, len)| Message::Pin {
            region,
            offset,
            len
        }),
        range().prop_map(|(region, offset, len)| Message::Unpin {
            region,
            offset,
            len
        }),
        (region(), frames(0)).prop_map(|(region, pinned_frames)| Message::Pinned {
            region,
            pinned_frames
        }),
        Just(Message::Status),
        status().prop_map(Message::StatusReply),
    ]
}

/// Several valid messages, encoded back to back.
pub fn stream() -> impl Strategy<Value = (Vec<Message>, Vec<u8>)> {
    vec(message(), 0..8).prop_map(|msgs| {
        let mut bytes = Vec::new();
        for m in &msgs {
            bytes.extend(encode(m).expect("a valid message encodes"));
        }
        (msgs, bytes)
    })
}
