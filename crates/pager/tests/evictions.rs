//! Eviction notifications (the Cache Kernel's write-back of mappings with
//! their referenced and modified bits): one event per page evicted, with
//! its bits; a bounded queue that drops the oldest and counts them lost;
//! off until subscribed.

mod common;

use common::*;
use pagepilot_pager::{Backing, Drained, Eviction, Region, RegionOptions, PAGE_SIZE};

/// A writable file region of `pages` pages under `budget` frames, one page
/// per fault (no read-around, no read-ahead): evictions come in fault order.
fn demand_paged(dir: &Scratch, pages: usize, budget: usize, policy: &str) -> Region {
    let path = dir.file("data");
    random_file(&path, pages * PAGE_SIZE, 41);
    let backing = Backing::File {
        path,
        writable: true,
    };
    let opts = RegionOptions::new(backing, budget * PAGE_SIZE, policy)
        .with_fault_around(1)
        .with_readahead(1);
    Region::map(opts).unwrap()
}

fn read(region: &Region, page: usize) -> u8 {
    assert!(page * PAGE_SIZE < region.len());
    // SAFETY: inside the region.
    unsafe { region.as_ptr().add(page * PAGE_SIZE).read_volatile() }
}

fn write(region: &Region, page: usize) {
    assert!(page * PAGE_SIZE < region.len());
    // SAFETY: inside the region, which is writable.
    unsafe {
        region
            .as_ptr()
            .add(page * PAGE_SIZE + 1)
            .write_volatile(0xee)
    };
}

fn drain(region: &Region) -> (Vec<Eviction>, Drained) {
    let mut out = Vec::new();
    let d = region.drain_evictions(&mut out);
    assert_eq!(d.taken, out.len());
    (out, d)
}

fn event_of(events: &[Eviction], page: usize) -> Eviction {
    *events
        .iter()
        .find(|e| e.offset == (page * PAGE_SIZE) as u64)
        .unwrap_or_else(|| panic!("no eviction of page {page}: {events:?}"))
}

#[test]
fn test_evicted_pages_are_reported_with_their_referenced_and_modified_bits() {
    let dir = Scratch::new("evictions-bits");
    let region = demand_paged(&dir, 64, 4, "fifo");
    region.subscribe_evictions(64);
    // Written, then written back: clean again when it is evicted.
    write(&region, 30);
    region.flush().unwrap();
    read(&region, 10);
    write(&region, 20);
    // Read, then written.
    read(&region, 31);
    write(&region, 31);
    for p in 40..48 {
        read(&region, p);
    }
    let (events, d) = drain(&region);
    assert_eq!(d.lost, 0);
    let s = region.stats();
    assert_eq!(events.len() as u64, s.evictions, "{s:?}");
    let only_read = event_of(&events, 10);
    assert!(only_read.referenced && !only_read.modified, "{only_read:?}");
    let written = event_of(&events, 20);
    assert!(written.referenced && written.modified, "{written:?}");
    let flushed = event_of(&events, 30);
    assert!(!flushed.modified, "{flushed:?}");
    let again = event_of(&events, 31);
    assert!(again.modified, "{again:?}");
    // FIFO: in the order the pages came in.
    let order: Vec<u64> = events.iter().map(|e| e.offset / PAGE_SIZE as u64).collect();
    assert_eq!(&order[..4], &[30, 10, 20, 31]);
    region.unmap().unwrap();
}

#[test]
fn test_clock_evicts_pages_whose_referenced_bit_it_cleared() {
    let dir = Scratch::new("evictions-clock");
    let region = demand_paged(&dir, 64, 8, "clock");
    region.subscribe_evictions(1024);
    for _ in 0..3 {
        for p in 0..64 {
            read(&region, p);
        }
    }
    let (events, _) = drain(&region);
    assert!(events.len() > 100, "{}", events.len());
    assert!(events.iter().all(|e| !e.modified));
    assert!(
        events.iter().any(|e| !e.referenced),
        "CLOCK takes unreferenced pages"
    );
    region.unmap().unwrap();
}

#[test]
fn test_a_full_queue_drops_the_oldest_events_and_counts_them_lost() {
    let dir = Scratch::new("evictions-lost");
    let region = demand_paged(&dir, 64, 4, "fifo");
    region.subscribe_evictions(4);
    for p in 0..24 {
        read(&region, p);
    }
    // 20 evictions (pages 0..20), 4 kept: the newest.
    let (events, d) = drain(&region);
    assert_eq!((d.taken, d.lost), (4, 16));
    let kept: Vec<u64> = events.iter().map(|e| e.offset / PAGE_SIZE as u64).collect();
    assert_eq!(kept, vec![16, 17, 18, 19]);
    let s = region.stats();
    assert_eq!((s.evictions, s.evictions_lost), (20, 16), "{s:?}");
    // Learned once: the next drain reports only what was lost since.
    assert_eq!(drain(&region).1, Drained { taken: 0, lost: 0 });
    read(&region, 30);
    let mut one = Vec::new();
    assert_eq!(
        region.drain_evictions_up_to(&mut one, 0),
        Drained { taken: 0, lost: 0 }
    );
    assert_eq!(region.drain_evictions_up_to(&mut one, 5).taken, 1);
    region.unmap().unwrap();
}

#[test]
fn test_no_event_is_queued_before_subscribing_or_after_turning_notifications_off() {
    let dir = Scratch::new("evictions-off");
    let region = demand_paged(&dir, 64, 4, "fifo");
    for p in 0..10 {
        read(&region, p);
    }
    assert_eq!(region.stats().evictions, 6);
    assert_eq!(drain(&region).1, Drained::default());
    region.subscribe_evictions(100);
    for p in 10..20 {
        read(&region, p);
    }
    assert_eq!(drain(&region).0.len(), 10);
    region.subscribe_evictions(0);
    for p in 20..30 {
        read(&region, p);
    }
    assert_eq!(drain(&region).1, Drained::default());
    let s = region.stats();
    assert_eq!((s.evictions, s.evictions_lost), (26, 0), "{s:?}");
    region.unmap().unwrap();
}

#[test]
fn test_invalidate_and_a_smaller_budget_report_the_pages_they_drop() {
    let dir = Scratch::new("evictions-invalidate");
    let mut region = demand_paged(&dir, 64, 16, "fifo");
    region.subscribe_evictions(100);
    for p in 0..4 {
        read(&region, p);
    }
    write(&region, 5);
    region.invalidate().unwrap();
    let (events, _) = drain(&region);
    // The written page was flushed first: clean, dropped with the others.
    let mut pages: Vec<u64> = events.iter().map(|e| e.offset / PAGE_SIZE as u64).collect();
    pages.sort_unstable();
    assert_eq!(pages, vec![0, 1, 2, 3, 5]);
    assert!(events.iter().all(|e| !e.modified));
    for p in 10..20 {
        write(&region, p);
    }
    region.set_budget(4 * PAGE_SIZE).unwrap();
    let (events, _) = drain(&region);
    assert_eq!(events.len(), 6);
    assert!(
        events.iter().all(|e| e.modified && e.referenced),
        "{events:?}"
    );
    region.unmap().unwrap();
}
