//! The dirty map a writable file region shares with the daemon: a bit per
//! page set before the application can write the page and cleared only once
//! its data reached the file (or its frame is gone), so that a daemon can
//! write back the pages of a client that was SIGKILLed.

mod common;

use std::io::BufRead;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::daemon::{dirty_pages, is_hole, write_back_dead_client};
use common::*;
use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

fn map_file(path: &std::path::Path, budget_pages: usize, policy: &str) -> Region {
    let backing = Backing::File {
        path: path.into(),
        writable: true,
    };
    Region::map(RegionOptions::new(
        backing,
        budget_pages * PAGE_SIZE,
        policy,
    ))
    .unwrap()
}

fn write_byte(region: &Region, page: usize, v: u8) {
    assert!(page * PAGE_SIZE < region.len());
    // SAFETY: inside the region, which is writable.
    unsafe { region.as_ptr().add(page * PAGE_SIZE + 7).write_volatile(v) };
}

fn read_byte(region: &Region, page: usize) -> u8 {
    assert!(page * PAGE_SIZE < region.len());
    // SAFETY: inside the region.
    unsafe { region.as_ptr().add(page * PAGE_SIZE + 7).read_volatile() }
}

/// The region's memfd and dirty map descriptors.
fn fds(region: &Region) -> (i32, i32) {
    let [memory, backing, dirty] = region.daemon_fds_for_tests().unwrap();
    assert!(memory >= 0 && backing >= 0 && dirty >= 0);
    (memory, dirty)
}

#[test]
fn test_writes_to_a_file_region_mark_exactly_the_written_pages_and_flush_clears_them() {
    let dir = Scratch::new("dirty-exact");
    let path = dir.file("data");
    random_file(&path, 64 * PAGE_SIZE, 3);
    let region = map_file(&path, 64, "clock");
    let (_, dirty) = fds(&region);
    assert_eq!(dirty_pages(dirty), Vec::<u64>::new());
    for p in [5, 20, 21, 63] {
        read_byte(&region, p);
    }
    for p in [3, 10, 11, 40, 20] {
        write_byte(&region, p, 0xa5);
    }
    assert_eq!(dirty_pages(dirty), vec![3, 10, 11, 20, 40]);
    region.flush().unwrap();
    assert_eq!(
        dirty_pages(dirty),
        Vec::<u64>::new(),
        "flush wrote them back"
    );
    // Written again after the flush: marked again.
    write_byte(&region, 10, 0x5a);
    assert_eq!(dirty_pages(dirty), vec![10]);
    region.unmap().unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let mut b = [0u8];
    file.read_exact_at(&mut b, (10 * PAGE_SIZE + 7) as u64)
        .unwrap();
    assert_eq!(b[0], 0x5a);
}

#[test]
fn test_evicted_dirty_pages_leave_no_bit_set_outside_the_frames_held() {
    let dir = Scratch::new("dirty-evict");
    let path = dir.file("data");
    let pages = 256;
    random_file(&path, pages * PAGE_SIZE, 5);
    let region = map_file(&path, 16, "fifo");
    let (memory, dirty) = fds(&region);
    for p in 0..pages {
        write_byte(&region, (p * 37) % pages, p as u8);
    }
    let s = region.stats();
    assert!(s.evictions > 0 && s.writebacks > 0, "{s:?}");
    let marked = dirty_pages(dirty);
    let held: Vec<u64> = (0..pages as u64)
        .filter(|&p| !is_hole(memory, p * PAGE_SIZE as u64))
        .collect();
    // Every page was written and none flushed: the pages still in the
    // memfd are exactly the dirty ones; every evicted one was cleared.
    assert_eq!(marked, held, "{s:?}");
    assert!(marked.len() <= 16, "{} bits set", marked.len());
    region.unmap().unwrap();
}

