//! Two pages that would evict each other in turn: an MRU-like policy gives
//! up the page it brought in last, which is the page a copy reading from
//! two or four pages in turn needs next (glibc's `memcpy` of large buffers
//! interleaves its loads over pages). The pager keeps the pages the last
//! faults brought in when the faulting page was itself just evicted, so
//! every access completes.

mod common;

use std::time::Duration;

use common::*;
use pagepilot_pager::{Region, PAGE_SIZE};

/// Copies a region four times its budget with `memcpy` (`to_vec`), under
/// MRU, after writing every page so that each is read back from swap.
fn copy_under_mru(pages: usize) -> (Vec<u8>, u64) {
    let len = pages * PAGE_SIZE;
    let region = Region::map_anon(len, len / 4, "mru-live").unwrap();
    for p in 0..pages {
        // SAFETY: inside the region.
        unsafe {
            region
                .as_ptr()
                .add(p * PAGE_SIZE + 3)
                .write_volatile(p as u8)
        };
    }
    // SAFETY: the region is mapped for `len` bytes; nothing writes it now.
    let copy = unsafe { std::slice::from_raw_parts(region.as_ptr(), len) }.to_vec();
    let guarded = region.stats().refaults_guarded;
    println!("{}", region.stats_json());
    region.unmap().unwrap();
    (copy, guarded)
}

#[test]
fn test_memcpy_of_a_region_larger_than_its_budget_completes_under_mru() {
    let name = "test_memcpy_of_a_region_larger_than_its_budget_completes_under_mru";
    let out = in_child_process(name, Duration::from_secs(60), || {
        for round in 0..3 {
            let (copy, guarded) = copy_under_mru(4096);
            let wrong = (0..4096)
                .filter(|&p| copy[p * PAGE_SIZE + 3] != p as u8)
                .count();
            println!("round {round}: {wrong} pages wrong, {guarded} victims replaced");
            assert_eq!(wrong, 0);
        }
    });
    assert!(!out.hung(), "the copy did not complete: {out:?}");
    assert!(out.succeeded(), "{out:?}");
}
