//! A file the kernel's page cache holds already is read from it, not from
//! the disk; a cold file is read around the page cache and leaves no copy
//! in it; a file half warm is read half from each. The disk reads are the
//! process's own (`/proc/self/io` `read_bytes`), so each case runs in its
//! own process (`in_child_process`).

mod common;

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use common::*;
use pagepilot_pager::{sys, Backing, Region, RegionOptions, PAGE_SIZE};

const LEN: usize = 16 << 20;
const PAGES: usize = LEN / PAGE_SIZE;
const WATCHDOG: Duration = Duration::from_secs(60);

/// Bytes this process has read from block devices so far.
fn disk_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn cached_pages(path: &Path, first: usize, pages: usize) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    sys::cached_pages(
        f.as_raw_fd(),
        (first * PAGE_SIZE) as u64,
        (pages * PAGE_SIZE) as u64,
    )
    .unwrap()
}

/// Drops pages `first..first+pages` of `path` from the page cache.
fn evict_from_page_cache(path: &Path, first: usize, pages: usize) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice on our own descriptor; no memory is passed.
    let rc = unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            (first * PAGE_SIZE) as i64,
            (pages * PAGE_SIZE) as i64,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    assert_eq!(rc, 0);
}

/// Maps the file read-only under a quarter of its size, reads every page
/// in order and checks it; returns (disk bytes read meanwhile, the
/// region's cached bytes read).
fn scan(path: &Path, data: &[u8], async_readahead: bool) -> (u64, u64) {
    let backing = Backing::File {
        path: path.into(),
        writable: false,
    };
    let opts = RegionOptions::new(backing, LEN / 4, "clock").with_async_readahead(async_readahead);
    let region = Region::map(opts).unwrap();
    let before = disk_read_bytes();
    for p in 0..PAGES {
        let at = p * PAGE_SIZE + 17;
        // SAFETY: inside the region.
        let v = unsafe { region.as_ptr().add(at).read_volatile() };
        assert_eq!(v, data[at], "page {p}");
    }
    let disk = disk_read_bytes() - before;
    let stats = region.stats();
    println!("disk {disk} stats {}", region.stats_json());
    assert!(
        stats.direct_io,
        "the test needs a file system with O_DIRECT"
    );
    region.unmap().unwrap();
    (disk, stats.cached_bytes_read)
}

#[test]
fn test_warm_file_is_read_from_the_page_cache_not_the_disk() {
    for async_readahead in [false, true] {
        let name = if async_readahead {
            "test_warm_file_is_read_from_the_page_cache_not_the_disk_ahead"
        } else {
            "test_warm_file_is_read_from_the_page_cache_not_the_disk"
        };
        let out = in_child_process(
            "test_warm_file_is_read_from_the_page_cache_not_the_disk",
            WATCHDOG,
            || {
                let dir = Scratch::new(name);
                let path = dir.file("data");
                let data = random_file(&path, LEN, 81);
                assert_eq!(cached_pages(&path, 0, PAGES), PAGES as u64, "not warm");
                let (disk, cached) = scan(&path, &data, async_readahead);
                // Every page from the page cache (the pager's own count of
                // direct reads is then zero); the process's disk reads allow
                // for a metadata block of the file system (seen once in CI:
                // 4,096 bytes with all 16 MiB read from the page cache).
                assert_eq!(cached, LEN as u64, "bytes read from the page cache");
                assert!(
                    disk <= 2 * PAGE_SIZE as u64,
                    "bytes read from the disk: {disk}"
                );
            },
        );
        assert!(
            out.succeeded(),
            "async_readahead {async_readahead}: {out:?}"
        );
    }
}

#[test]
fn test_cold_file_is_read_from_the_disk_and_leaves_no_copy_in_the_page_cache() {
    succeeds_in_child_process(
        "test_cold_file_is_read_from_the_disk_and_leaves_no_copy_in_the_page_cache",
        WATCHDOG,
        || {
            let dir = Scratch::new("cold");
            let path = dir.file("data");
            let data = random_file(&path, LEN, 82);
            evict_from_page_cache(&path, 0, PAGES);
            assert_eq!(cached_pages(&path, 0, PAGES), 0, "not cold");
            let (disk, cached) = scan(&path, &data, true);
            let left = cached_pages(&path, 0, PAGES);
            assert!(disk >= LEN as u64, "only {disk} bytes from the disk");
            assert_eq!(cached, 0);
            assert_eq!(left, 0, "pages left in the page cache");
        },
    );
}

#[test]
fn test_half_warm_file_is_read_half_from_each() {
    succeeds_in_child_process(
        "test_half_warm_file_is_read_half_from_each",
        WATCHDOG,
        || {
            let dir = Scratch::new("half");
            let path = dir.file("data");
            let data = random_file(&path, LEN, 83);
            // Every other 2 MiB cold (the page cache holds large folios:
            // smaller stretches may not be dropped); windows crossing a
            // boundary mix both kinds.
            for first in (0..PAGES).step_by(1024) {
                evict_from_page_cache(&path, first, 512);
            }
            let warm = cached_pages(&path, 0, PAGES);
            assert_eq!(warm, PAGES as u64 / 2, "not half warm");
            let (disk, cached) = scan(&path, &data, false);
            assert_eq!(cached, LEN as u64 / 2);
            assert!(
                (LEN as u64 / 2..LEN as u64 / 2 + (1 << 20)).contains(&disk),
                "{disk} bytes from the disk"
            );
        },
    );
}