#[test]
fn test_read_only_and_anonymous_regions_share_no_dirty_map() {
    let dir = Scratch::new("dirty-none");
    let path = dir.file("data");
    random_file(&path, 8 * PAGE_SIZE, 7);
    let ro = Region::map_file(&path, false, 4 * PAGE_SIZE, "clock").unwrap();
    let [memory, backing, dirty] = ro.daemon_fds_for_tests().unwrap();
    assert!(memory >= 0 && backing == -1 && dirty == -1);
    let anon = Region::map_anon(8 * PAGE_SIZE, 4 * PAGE_SIZE, "clock").unwrap();
    let [memory, backing, dirty] = anon.daemon_fds_for_tests().unwrap();
    assert!(memory >= 0 && backing == -1 && dirty == -1);
}

/// The dead client's file: 4 MiB, zeros.
const CLIENT_PAGES: usize = 1024;
const CLIENT_BUDGET_PAGES: usize = 16;
const WORDS: u64 = (CLIENT_PAGES * PAGE_SIZE / 8) as u64;
/// Writes the parent waits for before it kills the client, the first time.
const WRITES_BEFORE_KILL: usize = 2000;
/// Clients killed per test, each after more writes than the last.
const ROUNDS: usize = 4;

/// The client: maps the file under a budget of 16 frames, prints its
/// descriptors, then two threads store distinct words at random places
/// (each word once, never zero) and log each store once it completed,
/// while a third flushes now and then, until the parent kills it.
fn client(test: &str, service: FaultService) {
    let path = shared_path(test, "file");
    let budget = CLIENT_BUDGET_PAGES * PAGE_SIZE;
    let region = map_writable(&path, budget, "clock", service);
    let (memory, dirty) = fds(&region);
    println!("fds {memory} {dirty}");
    let base = region.as_ptr() as usize;
    let region = &region;
    std::thread::scope(|sc| {
        sc.spawn(move || loop {
            std::thread::sleep(Duration::from_millis(2));
            let _ = region.flush();
        });
        for t in 0..2u64 {
            sc.spawn(move || {
                for k in (t..WORDS).step_by(2) {
                    // An odd multiplier permutes the words (a power of two).
                    let w = k.wrapping_mul(0x9E37_79B1) % WORDS;
                    let v = (k + 1) * 0x0101_0101;
                    // SAFETY: word `w` lies inside the region; each is
                    // written once, by this thread.
                    unsafe { ((base + w as usize * 8) as *mut u64).write_volatile(v) };
                    println!("w {} {v}", w * 8);
                }
            });
        }
        // Not reached while the parent kills in time; bounded if it does not.
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(0);
    });
}

/// Kills [`ROUNDS`] clients at different points ([`kill_and_write_back`]).
fn dead_client_keeps_every_logged_write(test: &str, service: FaultService) {
    if in_scenario(test) {
        client(test, service);
        return;
    }
    let path = shared_path(test, "file");
    let _cleanup = RemoveOnDrop(path.clone());
    let mut saved = 0;
    for round in 0..ROUNDS {
        saved += kill_and_write_back(test, &path, WRITES_BEFORE_KILL + round * 777);
    }
    // Some client died with stores that only the daemon's write-back saved
    // (a flush just before the kill can leave none in one round).
    assert!(
        saved > 0,
        "no store was left for the daemon in {ROUNDS} rounds"
    );
}

