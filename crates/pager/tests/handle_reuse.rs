//! A `ShareHandle` opened when its lease can no longer be claimed: twice
//! (a pickle loaded twice), or after its region was unmapped (a Python
//! `with` block ended before the spawned worker started). The claim reads,
//! locks and writes only the lease file it was granted (checked by inode
//! and token), so a descriptor number reused by another file is never
//! written; a second open while the region is paged again is refused, and
//! an open after the unmap maps the file, which is all there is then.
//! Runs in the test binary's process (nothing forks).

mod common;

use std::os::fd::AsRawFd;

use common::*;
use pagepilot_pager::{ClaimError, FaultService, HandleError, PAGE_SIZE};

const LEN: usize = 64 * PAGE_SIZE;

/// One test at a time: each watches descriptor numbers of the process.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Opens an unrelated file at descriptor `n` if it is free (usually the
/// lowest free number is `n` once the lease's descriptor closed): the file
/// and whether it sits at `n`.
fn unrelated_file_at(dir: &Scratch, n: i32) -> (std::path::PathBuf, std::fs::File, Option<i32>) {
    let victim = dir.file("victim");
    std::fs::write(&victim, vec![0u8; 4096]).unwrap();
    let file = std::fs::File::open(&victim).unwrap();
    let dup = (file.as_raw_fd() != n).then(|| {
        // SAFETY: F_DUPFD on a descriptor we own; the copy is closed by the caller.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD, n) }
    });
    (victim, file, dup)
}

fn written_bytes(victim: &std::path::Path) -> Vec<usize> {
    let bytes = std::fs::read(victim).unwrap();
    (0..bytes.len()).filter(|&i| bytes[i] != 0).collect()
}

#[test]
fn a_handle_opened_again_after_its_lease_went_is_refused_and_writes_into_no_other_file() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("handle-again");
    let path = dir.file("data");
    random_file(&path, LEN, 41);
    let region = map_writable(&path, LEN, "lru", FaultService::HandlerThreads);
    let handle = region.share_handle().unwrap();
    drop(handle.open().unwrap());
    // Claimed and let go: the parent closed its pending descriptor.
    eventually("the region is paged again", || region.stats().resumes == 1);
    let n = handle.lease.as_ref().unwrap().fd;
    let (victim, file, dup) = unrelated_file_at(&dir, n);
    // The same handle opened again (the same pickle loaded twice).
    let again = handle.open();
    if let Some(dup) = dup {
        // SAFETY: the descriptor made by `unrelated_file_at`, closed once.
        unsafe { libc::close(dup) };
    }
    drop(file);
    assert!(
        written_bytes(&victim).is_empty(),
        "an unrelated file was written"
    );
    assert!(
        matches!(
            again,
            Err(HandleError::Lease(ClaimError::Used | ClaimError::Paged(_)))
        ),
        "{again:?}"
    );
    assert!(!region.stats().shared);
    region.unmap().unwrap();
}

#[test]
fn a_handle_opened_after_its_region_was_unmapped_maps_the_file() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("handle-late");
    let path = dir.file("data");
    let data = random_file(&path, LEN, 42);
    let region = map_writable(&path, LEN, "lru", FaultService::HandlerThreads);
    let handle = region.share_handle().unwrap();
    region.unmap().unwrap();
    let n = handle.lease.as_ref().unwrap().fd;
    let (victim, file, dup) = unrelated_file_at(&dir, n);
    // The worker opens it: the file's mapping is all it needs now.
    let mapping = handle.open().unwrap();
    if let Some(dup) = dup {
        // SAFETY: the descriptor made by `unrelated_file_at`, closed once.
        unsafe { libc::close(dup) };
    }
    drop(file);
    assert!(
        written_bytes(&victim).is_empty(),
        "an unrelated file was written"
    );
    // SAFETY: the mapping is `mapping.len()` bytes while `mapping` lives.
    let seen = unsafe { std::slice::from_raw_parts(mapping.as_ptr(), mapping.len()) };
    assert_eq!(diff(seen, &data), 0);
}

#[test]
fn a_handle_naming_another_files_descriptor_writes_nothing_there() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new("handle-forged");
    let path = dir.file("data");
    random_file(&path, LEN, 43);
    let region = map_writable(&path, LEN, "lru", FaultService::HandlerThreads);
    let mut handle = region.share_handle().unwrap();
    // A ticket naming another descriptor of this live process.
    let (victim, file, _) = unrelated_file_at(&dir, -1);
    handle.lease.as_mut().unwrap().fd = file.as_raw_fd();
    let opened = handle.open();
    assert!(
        matches!(opened, Err(HandleError::Lease(ClaimError::Used))),
        "{opened:?}"
    );
    drop(file);
    assert!(
        written_bytes(&victim).is_empty(),
        "an unrelated file was written"
    );
    region.unmap().unwrap();
}
