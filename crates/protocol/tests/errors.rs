//! Each refusal, named: the field, the offset, the error's kind, and what
//! happens to the stream after it.

use pagepilot_protocol::*;

fn header(version: u16, kind: u16, fds: u16, len: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&MAGIC.to_le_bytes());
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&fds.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b
}

fn frame(kind: Kind, body: &[u8]) -> Vec<u8> {
    let mut b = header(VERSION, kind as u16, 0, body.len() as u32);
    b.extend_from_slice(body);
    b
}

fn register() -> RegisterRegion {
    RegisterRegion {
        region: RegionId(7),
        min_frames: 16,
        budget_frames: 64,
        fault_limit: 1000,
        fault_period_us: 100_000,
        cpu_reserve_ppm: 250_000,
        files: RegionFiles {
            memory: true,
            backing: true,
            dirty: false,
        },
    }
}

#[test]
fn test_wire_format_of_a_request_is_fixed() {
    let bytes = encode(&Message::RequestFrames {
        region: RegionId(0x0102_0304),
        frames: 5,
    })
    .unwrap();
    assert_eq!(
        bytes,
        [
            0x70, 0x70, // magic "pp"
            1, 0, // version 1
            32, 0, // RequestFrames
            0, 0, // no descriptors
            12, 0, 0, 0, // body length
            4, 3, 2, 1, // region
            5, 0, 0, 0, 0, 0, 0, 0, // frames
        ]
    );
}

#[test]
fn test_header_counts_the_descriptors_a_registration_carries() {
    let m = Message::RegisterRegion(register());
    assert_eq!(m.fds(), 2);
    let bytes = encode(&m).unwrap();
    assert_eq!(&bytes[6..8], &[2, 0]);
    // A header announcing another count is refused, naming both.
    let mut lie = bytes.clone();
    lie[6] = 3;
    assert_eq!(
        decode(&lie),
        Err(DecodeError::FdCount {
            kind: "RegisterRegion",
            header: 3,
            expected: 2
        })
    );
    lie[6] = 9;
    assert!(matches!(
        decode(&lie),
        Err(DecodeError::OutOfRange {
            field: "header.fds",
            offset: 6,
            ..
        })
    ));
    // Descriptors announced for a message that carries none.
    let mut b = encode(&Message::Status).unwrap();
    b[6] = 1;
    assert!(matches!(
        decode(&b),
        Err(DecodeError::FdCount { expected: 0, .. })
    ));
}

#[test]
fn test_body_beyond_the_maximum_is_refused_from_the_header_alone() {
    let b = header(VERSION, Kind::Hello as u16, 0, MAX_BODY + 1);
    assert_eq!(
        decode(&b),
        Err(DecodeError::BodyTooLong {
            len: MAX_BODY + 1,
            max: MAX_BODY
        })
    );
    // The streaming decoder refuses it with the header's 12 bytes, without
    // waiting for the body, and the stream is over.
    let mut d = Decoder::new();
    d.feed(&b);
    assert!(matches!(
        d.next_frame(),
        Err(DecodeError::BodyTooLong { .. })
    ));
    assert!(d.is_poisoned());
    d.feed(&encode(&Message::Status).unwrap());
    assert!(matches!(d.next_frame(), Err(DecodeError::Poisoned(_))));
}

#[test]
fn test_unsupported_version_is_a_typed_error_the_daemon_can_answer() {
    let b = header(7, Kind::Hello as u16, 0, 0);
    let e = decode(&b).unwrap_err();
    assert_eq!(e, DecodeError::UnsupportedVersion { version: 7 });
    assert_eq!(e.code(), ErrorCode::UnsupportedVersion);
    assert!(!e.is_recoverable());
    assert!(e.to_string().contains("version 7"), "{e}");
}

#[test]
fn test_bad_magic_is_refused() {
    let mut b = encode(&Message::Goodbye).unwrap();
    b[0] = b'G';
    assert!(matches!(decode(&b), Err(DecodeError::BadMagic { .. })));
}

