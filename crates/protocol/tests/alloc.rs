//! Allocation is bounded by the bytes received, never by the lengths a peer
//! claims: a counting allocator watches the decoder on adversarial input.
//!
//! One test in this binary, so no other test thread allocates while the
//! counter is armed.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use common::message;
use pagepilot_protocol::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

struct Counting;

static ARMED: AtomicBool = AtomicBool::new(false);
static TOTAL: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn count(size: usize) {
    if ARMED.load(Relaxed) {
        TOTAL.fetch_add(size, Relaxed);
        LARGEST.fetch_max(size, Relaxed);
    }
}

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with the counter armed: (total bytes asked for, largest single
/// allocation).
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    TOTAL.store(0, Relaxed);
    LARGEST.store(0, Relaxed);
    ARMED.store(true, Relaxed);
    let r = f();
    ARMED.store(false, Relaxed);
    (r, TOTAL.load(Relaxed), LARGEST.load(Relaxed))
}

/// A header claiming `len` bytes of body for `kind`, then `body`.
fn frame(kind: u16, len: u32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&MAGIC.to_le_bytes());
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b
}

#[test]
fn test_decoding_allocates_in_proportion_to_the_bytes_received() {
    // The counter counts: a valid Hello allocates its list.
    let hello = encode(&Message::Hello {
        versions: vec![1, 2, 3],
        pid: None,
    })
    .unwrap();
    let (r, total, _) = measure(|| decode(&hello));
    assert!(r.is_ok() && total > 0, "{r:?}, {total}");

    // Lengths that lie: a body of 4 GiB, a body of 64 KiB of which 20
    // bytes come, lists and strings claiming 65535 entries.
    for (bytes, what) in [
        (frame(Kind::Hello as u16, u32::MAX, &[]), "4 GiB body"),
        (
            frame(Kind::StatusReply as u16, MAX_BODY, &[0; 20]),
            "64 KiB body, 20 bytes sent",
        ),
        (
            frame(Kind::Hello as u16, 2, &[0xff, 0xff]),
            "65535 versions",
        ),
        (
            frame(
                Kind::StatusReply as u16,
                19,
                &[
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
                ],
            ),
            "65535 clients",
        ),
        (
            frame(Kind::Error as u16, 7, &[1, 0, 0, 0, 0, 0xff, 0xff]),
            "65535-byte text",
        ),
    ] {
        let (r, total, largest) = measure(|| decode(&bytes));
        assert!(r.is_err(), "{what}: {r:?}");
        assert!(total <= 1024, "{what}: {total} bytes allocated");
        assert!(largest <= 1024, "{what}: {largest} bytes in one allocation");

        let (r, total, _) = measure(|| {
            let mut d = Decoder::new();
            d.feed(&bytes);
            d.next_frame().map(|f| f.is_some())
        });
        assert!(matches!(r, Err(_) | Ok(false)), "{what}: {r:?}");
        assert!(
            total <= 4 * bytes.len() + 1024,
            "{what}: the decoder allocated {total} bytes"
        );
    }

    // Random and mutated input: what decoding allocates stays within a
    // small multiple of the input, and no allocation passes a frame.
    let mut runner = TestRunner::new(Config::with_cases(3000));
    let input = prop_oneof![
        vec(any::<u8>(), 0..300),
        (
            message(),
            vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)
        )
            .prop_map(|(m, sets)| {
                let mut b = encode(&m).unwrap();
                for (i, v) in sets {
                    let i = i.index(b.len());
                    b[i] = v;
                }
                b
            }),
    ];
    runner
        .run(&input, |bytes| {
            let (_, total, largest) = measure(|| decode(&bytes));
            prop_assert!(largest <= HEADER_LEN + MAX_BODY as usize);
            prop_assert!(
                total <= 4 * bytes.len() + 2048,
                "{} bytes for {} of input",
                total,
                bytes.len()
            );
            Ok(())
        })
        .unwrap();
}