/// The parent: starts the client, opens its memfd and dirty map through
/// /proc, lets it write, SIGKILLs it after `writes` stores, then writes its
/// dirty pages back as the daemon does and checks that the file holds every
/// store the client logged. Returns the stores only the daemon's write-back
/// put in the file.
fn kill_and_write_back(test: &str, path: &std::path::Path, writes: usize) -> usize {
    std::fs::write(path, vec![0u8; CLIENT_PAGES * PAGE_SIZE]).unwrap();
    let mut child = Killed(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("PAGEPILOT_SCENARIO", test)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let out = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut out = std::io::BufReader::new(out);
        loop {
            let mut line = String::new();
            // A line the client was killed in the middle of has no newline.
            match out.read_line(&mut line) {
                Ok(n) if n > 0 && line.ends_with('\n') => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
                _ => return,
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut files = None;
    let mut logged = Vec::new();
    let parse = |line: &str, logged: &mut Vec<(u64, u64)>| {
        if let Some(rest) = line.trim_end().strip_prefix("w ") {
            let (off, v) = rest.split_once(' ').unwrap();
            logged.push((off.parse().unwrap(), v.parse().unwrap()));
        }
    };
    while logged.len() < writes {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("the client stalled after {} writes", logged.len()));
        // The harness prints the test's name before it, without a newline.
        if let Some(at) = line.find("fds ") {
            let rest = line[at + 4..].trim_end();
            let open = |n: &str| std::fs::File::open(format!("/proc/{pid}/fd/{n}")).unwrap();
            let (m, d) = rest.split_once(' ').unwrap();
            files = Some((open(m), open(d)));
        }
        parse(&line, &mut logged);
    }
    // SAFETY: kill(2) of our own child, by its pid.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let status = child.0.wait().unwrap();
    assert!(!status.success(), "the client must die by SIGKILL");
    reader.join().unwrap();
    while let Ok(line) = rx.try_recv() {
        parse(&line, &mut logged);
    }
    let (memory, dirty) = files.expect("the client printed its descriptors");
    let backing = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let word_at = |off: u64| {
        let mut b = [0u8; 8];
        backing.read_exact_at(&mut b, off).unwrap();
        u64::from_ne_bytes(b)
    };
    let missing_before = logged.iter().filter(|&&(o, v)| word_at(o) != v).count();
    let written = write_back_dead_client(&memory, &dirty, &backing);
    let lost: Vec<_> = logged.iter().filter(|&&(o, v)| word_at(o) != v).collect();
    println!(
        "{} stores logged, {missing_before} only in memory at the kill, {written} pages written back",
        logged.len()
    );
    assert!(
        lost.is_empty(),
        "{} logged stores lost: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    // The client evicted and wrote pages back while it ran.
    assert!(missing_before < logged.len(), "{missing_before}");
    missing_before
}

/// Kills the child if the test ends early.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn test_a_killed_clients_dirty_pages_written_back_by_the_daemon_keep_every_logged_store() {
    dead_client_keeps_every_logged_write(
        "test_a_killed_clients_dirty_pages_written_back_by_the_daemon_keep_every_logged_store",
        FaultService::HandlerPerCpu,
    );
}

#[test]
fn test_a_killed_faulting_thread_client_keeps_every_logged_store_through_the_daemon() {
    dead_client_keeps_every_logged_write(
        "test_a_killed_faulting_thread_client_keeps_every_logged_store_through_the_daemon",
        FaultService::FaultingThread,
    );
}

#[test]
fn test_the_memfd_of_a_dirty_page_is_read_back_by_the_daemon_helper() {
    // The helper itself: a page held dirty in memory is copied to the file.
    let dir = Scratch::new("dirty-helper");
    let path = dir.file("data");
    std::fs::write(&path, vec![0u8; 8 * PAGE_SIZE]).unwrap();
    let backing = Backing::File {
        path: path.clone(),
        writable: true,
    };
    // Demand paging: page 2 alone is brought in.
    let opts = RegionOptions::new(backing, 8 * PAGE_SIZE, "clock").with_fault_around(1);
    let region = Region::map(opts).unwrap();
    write_byte(&region, 2, 0x77);
    let [memory, _, dirty] = region.daemon_fds_for_tests().unwrap();
    let open = |fd: i32| std::fs::File::open(format!("/proc/self/fd/{fd}")).unwrap();
    let (memory, dirty) = (open(memory), open(dirty));
    let copy = dir.file("copy");
    std::fs::write(&copy, vec![0u8; 8 * PAGE_SIZE]).unwrap();
    let backing = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    assert_eq!(write_back_dead_client(&memory, &dirty, &backing), 1);
    let back = std::fs::read(&copy).unwrap();
    assert_eq!(back[2 * PAGE_SIZE + 7], 0x77);
    assert_eq!(back.iter().filter(|&&b| b != 0).count(), 1);
    assert!(!is_hole(memory.as_raw_fd(), 2 * PAGE_SIZE as u64));
    assert!(is_hole(memory.as_raw_fd(), 5 * PAGE_SIZE as u64));
    region.unmap().unwrap();
}