#[test]
fn test_unknown_kind_is_skipped_and_the_stream_goes_on() {
    let mut bytes = header(VERSION, 999, 0, 3);
    bytes.extend_from_slice(b"abc");
    bytes.extend(encode(&Message::Status).unwrap());
    let mut d = Decoder::from_peer(Peer::Client);
    d.feed(&bytes);
    let e = d.next_frame().unwrap_err();
    assert_eq!(e, DecodeError::UnknownKind { kind: 999 });
    assert!(e.is_recoverable());
    assert_eq!(e.code(), ErrorCode::UnexpectedMessage);
    assert_eq!(d.next_frame().unwrap().unwrap().message, Message::Status);
    assert_eq!(d.next_frame(), Ok(None));
}

#[test]
fn test_a_malformed_body_is_skipped_and_the_stream_goes_on() {
    let mut bytes = frame(Kind::RequestFrames, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    bytes.extend(encode(&Message::Goodbye).unwrap());
    let mut d = Decoder::new();
    d.feed(&bytes);
    let e = d.next_frame().unwrap_err();
    assert_eq!(
        e,
        DecodeError::OutOfRange {
            field: "RequestFrames.frames",
            offset: 16,
            value: 0,
            min: 1,
            max: MAX_FRAMES
        }
    );
    // The daemon answers naming the request refused and the field.
    let refused = d.refused().and_then(|h| Kind::from_u16(h.kind));
    assert_eq!(refused, Some(Kind::RequestFrames));
    let Message::Error(reply) = e.reply(refused) else {
        unreachable!()
    };
    assert_eq!(reply.code, ErrorCode::Malformed);
    assert_eq!(reply.request, Some(Kind::RequestFrames));
    assert!(
        reply.message.contains("RequestFrames.frames at offset 16"),
        "{}",
        reply.message
    );
    assert!(encode(&Message::Error(reply)).is_ok());
    assert_eq!(d.next_frame().unwrap().unwrap().message, Message::Goodbye);
    assert_eq!(d.refused(), None);
}

#[test]
fn test_a_message_from_the_wrong_side_is_refused() {
    let b = encode(&Message::Granted {
        region: RegionId(1),
        frames: 1,
        held_frames: 1,
    })
    .unwrap();
    assert_eq!(
        decode_from(Peer::Client, &b),
        Err(DecodeError::UnexpectedKind {
            kind: "Granted",
            from: Peer::Client
        })
    );
    assert!(decode_from(Peer::Daemon, &b).is_ok());
}

#[test]
fn test_half_a_message_waits_for_the_rest() {
    let b = encode(&Message::RegisterRegion(register())).unwrap();
    let mut d = Decoder::new();
    d.feed(&b[..5]);
    assert_eq!(d.next_frame(), Ok(None));
    d.feed(&b[5..b.len() - 1]);
    assert_eq!(d.next_frame(), Ok(None));
    assert_eq!(d.pending(), b.len() - 1);
    d.feed(&b[b.len() - 1..]);
    assert!(d.next_frame().unwrap().is_some());
    assert_eq!(d.pending(), 0);
    // Whole-frame decoding says what is missing.
    assert_eq!(
        decode(&b[..b.len() - 1]),
        Err(DecodeError::Incomplete {
            needed: b.len(),
            available: b.len() - 1
        })
    );
    assert_eq!(
        decode(&b[..3]),
        Err(DecodeError::Incomplete {
            needed: HEADER_LEN,
            available: 3
        })
    );
}

#[test]
fn test_trailing_bytes_are_refused_in_the_body_and_after_the_frame() {
    let mut body = 9u32.to_le_bytes().to_vec();
    body.push(0);
    assert_eq!(
        decode(&frame(Kind::UnregisterRegion, &body)),
        Err(DecodeError::TrailingBytes {
            offset: 16,
            count: 1
        })
    );
    let mut b = encode(&Message::Goodbye).unwrap();
    b.push(0);
    assert_eq!(
        decode(&b),
        Err(DecodeError::TrailingBytes {
            offset: 12,
            count: 1
        })
    );
}

#[test]
fn test_a_truncated_field_names_itself() {
    assert_eq!(
        decode(&frame(Kind::Returned, &[1, 0, 0, 0, 1])),
        Err(DecodeError::Truncated {
            field: "Returned.frames",
            offset: 16,
            needed: 8,
            available: 1
        })
    );
}

#[test]
fn test_registration_bounds_are_checked_field_by_field() {
    let refused = |r: RegisterRegion| encode(&Message::RegisterRegion(r)).unwrap_err();
    let field = |e: EncodeError| match e {
        EncodeError::Invalid(DecodeError::OutOfRange { field, .. }) => field,
        e => panic!("{e}"),
    };
    // A budget below the minimum.
    assert_eq!(
        field(refused(RegisterRegion {
            budget_frames: 15,
            ..register()
        })),
        "RegisterRegion.budget_frames"
    );
    // More than a whole processor.
    assert_eq!(
        field(refused(RegisterRegion {
            cpu_reserve_ppm: PPM + 1,
            ..register()
        })),
        "RegisterRegion.cpu_reserve_ppm"
    );
    // A fault limit with no period, and a period with no limit.
    assert_eq!(
        field(refused(RegisterRegion {
            fault_period_us: 0,
            ..register()
        })),
        "RegisterRegion.fault_period_us"
    );
    assert_eq!(
        field(refused(RegisterRegion {
            fault_limit: 0,
            ..register()
        })),
        "RegisterRegion.fault_period_us"
    );
    assert_eq!(
        field(refused(RegisterRegion {
            min_frames: MAX_FRAMES + 1,
            budget_frames: MAX_FRAMES + 1,
            ..register()
        })),
        "RegisterRegion.min_frames"
    );
    // Unknown descriptor flags.
    let mut b = encode(&Message::RegisterRegion(register())).unwrap();
    let last = b.len() - 1;
    b[last] = 0x08;
    assert!(matches!(
        decode(&b),
        Err(DecodeError::InvalidTag {
            field: "RegisterRegion.files",
            value: 8,
            ..
        })
    ));
}

#[test]
fn test_pin_ranges_must_be_nonempty_and_within_a_region() {
    let pin = |offset, len| {
        encode(&Message::Pin {
            region: RegionId(1),
            offset,
            len,
        })
    };
    assert!(pin(0, 4096).is_ok());
    assert!(pin(MAX_REGION_BYTES - 1, 1).is_ok());
    assert!(pin(0, 0).is_err());
    assert!(pin(MAX_REGION_BYTES - 1, 2).is_err());
    assert!(pin(u64::MAX, 1).is_err(), "no overflow of offset + len");
}

#[test]
fn test_hello_lists_versions_strictly_increasing() {
    let hello = |versions: Vec<u16>| {
        encode(&Message::Hello {
            versions,
            pid: Some(42),
        })
    };
    assert!(hello(vec![1, 2, 5]).is_ok());
    assert!(matches!(
        hello(vec![1, 1]),
        Err(EncodeError::Invalid(DecodeError::Inconsistent {
            field: "Hello.versions",
            offset: 16,
            ..
        }))
    ));
    assert!(hello(vec![]).is_err());
    assert!(hello(vec![0]).is_err());
    assert!(hello((1..=MAX_VERSIONS as u16 + 1).collect()).is_err());
    assert!(encode(&Message::Hello {
        versions: vec![1],
        pid: Some(0)
    })
    .is_err());
}

#[test]
fn test_negotiation_picks_the_highest_common_version() {
    assert_eq!(negotiate(&[1, 2, 3], &[1, 2]), Some(2));
    assert_eq!(negotiate(&[1], SUPPORTED_VERSIONS), Some(VERSION));
    assert_eq!(negotiate(&[4, 5], &[1, 2]), None);
}

#[test]
fn test_error_text_must_be_bounded_utf8() {
    // The constructor cuts at a character boundary within the bound.
    let long = "é".repeat(MAX_TEXT);
    let m = Message::error(
        ErrorCode::PinQuota,
        Some(Kind::Pin),
        Some(RegionId(3)),
        &long,
    );
    let Message::Error(e) = &m else {
        unreachable!()
    };
    assert!(e.message.len() <= MAX_TEXT && e.message.len() >= MAX_TEXT - 1);
    assert_eq!(decode(&encode(&m).unwrap()).unwrap().message, m);
    // Built by hand beyond the bound, it does not encode.
    let too_long = Message::Error(ErrorReply {
        message: "x".repeat(MAX_TEXT + 1),
        ..e.clone()
    });
    assert!(matches!(
        encode(&too_long),
        Err(EncodeError::Invalid(DecodeError::TooLong {
            field: "Error.message",
            ..
        }))
    ));
    // Invalid UTF-8 on the wire.
    let body = [9, 0, 0, 0, 0, 2, 0, 0xc3, 0x28];
    assert_eq!(
        decode(&frame(Kind::Error, &body)),
        Err(DecodeError::InvalidUtf8 {
            field: "Error.message",
            offset: 19
        })
    );
    // An error code this version does not define.
    let body = [99, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        decode(&frame(Kind::Error, &body)),
        Err(DecodeError::InvalidTag {
            field: "Error.code",
            value: 99,
            ..
        })
    ));
}

