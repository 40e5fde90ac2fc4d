//! Prefetched windows read on the io_uring (the default for asynchronous
//! read-ahead without reader threads): the join's page-ins follow the
//! formula O + (O - M + (depth + 1)k)(Loop - 1) exactly, whoever serves the
//! faults; data read and written through windows whose victims the ring
//! evicts is the file's.

mod common;

use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

struct Join {
    outer: usize,
    frames: usize,
    loops: usize,
    k: usize,
    depth: usize,
}

fn join_page_ins(j: &Join, policy: &str, service: FaultService, ring: bool) -> u64 {
    let d = Scratch::new("ring-join");
    let path = d.file("outer");
    let data = random_file(&path, j.outer * PAGE_SIZE, 17);
    let opts = RegionOptions::new(
        Backing::File {
            path,
            writable: false,
        },
        j.frames * PAGE_SIZE,
        policy,
    )
    .with_readahead(j.k)
    .with_async_readahead(true)
    .with_readahead_depth(j.depth)
    .with_io_uring(ring)
    .with_fault_service(service);
    let region = Region::map(opts).unwrap();
    let mut bad = 0;
    for _ in 0..j.loops {
        for p in 0..j.outer {
            for off in (0..PAGE_SIZE).step_by(512) {
                let at = p * PAGE_SIZE + off;
                // SAFETY: inside the region.
                let v = unsafe { region.as_ptr().add(at).read_volatile() };
                bad += usize::from(v != data[at]);
            }
        }
    }
    let s = region.stats();
    println!("{policy} {service:?} ring={ring}: {}", region.stats_json());
    assert_eq!(bad, 0, "wrong data read through the windows");
    assert!(s.frames_in_use <= j.frames as u64);
    assert!(region.allocated_bytes() <= (j.frames * PAGE_SIZE) as u64);
    assert_eq!(s.bytes_read, s.missing_faults * PAGE_SIZE as u64);
    region.unmap().unwrap();
    s.missing_faults
}

#[test]
fn test_mru_join_on_the_ring_pages_in_by_the_window_formula() {
    for (k, depth) in [(8, 1), (12, 2)] {
        let j = Join {
            outer: 3000,
            frames: 2000,
            loops: 4,
            k,
            depth,
        };
        let (o, m, l) = (j.outer as u64, j.frames as u64, j.loops as u64);
        let want = o + (o - m + ((depth + 1) * k) as u64) * (l - 1);
        // The application's own thread issues, waits and maps: exact.
        let got = join_page_ins(&j, "mru", FaultService::FaultingThread, true);
        assert_eq!(got, want, "k={k} depth={depth}, faulting thread");
        let got = join_page_ins(&j, "mru", FaultService::HandlerThreads, true);
        assert_eq!(got, want, "k={k} depth={depth}, handler thread");
    }
}

#[test]
fn test_ring_and_reader_threads_page_in_alike() {
    let j = Join {
        outer: 2000,
        frames: 1500,
        loops: 3,
        k: 16,
        depth: 1,
    };
    let ring = join_page_ins(&j, "mru", FaultService::HandlerThreads, true);
    let readers = join_page_ins(&j, "mru", FaultService::HandlerThreads, false);
    assert_eq!(ring, readers);
    // LRU (CLOCK live) pages in every page of every loop either way.
    let lru = join_page_ins(&j, "lru", FaultService::FaultingThread, true);
    assert_eq!(lru, (j.outer * j.loops) as u64);
}

fn write_scan(service: FaultService, policy: &str) {
    let d = Scratch::new("ring-write");
    let path = d.file("data");
    let pages = 768;
    let mut data = random_file(&path, pages * PAGE_SIZE, 23);
    let region = Region::map(
        RegionOptions::new(
            Backing::File {
                path: path.clone(),
                writable: true,
            },
            pages * PAGE_SIZE / 4,
            policy,
        )
        .with_readahead(16)
        .with_async_readahead(true)
        .with_readahead_depth(2)
        .with_fault_service(service),
    )
    .unwrap();
    for pass in 0..3 {
        for p in 0..pages {
            let off = p * PAGE_SIZE + (p * 13 + pass * 7) % PAGE_SIZE;
            if (p + pass) % 3 == 0 {
                // A write: dirty victims are written back before the punch;
                // clean ones are punched by the ring.
                // SAFETY: inside the region.
                unsafe {
                    region
                        .as_ptr()
                        .add(off)
                        .write_volatile(pass as u8 ^ p as u8)
                };
                data[off] = pass as u8 ^ p as u8;
            } else {
                // SAFETY: inside the region.
                let v = unsafe { region.as_ptr().add(off).read_volatile() };
                assert_eq!(v, data[off], "page {p} pass {pass}");
            }
        }
    }
    let s = region.stats();
    assert!(s.writebacks > 0 && s.evictions > pages as u64, "{s:?}");
    assert!(region.allocated_bytes() <= (pages * PAGE_SIZE / 4) as u64);
    region.unmap().unwrap();
    let back = std::fs::read(&path).unwrap();
    assert_eq!(diff(&back, &data), 0);
}

#[test]
fn test_writes_through_ring_windows_reach_the_file() {
    write_scan(FaultService::FaultingThread, "mru");
    write_scan(FaultService::FaultingThread, "lru");
    write_scan(FaultService::HandlerThreads, "mru");
}

#[test]
fn test_threads_waiting_for_each_others_ring_windows_keep_data() {
    // Faults served in the faulting threads: a thread may wait for a window
    // another thread's fault issued (or for a victim its punch frees).
    let len = 1024 * PAGE_SIZE;
    let out = hammer_file_region("ring-threads", 29, len, "fifo", 3, 150_000, |o| {
        o.with_readahead(16)
            .with_async_readahead(true)
            .with_fault_around(4)
            .with_fault_service(FaultService::FaultingThread)
    });
    assert!(out.allocated_bytes <= (len / 4) as u64, "{:?}", out.stats);
}
