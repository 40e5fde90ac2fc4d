//! Bad input: random bytes and mutated valid frames never panic, never hang,
//! and decode to a typed error or to a message that encodes to exactly the
//! bytes given (the encoding is canonical).

mod common;

use common::{message, stream};
use pagepilot_protocol::*;
use proptest::collection::vec;
use proptest::prelude::*;

/// A change to a valid frame.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit.
    Flip(prop::sample::Index, u8),
    /// Overwrite a byte.
    Set(prop::sample::Index, u8),
    /// Keep only a prefix.
    Truncate(prop::sample::Index),
    /// Append bytes.
    Extend(Vec<u8>),
    /// Put another value in the header's body length.
    LieBodyLen(u32),
    /// Put another value in the header's descriptor count.
    LieFds(u16),
    /// Put another value in the header's kind.
    LieKind(u16),
    /// Overwrite two bytes of the body with a length-like value (list and
    /// string lengths are u16).
    LieInBody(prop::sample::Index, u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        prop_oneof![any::<u32>(), 0..=MAX_BODY + 1].prop_map(Mutation::LieBodyLen),
        any::<u16>().prop_map(Mutation::LieFds),
        prop_oneof![any::<u16>(), 0u16..100].prop_map(Mutation::LieKind),
        (
            any::<prop::sample::Index>(),
            prop_oneof![any::<u16>(), 0u16..600]
        )
            .prop_map(|(i, v)| Mutation::LieInBody(i, v)),
    ]
}

fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    let header = bytes.len() >= HEADER_LEN;
    match m {
        Mutation::Flip(i, bit) => {
            let i = i.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Mutation::Set(i, b) => {
            let i = i.index(bytes.len());
            bytes[i] = *b;
        }
        Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len())),
        Mutation::Extend(more) => bytes.extend_from_slice(more),
        Mutation::LieBodyLen(_) | Mutation::LieFds(_) | Mutation::LieKind(_) if !header => {}
        Mutation::LieBodyLen(n) => bytes[8..12].copy_from_slice(&n.to_le_bytes()),
        Mutation::LieFds(n) => bytes[6..8].copy_from_slice(&n.to_le_bytes()),
        Mutation::LieKind(n) => bytes[4..6].copy_from_slice(&n.to_le_bytes()),
        Mutation::LieInBody(i, v) => {
            if bytes.len() >= HEADER_LEN + 2 {
                let i = HEADER_LEN + i.index(bytes.len() - HEADER_LEN - 1);
                bytes[i..i + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// What `decode` must do with any input: a typed error, or a message whose
/// encoding is exactly the input.
fn check_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    match decode(bytes) {
        Ok(frame) => {
            let again = encode(&frame.message).expect("a decoded message encodes");
            prop_assert_eq!(
                again.as_slice(),
                bytes,
                "not canonical: {:?}",
                frame.message
            );
        }
        Err(e) => {
            // Every error renders, and names where it is.
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

/// Feeds `bytes` to a decoder in `chunk`-sized pieces, draining it after
/// each: it must not hang, and must not buffer more than a frame and a
/// chunk.
fn check_stream(bytes: &[u8], chunk: usize) -> Result<(), TestCaseError> {
    let mut d = Decoder::from_peer(Peer::Client);
    let mut steps = 0usize;
    for piece in bytes.chunks(chunk.max(1)) {
        d.feed(piece);
        loop {
            steps += 1;
            prop_assert!(
                steps <= 2 * bytes.len() + 8,
                "decoder does not make progress"
            );
            match d.next_frame() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) if e.is_recoverable() => {}
                Err(_) => {
                    prop_assert!(d.is_poisoned());
                    prop_assert_eq!(d.pending(), 0);
                    let again = matches!(d.next_frame(), Err(DecodeError::Poisoned(_)));
                    prop_assert!(again);
                    return Ok(());
                }
            }
        }
        prop_assert!(d.pending() < HEADER_LEN + MAX_BODY as usize + chunk);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn test_random_bytes_never_panic(bytes in vec(any::<u8>(), 0..200), chunk in 1usize..50) {
        check_decode(&bytes)?;
        check_stream(&bytes, chunk)?;
    }

    #[test]
    fn test_random_bytes_behind_a_valid_header_never_panic(
        kind in prop_oneof![proptest::sample::select(Kind::ALL).prop_map(|k| k as u16), any::<u16>()],
        fds in 0..=MAX_FDS,
        body in vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&MAGIC.to_le_bytes());
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&kind.to_le_bytes());
        bytes.extend_from_slice(&fds.to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&body);
        check_decode(&bytes)?;
        check_stream(&bytes, 7)?;
    }

    #[test]
    fn test_mutated_messages_never_panic(
        m in message(),
        mutations in vec(mutation(), 1..4),
    ) {
        let mut bytes = encode(&m).unwrap();
        for mu in &mutations {
            if bytes.is_empty() {
                break;
            }
            mutate(&mut bytes, mu);
        }
        check_decode(&bytes)?;
        check_stream(&bytes, 13)?;
    }

    #[test]
    fn test_mutated_streams_never_panic_nor_hang(
        (_, mut bytes) in stream(),
        mutations in vec(mutation(), 1..4),
        chunk in 1usize..100,
    ) {
        for mu in &mutations {
            if bytes.len() < HEADER_LEN {
                break;
            }
            mutate(&mut bytes, mu);
        }
        check_stream(&bytes, chunk)?;
    }
}
