//! Regions over dataspaces of the stacked managers: a file transferred to
//! the compressed manager hammered through a region whose budget is smaller
//! than the data and a compressed tier smaller still (the file ends equal
//! to the shadow copy, pages went through the tier both ways); a lazy copy
//! of a file hammered and read back through regions while the file stays
//! unchanged byte for byte.

mod common;

use std::sync::Arc;

use common::*;
use pagepilot_pager::dataspace::{
    CompressedManager, DataspaceId, FileManager, LazyCopyManager, Manager,
};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions, PAGE_SIZE};

const PAGE: usize = PAGE_SIZE;

fn region_of(manager: Arc<dyn Manager>, id: &DataspaceId, budget: usize) -> Region {
    let list = vec![Attachment::whole(manager, id.clone())];
    Region::map(RegionOptions::new(Backing::Dataspaces(list), budget, "lru")).unwrap()
}

/// The region's bytes, read through its faults.
fn contents(region: &Region) -> Vec<u8> {
    (0..region.len())
        // SAFETY: inside the region.
        .map(|i| unsafe { region.as_ptr().add(i).read_volatile() })
        .collect()
}

#[test]
fn test_compressed_file_hammered_under_small_budgets_ends_equal_to_the_shadow() {
    let scratch = Scratch::new("stacked-compressed");
    let path = scratch.file("data");
    let len = 4 << 20;
    let data = random_file(&path, len, 0x5eed);
    let shadow = shadow_of(&data);
    let cm = Arc::new(CompressedManager::with_dir(len / 8, &scratch.path));
    let id = FileManager
        .transfer(&DataspaceId::Path(path.clone()), cm.as_ref())
        .unwrap();
    let region = region_of(cm.clone(), &id, len / 4);
    let bad = hammer(region.as_ptr(), len, &shadow, 4, 400_000);
    assert_eq!(
        bad,
        0,
        "reads that disagreed with the shadow: {:?}",
        region.stats()
    );
    region.unmap().unwrap();
    let s = cm.stats(&id).unwrap();
    println!("{s:?}");
    assert!(
        s.evictions_to_lower > 0,
        "the tier overflowed into the file: {s:?}"
    );
    assert!(
        s.reads_from_tier > 0,
        "faults were served from the tier: {s:?}"
    );
    assert!(s.reads_from_lower > 0, "and from the file: {s:?}");
    assert!(
        s.compressed_bytes <= s.budget_bytes && s.dirty_pages == 0,
        "{s:?}"
    );
    let back = std::fs::read(&path).unwrap();
    assert_eq!(back.len(), len);
    assert_eq!(
        diff(&back, &image(&shadow, &data)),
        0,
        "bytes differing from the shadow"
    );
}

#[test]
fn test_lazy_copy_of_file_through_a_region_leaves_the_file_unchanged() {
    let scratch = Scratch::new("stacked-lazy");
    let path = scratch.file("source");
    let pages = 64;
    let data = random_file(&path, pages * PAGE, 0x1a2b);
    let lc = Arc::new(LazyCopyManager::new(&scratch.path));
    let id = lc
        .copy_of(Arc::new(FileManager), &DataspaceId::Path(path.clone()))
        .unwrap();
    let region = region_of(lc.clone(), &id, 8 * PAGE);
    let written = |p: usize| p % 3 == 1;
    for p in (0..pages).filter(|&p| written(p)) {
        for at in [0, 1000, PAGE - 1] {
            // SAFETY: inside the region.
            unsafe {
                region
                    .as_ptr()
                    .add(p * PAGE + at)
                    .write_volatile(p as u8 ^ 0xff)
            };
        }
    }
    let expected: Vec<u8> = (0..pages * PAGE)
        .map(|i| {
            let (p, at) = (i / PAGE, i % PAGE);
            if written(p) && [0, 1000, PAGE - 1].contains(&at) {
                p as u8 ^ 0xff
            } else {
                data[i]
            }
        })
        .collect();
    // Read twice: the budget of 8 pages pushes the written ones out to
    // the copy's overlay between the reads.
    assert_eq!(contents(&region), expected);
    assert_eq!(contents(&region), expected);
    region.unmap().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        data,
        "the source, byte for byte"
    );
    let again = region_of(lc.clone(), &id, 8 * PAGE);
    assert_eq!(
        contents(&again),
        expected,
        "the copy keeps its pages across maps"
    );
    again.unmap().unwrap();
    let s = lc.stats(&id).unwrap();
    assert!(s.reads_own > 0 && s.reads_source > 0, "{s:?}");
}

#[test]
fn test_lazy_copy_hammered_matches_the_shadow_and_the_source_stays_unchanged() {
    let scratch = Scratch::new("stacked-lazy-hammer");
    let path = scratch.file("source");
    let len = 2 << 20;
    let data = random_file(&path, len, 0xc0de);
    let shadow = shadow_of(&data);
    let lc = Arc::new(LazyCopyManager::new(&scratch.path));
    let id = FileManager
        .transfer(&DataspaceId::Path(path.clone()), lc.as_ref())
        .unwrap();
    let region = region_of(lc.clone(), &id, len / 4);
    let bad = hammer(region.as_ptr(), len, &shadow, 4, 200_000);
    assert_eq!(bad, 0, "{:?}", region.stats());
    region.unmap().unwrap();
    let again = region_of(lc.clone(), &id, len / 4);
    assert_eq!(
        diff(&contents(&again), &image(&shadow, &data)),
        0,
        "the copy holds the shadow"
    );
    again.unmap().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        data,
        "the source, byte for byte"
    );
}

#[test]
fn test_lazy_copy_over_a_compressed_file_reads_through_both_layers() {
    let scratch = Scratch::new("stacked-both");
    let path = scratch.file("data");
    let pages = 32;
    let data = random_file(&path, pages * PAGE, 0xb07);
    let cm = Arc::new(CompressedManager::with_dir(4 * PAGE, &scratch.path));
    let on_cm = FileManager
        .transfer(&DataspaceId::Path(path.clone()), cm.as_ref())
        .unwrap();
    let lc = LazyCopyManager::new(&scratch.path);
    let copy = cm.transfer(&on_cm, &lc).unwrap();
    let lc: Arc<dyn Manager> = Arc::new(lc);
    let region = region_of(lc.clone(), &copy, 4 * PAGE);
    // SAFETY: inside the region.
    unsafe {
        region
            .as_ptr()
            .add(5 * PAGE)
            .write_volatile(!data[5 * PAGE])
    };
    let mut expected = data.clone();
    expected[5 * PAGE] = !data[5 * PAGE];
    assert_eq!(contents(&region), expected);
    region.unmap().unwrap();
    let s = cm.stats(&on_cm).unwrap();
    assert_eq!(
        s.pages_written, 0,
        "the copy never writes its source: {s:?}"
    );
    assert!(s.reads_from_lower >= pages as u64, "{s:?}");
    assert_eq!(std::fs::read(&path).unwrap(), data);
}