#[test]
fn test_a_list_longer_than_the_body_is_refused_before_allocating() {
    // 1000 versions claimed, 4 bytes of body left.
    let body = [0xe8, 0x03, 1, 0, 2, 0];
    assert!(matches!(
        decode(&frame(Kind::Hello, &body)),
        Err(DecodeError::TooLong {
            field: "Hello.versions",
            len: 1000,
            max: 2,
            ..
        })
    ));
}

fn status(clients: usize, regions_each: usize) -> Message {
    Message::StatusReply(StatusReply {
        total_frames: MAX_FRAMES,
        free_frames: 0,
        truncated: true,
        clients: (0..clients)
            .map(|c| ClientStatus {
                client: ClientId(c as u32),
                pid: 1,
                uid: 0,
                regions: vec![RegionStatus::default(); regions_each],
            })
            .collect(),
    })
}

#[test]
fn test_the_largest_status_reply_fits_in_a_frame() {
    let biggest = status(MAX_STATUS_CLIENTS, MAX_STATUS_REGIONS / MAX_STATUS_CLIENTS);
    let b = encode(&biggest).unwrap();
    assert!(b.len() <= HEADER_LEN + MAX_BODY as usize);
    assert_eq!(decode(&b).unwrap().message, biggest);
    // One region, or one client, more is refused.
    assert!(matches!(
        encode(&status(1, MAX_STATUS_REGIONS + 1)),
        Err(EncodeError::Invalid(DecodeError::TooLong {
            field: "StatusReply.regions",
            ..
        }))
    ));
    assert!(matches!(
        encode(&status(MAX_STATUS_CLIENTS + 1, 0)),
        Err(EncodeError::Invalid(DecodeError::TooLong {
            field: "StatusReply.clients",
            ..
        }))
    ));
    // Free frames beyond the total.
    let Message::StatusReply(mut s) = status(0, 0) else {
        unreachable!()
    };
    s.total_frames = 10;
    s.free_frames = 11;
    assert!(encode(&Message::StatusReply(s)).is_err());
}

#[test]
fn test_quotas_pin_no_more_than_they_hold() {
    let welcome = |frames, pinned_frames| {
        encode(&Message::Welcome {
            version: VERSION,
            client: ClientId(1),
            quotas: Quotas {
                frames,
                pinned_frames,
                fault_rate: 10_000,
                regions: 16,
            },
        })
    };
    assert!(welcome(100, 100).is_ok());
    assert!(welcome(100, 101).is_err());
}

#[test]
fn test_every_decode_error_maps_to_an_error_code() {
    assert_eq!(
        DecodeError::Truncated {
            field: "x",
            offset: 0,
            needed: 1,
            available: 0
        }
        .code(),
        ErrorCode::Malformed
    );
    assert_eq!(
        DecodeError::UnexpectedKind {
            kind: "Welcome",
            from: Peer::Client
        }
        .code(),
        ErrorCode::UnexpectedMessage
    );
}
