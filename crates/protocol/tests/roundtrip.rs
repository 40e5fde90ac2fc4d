//! Every valid message survives encoding and decoding, whole or streamed.

mod common;

use common::{message, stream};
use pagepilot_protocol::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn test_every_message_round_trips(m in message()) {
        let bytes = encode(&m).unwrap();
        let frame = decode(&bytes).unwrap();
        prop_assert_eq!(frame.version, VERSION);
        prop_assert_eq!(&frame.message, &m);
        // The header counts the descriptors the message says travel with it.
        prop_assert_eq!(u16::from_le_bytes([bytes[6], bytes[7]]), m.fds());
        prop_assert_eq!(bytes.len(), HEADER_LEN + u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize);
        prop_assert!(bytes.len() <= HEADER_LEN + MAX_BODY as usize);
    }

    #[test]
    fn test_messages_decode_only_from_their_sender(m in message()) {
        let bytes = encode(&m).unwrap();
        for peer in [Peer::Client, Peer::Daemon] {
            let r = decode_from(peer, &bytes);
            if m.kind().sent_by(peer) {
                prop_assert_eq!(r.unwrap().message, m.clone());
            } else {
                let refused = matches!(r, Err(DecodeError::UnexpectedKind { .. }));
                prop_assert!(refused);
            }
        }
    }

    #[test]
    fn test_decoder_fed_byte_by_byte_yields_every_message((msgs, bytes) in stream()) {
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for b in &bytes {
            d.feed(std::slice::from_ref(b));
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f.message);
            }
        }
        prop_assert_eq!(got, msgs);
        prop_assert_eq!(d.pending(), 0);
    }

    #[test]
    fn test_decoder_fed_random_splits_yields_every_message(
        (msgs, bytes) in stream(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for w in cuts.windows(2) {
            d.feed(&bytes[w[0]..w[1]]);
            got.extend(d.by_ref().map(|f| f.unwrap().message));
        }
        prop_assert_eq!(got, msgs);
        prop_assert_eq!(d.pending(), 0);
    }
}

#[test]
fn test_every_kind_and_code_has_a_unique_number() {
    for (i, k) in Kind::ALL.iter().enumerate() {
        assert_eq!(Kind::from_u16(*k as u16), Some(*k));
        assert!(Kind::ALL[..i].iter().all(|o| *o as u16 != *k as u16));
        assert!(k.sent_by(Peer::Client) || k.sent_by(Peer::Daemon), "{k}");
    }
    for c in ErrorCode::ALL {
        assert_eq!(ErrorCode::from_u16(*c as u16), Some(*c));
        assert!(c.errno() > 0);
    }
    assert_eq!(ErrorCode::PinQuota.errno(), 122, "EDQUOT");
}
