//! Windows read ahead from a file the page cache holds are copied in and
//! mapped by the thread that issues them (`UFFDIO_COPY`), into free frames
//! or after their victims leave: the application reads the file's bytes,
//! whichever thread streams, the budget holds, its writes to such pages are
//! seen and written back, and the faulting thread's service (a signal
//! handler must not allocate the staging buffer) copies nothing in.

mod common;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

const PAGES: usize = 4096;
const LEN: usize = PAGES * PAGE_SIZE;

/// A warm file (just written: the page cache holds it) mapped with the
/// defaults under a budget that holds it all.
fn warm_region(
    d: &Scratch,
    seed: u64,
    writable: bool,
    service: Option<FaultService>,
) -> (Region, Vec<u8>) {
    warm_region_under(d, seed, writable, service, LEN)
}

/// [`warm_region`] under `budget` bytes.
fn warm_region_under(
    d: &Scratch,
    seed: u64,
    writable: bool,
    service: Option<FaultService>,
    budget: usize,
) -> (Region, Vec<u8>) {
    let path = d.file("data");
    let data = random_file(&path, LEN, seed);
    let mut opts = RegionOptions::new(Backing::File { path, writable }, budget, "lru");
    if let Some(service) = service {
        opts = opts.with_fault_service(service);
    }
    (Region::map(opts).unwrap(), data)
}

/// Pages of `region` in `pages` that differ from `data`, read in order.
fn mismatches(region: &Region, data: &[u8], pages: std::ops::Range<usize>) -> usize {
    pages
        .filter(|&p| {
            // SAFETY: inside the region, mapped for LEN bytes.
            let got = unsafe {
                std::slice::from_raw_parts(region.as_ptr().add(p * PAGE_SIZE), PAGE_SIZE)
            };
            got != &data[p * PAGE_SIZE..(p + 1) * PAGE_SIZE]
        })
        .count()
}

#[test]
fn test_warm_windows_are_copied_in_and_read_right_by_one_and_two_streams() {
    for threads in [1, 2] {
        let d = Scratch::new("copy-in-read");
        let (region, data) = warm_region(&d, 90 + threads as u64, false, None);
        let part = PAGES / threads;
        let bad: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (region, data) = (&region, &data);
                    s.spawn(move || mismatches(region, data, t * part..(t + 1) * part))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let s = region.stats();
        println!("{threads} thread(s): {}", region.stats_json());
        assert_eq!(bad, 0, "{threads} thread(s): pages not the file's");
        // Every window read ahead was in free frames and cached.
        assert!(
            s.copied_in_pages > 0 && s.copied_in_pages <= s.readahead_pages,
            "{threads} thread(s): {s:?}"
        );
        assert!(
            s.copied_in_pages >= PAGES as u64 / 2,
            "{threads} thread(s): {s:?}"
        );
        assert_eq!(s.missing_faults, PAGES as u64, "each page brought in once");
        region.unmap().unwrap();
    }
}

#[test]
fn test_warm_windows_under_a_quarter_budget_are_copied_in_after_their_victims_leave() {
    let d = Scratch::new("copy-in-budget");
    let (region, data) = warm_region_under(&d, 95, false, None, LEN / 4);
    for pass in 0..2 {
        assert_eq!(mismatches(&region, &data, 0..PAGES), 0, "pass {pass}");
    }
    let s = region.stats();
    println!("{}", region.stats_json());
    assert!(s.frames_in_use <= PAGES as u64 / 4, "{s:?}");
    // Both passes stream through the budget: most pages come in windows,
    // nearly all of them copied in (a quarter into free frames, the rest
    // after evicting).
    assert!(s.copied_in_pages >= PAGES as u64, "{s:?}");
    assert!(s.evictions >= PAGES as u64, "{s:?}");
    region.unmap().unwrap();
}

#[test]
fn test_writes_to_copied_in_pages_are_seen_and_written_back() {
    let d = Scratch::new("copy-in-write");
    let (region, mut data) = warm_region(&d, 93, true, None);
    assert_eq!(mismatches(&region, &data, 0..PAGES), 0);
    assert!(region.stats().copied_in_pages >= PAGES as u64 / 2);
    // Copied in clean, so write-protected: every write faults and marks
    // its page dirty.
    for p in (0..PAGES).step_by(5) {
        let at = p * PAGE_SIZE + 100;
        data[at] = data[at].wrapping_add(1);
        // SAFETY: inside the region, mapped writable for LEN bytes.
        unsafe { region.as_ptr().add(at).write_volatile(data[at]) };
    }
    let dirty = region.stats().wp_faults;
    region.unmap().unwrap();
    assert!(
        dirty >= PAGES.div_ceil(5) as u64,
        "write-protect faults: {dirty}"
    );
    let file = std::fs::read(d.file("data")).unwrap();
    let lost = (0..PAGES).filter(|&p| {
        file[p * PAGE_SIZE..(p + 1) * PAGE_SIZE] != data[p * PAGE_SIZE..(p + 1) * PAGE_SIZE]
    });
    assert_eq!(lost.count(), 0, "pages whose writes did not reach the file");
}

#[test]
fn test_faulting_thread_service_copies_nothing_in() {
    let d = Scratch::new("copy-in-faulting-thread");
    let (region, data) = warm_region(&d, 94, false, Some(FaultService::FaultingThread));
    assert_eq!(mismatches(&region, &data, 0..PAGES), 0);
    let s = region.stats();
    assert!(s.readahead_pages > 0, "{s:?}");
    assert_eq!(s.copied_in_pages, 0, "{s:?}");
    region.unmap().unwrap();
}
