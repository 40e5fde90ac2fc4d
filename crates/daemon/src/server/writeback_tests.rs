//! The write-back of one region, on memfds and a temporary backing file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicU64;

use pagepilot_protocol::DirtyMap;
use rustix::fs::{memfd_create, MemfdFlags};

use super::*;

fn memfd(len: u64) -> File {
    let f = File::from(memfd_create("test", MemfdFlags::CLOEXEC).unwrap());
    f.set_len(len).unwrap();
    f
}

/// A dirty map file of `pages` pages with `dirty` marked.
fn dirty_file(pages: u64, dirty: &[u64]) -> File {
    let words: Vec<AtomicU64> = (0..DirtyMap::bytes_for(pages) / 8)
        .map(|_| AtomicU64::new(0))
        .collect();
    let map = DirtyMap::init(&words, pages).unwrap();
    for &p in dirty {
        map.set(p, true);
    }
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes())
        .collect();
    let f = memfd(0);
    f.write_all_at(&bytes, 0).unwrap();
    f
}

fn backing(len: u64) -> File {
    let f = tempfile::tempfile().unwrap();
    f.write_all_at(&vec![0xEE; len as usize], 0).unwrap();
    f
}

fn page_of(f: &File, page: u64) -> Vec<u8> {
    let mut buf = vec![0u8; PAGE as usize];
    let n = read_at_most(f, &mut buf, page * PAGE).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn dirty_pages_with_data_are_written_and_holes_and_clean_pages_are_not() {
    let memory = memfd(8 * PAGE);
    for p in [1u64, 2, 3, 5, 6] {
        memory
            .write_all_at(&vec![p as u8; PAGE as usize], p * PAGE)
            .unwrap();
    }
    // 4 is dirty but a hole (written back and freed); 6 has data but is
    // clean.
    let fds = RegionFds {
        memory: Some(memory),
        backing: Some(backing(8 * PAGE)),
        dirty: Some(dirty_file(8, &[1, 2, 3, 4, 5])),
    };
    let w = write_back(&fds).unwrap();
    assert_eq!((w.written, w.holes, w.beyond_end, w.failed), (4, 1, 0, 0));
    let b = fds.backing.as_ref().unwrap();
    for p in 0..8u64 {
        let want = if (1..=5).contains(&p) && p != 4 {
            p as u8
        } else {
            0xEE
        };
        assert!(page_of(b, p).iter().all(|&x| x == want), "page {p}");
    }
}

#[test]
fn a_partial_last_page_is_cut_at_the_file_end_and_pages_past_it_are_skipped() {
    let memory = memfd(4 * PAGE);
    memory
        .write_all_at(&vec![7u8; 4 * PAGE as usize], 0)
        .unwrap();
    let fds = RegionFds {
        memory: Some(memory),
        backing: Some(backing(PAGE + 100)),
        dirty: Some(dirty_file(4, &[1, 2, 3])),
    };
    let w = write_back(&fds).unwrap();
    assert_eq!((w.written, w.beyond_end), (1, 2));
    let b = fds.backing.as_ref().unwrap();
    assert_eq!(b.metadata().unwrap().len(), PAGE + 100, "never grown");
    assert_eq!(page_of(b, 1), vec![7u8; 100]);
}

#[test]
fn long_runs_are_split_and_every_page_arrives() {
    let pages = 3 * RUN_PAGES + 17;
    let memory = memfd(pages * PAGE);
    for p in 0..pages {
        memory
            .write_all_at(&(p as u32).to_le_bytes(), p * PAGE)
            .unwrap();
    }
    let all: Vec<u64> = (0..pages).collect();
    let fds = RegionFds {
        memory: Some(memory),
        backing: Some(backing(pages * PAGE)),
        dirty: Some(dirty_file(pages, &all)),
    };
    assert_eq!(write_back(&fds).unwrap().written, pages);
    let b = fds.backing.as_ref().unwrap();
    for p in 0..pages {
        assert_eq!(page_of(b, p)[..4], (p as u32).to_le_bytes(), "page {p}");
    }
}

#[test]
fn a_dirty_map_shrunk_below_what_its_header_claims_is_refused_whole() {
    let memory = memfd(200 * PAGE);
    memory
        .write_all_at(&vec![1u8; 200 * PAGE as usize], 0)
        .unwrap();
    let dirty = dirty_file(200, &[0, 150]);
    // Cut after the first bitmap word (pages 0..64).
    dirty.set_len(24).unwrap();
    let fds = RegionFds {
        memory: Some(memory),
        backing: Some(backing(200 * PAGE)),
        dirty: Some(dirty),
    };
    // The header now claims more than the file holds: nothing is guessed.
    assert!(matches!(
        write_back(&fds),
        Err(WriteBackError::Dirty(FilesError::DirtyMap(_)))
    ));
}

#[test]
fn a_region_without_a_dirty_map_cannot_be_written_back() {
    let fds = RegionFds {
        memory: Some(memfd(PAGE)),
        backing: Some(backing(PAGE)),
        dirty: None,
    };
    assert!(!fds.can_write_back());
    assert!(matches!(
        write_back(&fds),
        Err(WriteBackError::Missing("dirty"))
    ));
}
