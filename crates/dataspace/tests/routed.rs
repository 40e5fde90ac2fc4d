//! `Routed`: pages of a region made of several dataspaces read and write
//! the dataspace attached at them, and the gaps read zero; a model (one
//! byte per page of the region) predicts every read after random writes.

mod common;

use common::{read, Memory, Page};
use pagepilot_dataspace::{AttachError, Attached, PageStore, Routed, PAGE};
use proptest::prelude::*;

/// Attachments from (gap before, pages, offset into a store of `pages +
/// offset + 2` pages) triples, laid end to end.
fn layout(spec: &[(usize, usize, usize)]) -> (Routed, Vec<Option<u8>>) {
    let mut parts = Vec::new();
    let mut model = Vec::new();
    for (i, &(gap, pages, offset)) in spec.iter().enumerate() {
        model.extend(std::iter::repeat_n(None, gap));
        let tag = 16 * (i as u8 + 1);
        let store = Memory::new(pages + offset + 2, |p| tag.wrapping_add(p as u8));
        let at = model.len();
        model.extend((0..pages).map(|p| Some(tag.wrapping_add((offset + p) as u8))));
        parts.push(Attached {
            at,
            pages,
            offset,
            store: Box::new(store),
        });
    }
    (Routed::new(parts).unwrap(), model)
}

fn write(store: &dyn PageStore, first: usize, n: usize, byte: u8) {
    let buf = vec![Page([byte; PAGE]); n];
    // SAFETY: `buf` is n aligned pages.
    unsafe { store.write(first, n, buf.as_ptr().cast()) }.unwrap();
}

proptest! {
    #[test]
    fn prop_reads_match_the_model_after_random_writes(
        spec in prop::collection::vec((0usize..4, 1usize..6, 0usize..3), 1..6),
        ops in prop::collection::vec((any::<bool>(), 0usize..40, 1usize..8, any::<u8>()), 1..40),
    ) {
        let (routed, mut model) = layout(&spec);
        prop_assert_eq!(routed.pages(), model.len());
        for (is_write, first, n, byte) in ops {
            let first = first % model.len();
            let n = n.min(model.len() - first);
            if is_write {
                write(&routed, first, n, byte);
                for m in model[first..first + n].iter_mut().flatten() {
                    *m = byte;
                }
            } else {
                let (got, bytes) = read(&routed, first, n);
                prop_assert_eq!(got, n);
                for p in 0..n {
                    let want = model[first + p].unwrap_or(0);
                    prop_assert!(bytes[p * PAGE..(p + 1) * PAGE].iter().all(|&b| b == want),
                        "page {} wants {}", first + p, want);
                    prop_assert_eq!(routed.has_data(first + p), model[first + p].is_some());
                }
            }
        }
    }
}

#[test]
fn test_attachments_are_sorted_by_their_place_in_the_region() {
    let parts = vec![
        Attached {
            at: 8,
            pages: 2,
            offset: 0,
            store: Box::new(Memory::new(2, |_| 2)),
        },
        Attached {
            at: 0,
            pages: 4,
            offset: 0,
            store: Box::new(Memory::new(4, |_| 1)),
        },
    ];
    let routed = Routed::new(parts).unwrap();
    assert_eq!(routed.parts()[0].at, 0);
    assert_eq!(routed.pages(), 10);
    assert_eq!(routed.size(), 10 * PAGE as u64);
    assert_eq!(read(&routed, 3, 6).1[5 * PAGE], 2, "page 8 from the second");
}

#[test]
fn test_bad_attachments_are_refused_naming_them() {
    let mem = |pages| Box::new(Memory::new(pages, |_| 0)) as Box<dyn PageStore>;
    let part = |at, pages, offset, store| Attached {
        at,
        pages,
        offset,
        store,
    };
    assert_eq!(Routed::new(vec![]).unwrap_err(), AttachError::Empty);
    assert_eq!(
        Routed::new(vec![part(0, 0, 0, mem(1))]).unwrap_err(),
        AttachError::NoPages { index: 0 }
    );
    assert_eq!(
        Routed::new(vec![part(0, 4, 0, mem(4)), part(3, 1, 0, mem(1))]).unwrap_err(),
        AttachError::Overlap {
            first: 0,
            second: 1,
            page: 3
        }
    );
    assert_eq!(
        Routed::new(vec![part(0, 4, 2, mem(5))]).unwrap_err(),
        AttachError::BeyondDataspace {
            index: 0,
            end: 6,
            pages: 5
        }
    );
}

#[test]
fn test_a_short_dataspace_ends_the_read_where_it_ends() {
    // The second attachment's store shrinks after the region is made (a
    // file truncated while mapped): a read across it stops there.
    let short = Memory::new(4, |_| 9);
    let bytes = short.0.clone();
    let parts = vec![
        Attached {
            at: 0,
            pages: 2,
            offset: 0,
            store: Box::new(Memory::new(2, |_| 1)),
        },
        Attached {
            at: 2,
            pages: 4,
            offset: 0,
            store: Box::new(short),
        },
    ];
    let routed = Routed::new(parts).unwrap();
    bytes.lock().unwrap().truncate(PAGE);
    assert_eq!(
        read(&routed, 0, 6).0,
        3,
        "two pages, then one of the second"
    );
}
