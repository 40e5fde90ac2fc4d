//! Regions up to the address space: an 8 TiB sparse file and an 8 TiB
//! anonymous region under a 16 MiB budget map, take random reads and writes
//! checked against a shadow of the touched bytes, and unmap, with the
//! pager's records of them (`bookkeeping_bytes`) and the process's memory
//! bounded by the budget throughout, not by the region's size.

mod common;

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use common::{Rng, Scratch};
use pagepilot_pager::{Region, PAGE_SIZE};

const TIB: usize = 1 << 40;
const REGION: usize = 8 * TIB;
const BUDGET: usize = 16 << 20;
const TOUCHES: usize = 20_000;

/// The pager's records may hold this much per frame of the budget: a slot
/// for each page held or remembered, and the store's records.
const BOOKKEEPING_PER_FRAME: u64 = 512;

/// Resident memory of this process, bytes (`VmRSS`).
fn vm_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Random one-byte reads and writes over `region`, each read checked against
/// the bytes written so far (`shadow`; zero where nothing was), the pager's
/// records checked against their bound every 1,000 touches.
fn touch_at_random(region: &Region, seed: u64) -> HashMap<usize, u8> {
    let frames = (BUDGET / PAGE_SIZE) as u64;
    let bound = frames * BOOKKEEPING_PER_FRAME;
    let mut shadow = HashMap::new();
    let mut rng = Rng(seed);
    for i in 0..TOUCHES {
        // Half the touches go back to a byte touched before.
        let at = if i % 2 == 1 && !shadow.is_empty() {
            *shadow.keys().nth(rng.below(shadow.len().min(64))).unwrap()
        } else {
            rng.below(REGION / PAGE_SIZE) * PAGE_SIZE + rng.below(PAGE_SIZE)
        };
        // SAFETY: `at` lies inside the region, which outlives this loop.
        let p = unsafe { region.as_ptr().add(at) };
        if rng.below(2) == 0 {
            let v = rng.next() as u8;
            // SAFETY: as above; the region is writable.
            unsafe { p.write_volatile(v) };
            shadow.insert(at, v);
        } else {
            // SAFETY: as above.
            let got = unsafe { p.read_volatile() };
            assert_eq!(got, shadow.get(&at).copied().unwrap_or(0), "byte {at}");
        }
        if i % 1000 == 0 {
            let held = region.stats().bookkeeping_bytes;
            assert!(
                held <= bound,
                "touch {i}: {held} bytes of records > {bound}"
            );
        }
    }
    shadow
}

#[test]
fn test_an_8_tib_sparse_file_region_keeps_every_write_with_records_bounded_by_the_budget() {
    let dir = Scratch::new("terabyte-file");
    let path = dir.file("sparse");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(REGION as u64).unwrap();
    let rss_before = vm_rss();
    let region = Region::map_file(&path, true, BUDGET, "lru").unwrap();
    let shadow = touch_at_random(&region, 13);
    let stats = region.stats();
    let grown = vm_rss().saturating_sub(rss_before);
    assert!(stats.evictions > 0 && stats.writebacks > 0, "{stats:?}");
    // The budget's frames, their records and the region's page tables; not
    // a byte per page of 8 TiB (2 GiB).
    assert!(
        grown < (BUDGET as u64) + (48 << 20),
        "VmRSS grew {grown} bytes"
    );
    region.unmap().unwrap();
    let file = std::fs::File::open(&path).unwrap();
    for (&at, &v) in &shadow {
        let mut b = [0u8];
        file.read_exact_at(&mut b, at as u64).unwrap();
        assert_eq!(b[0], v, "byte {at} of the file");
    }
}

#[test]
fn test_an_8_tib_anonymous_region_keeps_every_write_with_records_bounded_by_the_budget() {
    let rss_before = vm_rss();
    let region = Region::map_anon(REGION, BUDGET, "lru").unwrap();
    let shadow = touch_at_random(&region, 17);
    let stats = region.stats();
    assert!(stats.evictions > 0 && stats.writebacks > 0, "{stats:?}");
    // Every byte written reads back after its page went to swap and came back.
    for (&at, &v) in &shadow {
        // SAFETY: inside the region.
        let got = unsafe { region.as_ptr().add(at).read_volatile() };
        assert_eq!(got, v, "byte {at}");
    }
    let grown = vm_rss().saturating_sub(rss_before);
    assert!(
        grown < (BUDGET as u64) + (48 << 20),
        "VmRSS grew {grown} bytes"
    );
    region.unmap().unwrap();
}
