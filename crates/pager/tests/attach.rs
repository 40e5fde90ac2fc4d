//! Regions made of several dataspaces (SawMill's region map): a file's
//! header from one dataspace and its body from another, faults routed to
//! the dataspace attached at their page, writes written back to it, the
//! process's region map listing each range; attachments that cannot make
//! a region refused with errors naming the attachment.

mod common;

use std::sync::Arc;

use common::*;
use pagepilot_pager::dataspace::{AnonymousManager, DataspaceId, FileManager, Manager};
use pagepilot_pager::{
    region_map, Attachment, Backing, MapError, Region, RegionOptions, PAGE_SIZE,
};

const PAGE: usize = PAGE_SIZE;

fn file_of(path: &std::path::Path, pages: usize, byte: impl Fn(usize) -> u8) {
    let data: Vec<u8> = (0..pages).flat_map(|p| vec![byte(p); PAGE]).collect();
    std::fs::write(path, data).unwrap();
}

fn byte_at(region: &Region, at: usize) -> u8 {
    assert!(at < region.len());
    // SAFETY: inside the region.
    unsafe { region.as_ptr().add(at).read_volatile() }
}

fn file(path: &std::path::Path) -> Attachment {
    Attachment::whole(Arc::new(FileManager), DataspaceId::Path(path.into()))
}

#[test]
fn test_header_and_body_from_two_dataspaces_are_read_and_written_back_to_each() {
    let scratch = Scratch::new("attach-two");
    let (header, body) = (scratch.file("header"), scratch.file("body"));
    file_of(&header, 4, |p| 0xa0 + p as u8);
    file_of(&body, 64, |p| p as u8);
    // Region: page 0 is the header's page 2, pages 1.. the body's 16..64.
    let list = vec![
        file(&header).range(2 * PAGE as u64, PAGE),
        file(&body).at(PAGE).range(16 * PAGE as u64, 48 * PAGE),
    ];
    let opts = RegionOptions::new(Backing::Dataspaces(list), 8 * PAGE, "lru");
    let region = Region::map(opts).unwrap();
    assert_eq!(region.len(), 49 * PAGE);
    assert_eq!(byte_at(&region, 10), 0xa2);
    for p in 1..49 {
        assert_eq!(byte_at(&region, p * PAGE + 7), 15 + p as u8, "page {p}");
    }
    // A write to each, then both pushed out by the budget of 8 frames.
    // SAFETY: inside the region.
    unsafe {
        region.as_ptr().add(100).write_volatile(0x11);
        region.as_ptr().add(30 * PAGE + 100).write_volatile(0x22);
    }
    for p in 1..49 {
        byte_at(&region, p * PAGE);
    }
    assert_eq!(
        byte_at(&region, 100),
        0x11,
        "read back from the header file"
    );
    assert_eq!(
        byte_at(&region, 30 * PAGE + 100),
        0x22,
        "and from the body file"
    );

    let map = region_map();
    let base = region.as_ptr() as usize;
    let ours: Vec<_> = map
        .iter()
        .filter(|m| m.start >= base && m.end <= base + region.len())
        .collect();
    assert_eq!(ours.len(), 2, "{map:?}");
    assert_eq!((ours[0].start - base, ours[0].end - base), (0, PAGE));
    assert_eq!(ours[0].id, DataspaceId::Path(header.clone()));
    assert_eq!(ours[0].offset, 2 * PAGE as u64);
    assert_eq!(
        (ours[1].start - base, ours[1].end - base),
        (PAGE, 49 * PAGE)
    );
    assert_eq!(ours[1].manager, FileManager::NAME);

    region.unmap().unwrap();
    let h = std::fs::read(&header).unwrap();
    let b = std::fs::read(&body).unwrap();
    assert_eq!(h[2 * PAGE + 100], 0x11);
    assert_eq!(b[(16 + 29) * PAGE + 100], 0x22);
    // Nothing else changed: the header's other pages, the body's first 16.
    assert!(h[..2 * PAGE]
        .iter()
        .enumerate()
        .all(|(i, &x)| x == 0xa0 + (i / PAGE) as u8));
    assert!(b[..16 * PAGE]
        .iter()
        .enumerate()
        .all(|(i, &x)| x == (i / PAGE) as u8));
}

