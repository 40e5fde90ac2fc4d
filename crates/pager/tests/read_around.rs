//! Read-around of random faults, sized by use (docs/pager.md,
//! "Read-around"): clusters while the application uses the pages around
//! its faults, single pages once it does not, and the option as an override.

mod common;

use common::*;
use pagepilot_pager::{Backing, Region, RegionOptions, RegionStats, PAGE_SIZE};

/// Reads one byte of each page of `order` from a region mapped over a
/// fresh random file of `pages` pages with the budget above the file's
/// size, checks it against the file and returns the region's statistics.
fn read_in_order(tag: &str, pages: usize, order: &[usize], fault_around: usize) -> RegionStats {
    let d = Scratch::new(tag);
    let path = d.file("data");
    let data = random_file(&path, pages * PAGE_SIZE, 21);
    let backing = Backing::File {
        path,
        writable: false,
    };
    let opts =
        RegionOptions::new(backing, 2 * pages * PAGE_SIZE, "clock").with_fault_around(fault_around);
    let region = Region::map(opts).unwrap();
    for &p in order {
        let at = p * PAGE_SIZE + 17;
        // SAFETY: inside the region, mapped for `pages` pages.
        let v = unsafe { region.as_ptr().add(at).read_volatile() };
        assert_eq!(v, data[at], "page {p}");
    }
    let s = region.stats();
    println!("{tag}: {}", region.stats_json());
    region.unmap().unwrap();
    s
}

/// The pages `0..pages` in a random order, or one in `one_in` of them.
fn shuffled(pages: usize, one_in: usize, seed: u64) -> Vec<usize> {
    let mut rng = Rng(seed);
    let mut v: Vec<usize> = (0..pages).filter(|p| p % one_in == 0).collect();
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i + 1));
    }
    // Sparse: a random page of each group of `one_in`, not always the first.
    v.iter()
        .map(|&p| p + rng.below(one_in.min(pages - p)))
        .collect()
}

/// Every page touched once in a random order, as a database reading a
/// table through an index might: the pages around each fault are used, so
/// each fault reads a cluster and most touches raise no fault at all.
#[test]
fn test_random_reads_of_every_page_are_served_in_clusters() {
    let pages = 8192;
    let s = read_in_order("around-every", pages, &shuffled(pages, 1, 3), 0);
    assert_eq!(
        s.bytes_read,
        (pages * PAGE_SIZE) as u64,
        "each page read once: {s:?}"
    );
    assert!(s.probe_hits > 0, "{s:?}");
    assert!(s.fault_events < pages as u64 / 4, "{s:?}");
}

/// Every page of a 128 MiB file touched once in a random order by one
/// thread, into free frames: once the clusters grow to the device's
/// read-around (8 MiB here), each is read in pieces, the faulting page's by
/// its fault and the others by reader threads, so that clearing fresh
/// frames and the device's reads overlap (docs/pager.md, "Read-around").
/// How many pieces are in flight at once depends on the scheduler, not on
/// the pager: the test counts the reads, each piece one.
#[test]
fn test_large_clusters_into_free_frames_are_read_in_pieces() {
    let pages = 32 * 1024;
    let s = read_in_order("around-pieces", pages, &shuffled(pages, 1, 5), 0);
    assert_eq!(
        s.bytes_read,
        (pages * PAGE_SIZE) as u64,
        "each page read once: {s:?}"
    );
    assert!(s.fault_events < pages as u64 / 16, "{s:?}");
    // Read whole, each fault's cluster would be one read (nothing else is
    // read here: no sequence, no prefetch); in pieces of at most 512 pages,
    // the 8 MiB clusters make several reads per fault.
    let reads = s.read_latency.count;
    println!("{reads} reads for {} faults", s.fault_events);
    assert!(reads > s.fault_events, "{reads} reads: {s:?}");
}

/// Pages of the files mapped by [`under_a_sixteenth`].
const PAGES: usize = 16 * 1024;

