//! A process with regions forks (docs/lifecycle.md): the child's file region
//! is the kernel's mapping of the file, with every write the parent made
//! before the fork; the child's writes reach the file, and the parent reads
//! them after `invalidate`; either process may exit first; an anonymous
//! region is absent in the child. Each scenario runs in its own process
//! (`in_child_process`), so that forking never copies the test harness.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use pagepilot_pager::{FaultService, Region, PAGE_SIZE};

const PAGES: usize = 4096;
const LEN: usize = PAGES * PAGE_SIZE;
const WATCHDOG: Duration = Duration::from_secs(30);

fn map(path: &Path, service: FaultService) -> Region {
    map_writable(path, LEN / 4, "lru", service)
}

/// Stamps page `p` of the region (and of `image`) with `tag`.
fn stamp(region: &Region, image: &mut [u8], p: usize, tag: u8) {
    let bytes = [tag, p as u8, (p >> 8) as u8, 0xA5];
    // SAFETY: page `p` < PAGES lies inside the region; one thread writes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), region.as_ptr().add(p * PAGE_SIZE), 4) };
    image[p * PAGE_SIZE..p * PAGE_SIZE + 4].copy_from_slice(&bytes);
}

/// Pages of `region` whose first 4 bytes differ from `image`.
fn bad_pages(region: &Region, image: &[u8], pages: impl Iterator<Item = usize>) -> Vec<usize> {
    pages
        .filter(|&p| {
            let mut got = [0u8; 4];
            // SAFETY: page `p` lies inside the region.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    region.as_ptr().add(p * PAGE_SIZE),
                    got.as_mut_ptr(),
                    4,
                )
            };
            got[..] != image[p * PAGE_SIZE..p * PAGE_SIZE + 4]
        })
        .collect()
}