#[test]
fn test_pages_between_attachments_read_as_zero_and_writes_there_stay_in_memory() {
    let scratch = Scratch::new("attach-gap");
    let (a, b) = (scratch.file("a"), scratch.file("b"));
    file_of(&a, 2, |_| 1);
    file_of(&b, 2, |_| 2);
    let list = vec![file(&a), file(&b).at(6 * PAGE)];
    let region = Region::map(RegionOptions::new(
        Backing::Dataspaces(list),
        16 * PAGE,
        "lru",
    ))
    .unwrap();
    assert_eq!(region.len(), 8 * PAGE);
    assert_eq!(byte_at(&region, PAGE), 1);
    assert_eq!(byte_at(&region, 3 * PAGE), 0, "a gap");
    assert_eq!(byte_at(&region, 7 * PAGE), 2);
    region.unmap().unwrap();
    assert_eq!(std::fs::metadata(&a).unwrap().len(), 2 * PAGE as u64);
}

#[test]
fn test_anonymous_dataspace_reattached_after_unmap_keeps_its_pages() {
    let scratch = Scratch::new("attach-anon");
    let anon: Arc<dyn Manager> = Arc::new(AnonymousManager::new(scratch.file("")));
    let id = anon.create(None, 32 * PAGE as u64).unwrap();
    let map = |anon: &Arc<dyn Manager>| {
        let list = vec![Attachment::whole(anon.clone(), id.clone())];
        Region::map(RegionOptions::new(
            Backing::Dataspaces(list),
            4 * PAGE,
            "lru",
        ))
        .unwrap()
    };
    let region = map(&anon);
    for p in 0..32 {
        // SAFETY: inside the region.
        unsafe {
            region
                .as_ptr()
                .add(p * PAGE + 3)
                .write_volatile(p as u8 + 9)
        };
    }
    region.unmap().unwrap();
    let region = map(&anon);
    for p in 0..32 {
        assert_eq!(byte_at(&region, p * PAGE + 3), p as u8 + 9, "page {p}");
    }
}

#[test]
fn test_attachments_that_cannot_make_a_region_are_refused_naming_the_attachment() {
    let scratch = Scratch::new("attach-bad");
    let a = scratch.file("a");
    file_of(&a, 4, |_| 1);
    let refused = |list: Vec<Attachment>| match Region::map(RegionOptions::new(
        Backing::Dataspaces(list),
        4 * PAGE,
        "lru",
    )) {
        Ok(_) => panic!("mapped"),
        Err(e) => e,
    };
    let overlap = refused(vec![file(&a), file(&a).at(2 * PAGE)]);
    assert!(
        overlap
            .to_string()
            .contains("attachments 0 and 1 both cover page 2"),
        "{overlap}"
    );
    let unaligned = refused(vec![file(&a).at(100)]);
    assert!(
        unaligned
            .to_string()
            .contains("attachment 0: region offset 100"),
        "{unaligned}"
    );
    let beyond = refused(vec![file(&a).range(2 * PAGE as u64, 4 * PAGE)]);
    assert!(
        matches!(beyond, MapError::Attach { index: 0, .. }),
        "{beyond}"
    );
    let missing = refused(vec![file(&a), file(&scratch.file("nope")).at(4 * PAGE)]);
    assert!(
        missing
            .to_string()
            .starts_with("attachment 1 (file manager)"),
        "{missing}"
    );
    let mixed = refused(vec![file(&a), file(&a).at(4 * PAGE).read_only()]);
    assert!(
        mixed.to_string().contains("read-only and read-write"),
        "{mixed}"
    );
    let none = refused(vec![]);
    assert!(none.to_string().contains("at least one"), "{none}");
}