/// A fresh random file of [`PAGES`] pages (seed `seed`), its contents, and
/// a region over it with the defaults and a budget a sixteenth of its size.
fn under_a_sixteenth(tag: &str, seed: u64) -> (Scratch, Vec<u8>, Region) {
    let d = Scratch::new(tag);
    let path = d.file("data");
    let data = random_file(&path, PAGES * PAGE_SIZE, seed);
    let region = Region::map_file(&path, false, PAGES / 16 * PAGE_SIZE, "clock").unwrap();
    (d, data, region)
}

/// Random reads under a budget a sixteenth of the file: the pages around a
/// fault are evicted before they are used, so once the budget is full the
/// pager soon reads single pages (a cluster now and then, to notice a change).
#[test]
fn test_random_reads_under_a_full_budget_soon_read_single_pages() {
    let (_d, data, region) = under_a_sixteenth("around-sparse", 22);
    let pages = PAGES;
    let mut rng = Rng(6);
    let mut touch = |n: usize| {
        for _ in 0..n {
            let at = rng.below(pages) * PAGE_SIZE + 5;
            // SAFETY: inside the region.
            let v = unsafe { region.as_ptr().add(at).read_volatile() };
            assert_eq!(v, data[at]);
        }
        region.stats()
    };
    let warm = touch(3000);
    let s = touch(2000);
    let faults = s.fault_events - warm.fault_events;
    let read = (s.bytes_read - warm.bytes_read) / PAGE_SIZE as u64;
    println!("{faults} faults read {read} pages: {}", region.stats_json());
    assert!(faults > 1500, "{s:?}");
    assert!(
        read <= faults * 5 / 4,
        "{read} pages for {faults} faults: {s:?}"
    );
    // One thread's faults never wait behind each other: no reader thread
    // was started for them.
    assert_eq!(s.reader_threads, 0, "{s:?}");
    region.unmap().unwrap();
}

/// `fault_around_pages` set by the caller is used as given: 1 is demand
/// paging, a page read per fault.
#[test]
fn test_fault_around_option_overrides_the_read_around() {
    let pages = 2048;
    let s = read_in_order("around-off", pages, &shuffled(pages, 1, 5), 1);
    assert_eq!(s.probe_hits, 0, "{s:?}");
    // Only where the random order happens to read a page right after the
    // one before does a sequence read ahead.
    assert!(s.fault_events > pages as u64 * 95 / 100, "{s:?}");
}

/// Four application threads reading random pages of a cold file at once,
/// with the defaults, under a budget a sixteenth of the file: each is
/// served the file's bytes, and the budget holds while their faults come
/// together. (Their reads then go in flight together, reader threads taking
/// the faults that wait behind another; how many at once depends on the
/// scheduler, so `reads_in_flight_max` is a benchmark's figure, not this
/// test's.)
#[test]
fn test_threads_faulting_together_are_served_within_the_budget() {
    let (_d, data, region) = under_a_sixteenth("around-threads", 23);
    let pages = PAGES;
    let base = region.as_ptr() as usize;
    std::thread::scope(|sc| {
        for t in 0..4u64 {
            let data = &data;
            sc.spawn(move || {
                let mut rng = Rng(100 + t);
                for _ in 0..1500 {
                    let at = rng.below(pages) * PAGE_SIZE + 7;
                    // SAFETY: inside the region.
                    let v = unsafe { ((base + at) as *const u8).read_volatile() };
                    assert_eq!(v, data[at]);
                }
            });
        }
    });
    let s = region.stats();
    println!("{}", region.stats_json());
    assert!(
        s.frames_in_use <= s.budget_frames && s.over_budget == 0,
        "{s:?}"
    );
    // Every fault read what it mapped (no read failed, none lost), and the
    // budget was full: pages were evicted to make room.
    assert_eq!(s.read_errors, 0, "{s:?}");
    assert_eq!(s.bytes_read, s.missing_faults * PAGE_SIZE as u64, "{s:?}");
    assert!(s.evictions > 0, "{s:?}");
    // Readers start as faults queue, three at most (how many depends on
    // the scheduler).
    assert!(s.reader_threads <= 3, "{s:?}");
    region.unmap().unwrap();
}