/// Forks; the child runs `child` and leaves with its return value as exit
/// code (`_exit`: no exit handler of the parent's runs twice).
fn fork_child(child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the scenario process forks from its only test thread; the
    // child runs `child` and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits for `pid` under the watchdog; its raw wait status.
fn wait_child(pid: libc::pid_t) -> i32 {
    let start = std::time::Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child, without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return status;
        }
        if start.elapsed() > WATCHDOG {
            // SAFETY: kills our own hung child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("child {pid} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Parent writes the first half before the fork; the child checks every
/// page, writes the last quarter, flushes and exits; the parent, after
/// `invalidate`, reads the child's pages and the file ends equal to the image.
fn parent_and_child_share_the_file(service: FaultService) {
    let dir = Scratch::new("fork");
    let path = dir.file("data");
    let mut image = random_file(&path, LEN, 11);
    let region = map(&path, service);
    for p in 0..PAGES / 2 {
        stamp(&region, &mut image, p, b'P');
    }
    let at_fork = image.clone();
    let pid = fork_child(|| {
        let mut image = at_fork;
        let region = &region;
        let bad = bad_pages(region, &image, 0..PAGES);
        if !bad.is_empty() {
            eprintln!(
                "child: {} pages differ from the parent's, first {}",
                bad.len(),
                bad[0]
            );
            return 1;
        }
        for p in 3 * PAGES / 4..PAGES {
            stamp(region, &mut image, p, b'C');
        }
        // SAFETY: this child owns its copy of the region's handle; the
        // parent's is not touched (the closure only holds a reference).
        let own: Region = unsafe { std::ptr::read(region) };
        match own.unmap() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("child: unmap: {e}");
                2
            }
        }
    });
    let status = wait_child(pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    for p in 3 * PAGES / 4..PAGES {
        image[p * PAGE_SIZE] = b'C';
        image[p * PAGE_SIZE + 1..p * PAGE_SIZE + 4].copy_from_slice(&[
            p as u8,
            (p >> 8) as u8,
            0xA5,
        ]);
    }
    region.invalidate().unwrap();
    let bad = bad_pages(&region, &image, 0..PAGES);
    assert!(
        bad.is_empty(),
        "parent: {} pages differ, first {}",
        bad.len(),
        bad[0]
    );
    // The parent keeps paging: more writes after the child is gone.
    for p in PAGES / 2..3 * PAGES / 4 {
        stamp(&region, &mut image, p, b'Q');
    }
    region.unmap().unwrap();
    let file = std::fs::read(&path).unwrap();
    assert_eq!(diff(&file, &image), 0, "the file differs from the image");
}

#[test]
fn test_forked_child_shares_the_file_with_handler_threads() {
    succeeds_in_child_process(
        "test_forked_child_shares_the_file_with_handler_threads",
        WATCHDOG,
        || parent_and_child_share_the_file(FaultService::HandlerThreads),
    );
}

#[test]
fn test_forked_child_shares_the_file_in_the_faulting_thread() {
    succeeds_in_child_process(
        "test_forked_child_shares_the_file_in_the_faulting_thread",
        WATCHDOG,
        || parent_and_child_share_the_file(FaultService::FaultingThread),
    );
}

/// The parent exits (without unmapping) right after the fork; the child,
/// alone, reads the parent's pages and writes its own into the file.
#[test]
fn test_forked_child_outlives_its_parent() {
    const NAME: &str = "test_forked_child_outlives_its_parent";
    // The test and its scenario process agree on the directory: the test's.
    let in_scenario = in_scenario(NAME);
    let dir = shared_path(NAME, "fork-orphan");
    let (path, marker) = (dir.join("data"), dir.join("done"));
    let mut image = vec![0u8; LEN];
    if !in_scenario {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        image = random_file(&path, LEN, 12);
    }
    let expected = {
        let mut e = image.clone();
        for p in 0..PAGES {
            let tag = if p < PAGES / 2 { b'P' } else { b'C' };
            e[p * PAGE_SIZE..p * PAGE_SIZE + 4].copy_from_slice(&[
                tag,
                p as u8,
                (p >> 8) as u8,
                0xA5,
            ]);
        }
        e
    };
    succeeds_in_child_process(NAME, WATCHDOG, || {
        let region = map(&path, FaultService::HandlerThreads);
        let mut written = vec![0u8; LEN];
        for p in 0..PAGES / 2 {
            stamp(&region, &mut written, p, b'P');
        }
        let region = &region;
        fork_child(|| {
            std::thread::sleep(Duration::from_millis(300));
            let bad = bad_pages(region, &written, 0..PAGES / 2);
            let mut mine = vec![0u8; LEN];
            for p in PAGES / 2..PAGES {
                stamp(region, &mut mine, p, b'C');
            }
            let flushed = region.flush();
            let report = format!("bad {} flush {:?}", bad.len(), flushed.is_ok());
            std::fs::write(&marker, report).unwrap();
            0
        });
        // Exits at once, region still mapped: the exit handler writes back.
        std::process::exit(0);
    });
    let start = std::time::Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < WATCHDOG,
            "the orphaned child never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "bad 0 flush true"
    );
    let file = std::fs::read(&path).unwrap();
    assert_eq!(diff(&file, &expected), 0, "the file differs from the image");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An anonymous region has no file to give the child: an access there is
/// an access to unmapped memory, and the parent's data is untouched.
#[test]
fn test_forked_child_finds_anonymous_region_absent() {
    succeeds_in_child_process(
        "test_forked_child_finds_anonymous_region_absent",
        WATCHDOG,
        || {
            let region = Region::map_anon(LEN, LEN / 4, "clock").unwrap();
            let mut image = vec![0u8; LEN];
            for p in 0..PAGES {
                stamp(&region, &mut image, p, b'A');
            }
            let pid = fork_child(|| {
                // SAFETY: deliberately touches the region's (absent) first page.
                let v = unsafe { region.as_ptr().read_volatile() };
                i32::from(v) + 3
            });
            let status = wait_child(pid);
            assert!(libc::WIFSIGNALED(status), "child status {status:#x}");
            assert_eq!(libc::WTERMSIG(status), libc::SIGSEGV);
            let bad = bad_pages(&region, &image, 0..PAGES);
            assert!(bad.is_empty(), "{} pages changed", bad.len());
            region.unmap().unwrap();
        },
    );
}

/// `invalidate` also drops the windows read ahead (asynchronously) before
/// another writer changed the file: none of them is read stale afterwards.
#[test]
fn test_invalidate_rereads_windows_read_ahead_before_the_file_changed() {
    use std::os::unix::fs::FileExt;
    let dir = Scratch::new("invalidate");
    let path = dir.file("data");
    let data = random_file(&path, LEN, 13);
    let backing = pagepilot_pager::Backing::File {
        path: path.clone(),
        writable: true,
    };
    let opts = pagepilot_pager::RegionOptions::new(backing, LEN / 4, "clock")
        .with_readahead(32)
        .with_async_readahead(true)
        .with_readahead_depth(4);
    let region = Region::map(opts).unwrap();
    // A sequential stretch: windows are read ahead of it.
    for p in 0..256 {
        // SAFETY: inside the region.
        let v = unsafe { region.as_ptr().add(p * PAGE_SIZE).read_volatile() };
        assert_eq!(v, data[p * PAGE_SIZE]);
    }
    assert!(region.stats().readahead_pages > 0, "{:?}", region.stats());
    // Another writer changes the whole file.
    let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let changed: Vec<u8> = data.iter().map(|b| b ^ 0x5A).collect();
    writer.write_all_at(&changed, 0).unwrap();
    writer.sync_all().unwrap();
    region.invalidate().unwrap();
    let stale: Vec<usize> = (0..PAGES)
        // SAFETY: inside the region.
        .filter(|p| unsafe { region.as_ptr().add(p * PAGE_SIZE).read_volatile() } != changed[p * PAGE_SIZE])
        .collect();
    assert!(
        stale.is_empty(),
        "{} stale pages, first {}",
        stale.len(),
        stale[0]
    );
    region.unmap().unwrap();
}
