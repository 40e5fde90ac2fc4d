//! The daemon's side of a client's region, for tests that play it: reading
//! the dirty map a region shares, and writing back the dirty pages of a
//! client that died from its memfd to the backing file.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicU64;

use pagepilot_protocol::DirtyMap;

const PAGE: usize = 4096;

/// The pages marked dirty in the dirty map held by `fd` (read with
/// `read(2)`, which leaves holes unallocated), ascending.
pub fn dirty_pages(fd: RawFd) -> Vec<u64> {
    // A descriptor of its own, through /proc (the daemon got its own too).
    let bytes = std::fs::read(format!("/proc/self/fd/{fd}")).expect("read the dirty map");
    let words: Vec<AtomicU64> = bytes
        .chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    let map = DirtyMap::open(&words).expect("a dirty map");
    map.dirty_pages().collect()
}

/// Whether the memfd `fd` holds no data at `offset` (a punched frame):
/// `lseek(SEEK_DATA)` finds data only further on, or none.
pub fn is_hole(fd: RawFd, offset: u64) -> bool {
    // SAFETY: lseek on a descriptor the caller owns; no memory involved.
    let at = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_DATA) };
    at < 0 || at as u64 != offset
}

/// Writes back a dead client's region as the daemon does: every page the
/// dirty map `dirty` marks whose frame is still in the memfd `memory` (a
/// hole was written back and punched already) is copied to `backing`, cut
/// at the file's end. Returns the pages written.
pub fn write_back_dead_client(memory: &File, dirty: &File, backing: &File) -> usize {
    let file_len = backing.metadata().unwrap().len();
    let mut page = vec![0u8; PAGE];
    let mut written = 0;
    for p in dirty_pages(dirty.as_raw_fd()) {
        let off = p * PAGE as u64;
        if off >= file_len || is_hole(memory.as_raw_fd(), off) {
            continue;
        }
        memory.read_exact_at(&mut page, off).unwrap();
        let n = (file_len - off).min(PAGE as u64) as usize;
        backing.write_all_at(&page[..n], off).unwrap();
        written += 1;
    }
    written
}
