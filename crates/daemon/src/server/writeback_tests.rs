//! The write-back of one region, on memfds and a temporary backing file;
//! the checks of a region's descriptors that the write-back relies on.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use std::time::Duration;

use pagepilot_protocol::{DirtyMap, RegionFiles, DIRTY_MAGIC};
use rustix::fs::{memfd_create, MemfdFlags};

use super::super::files::{check, MAX_DIRTY_BYTES};
use super::*;

/// A deadline no test reaches.
fn later() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

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
    let w = write_back(&fds, later()).unwrap();
    assert_eq!((w.written, w.failed, w.past_end), (4, 0, 0));
    // Two extents, [1, 4) and [5, 7): one map word read for each.
    assert_eq!((w.extents, w.map_bytes_read), (2, 16));
    assert!(w.is_complete());
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
    let w = write_back(&fds, later()).unwrap();
    assert_eq!((w.written, w.considered, w.past_end), (1, 2, 2));
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
    assert_eq!(write_back(&fds, later()).unwrap().written, pages);
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
        write_back(&fds, later()),
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
        write_back(&fds, later()),
        Err(WriteBackError::Missing("dirty"))
    ));
}

/// The largest map a registration accepts: [`MAX_DIRTY_BYTES`] with
/// every bit set (every page of a 32 TiB region but the last 128 dirty),
/// in a memfd written 1 MiB at a time. Built once, shared by the tests
/// (each takes a descriptor of its own on the same memfd).
fn full_map() -> File {
    static MAP: OnceLock<File> = OnceLock::new();
    let map = MAP.get_or_init(|| {
        let pages = (MAX_DIRTY_BYTES - 16) * 8;
        let f = memfd(0);
        let mut chunk = vec![0xFFu8; 1 << 20];
        chunk[..8].copy_from_slice(&DIRTY_MAGIC.to_le_bytes());
        chunk[8..16].copy_from_slice(&pages.to_le_bytes());
        f.write_all_at(&chunk, 0).unwrap();
        chunk[..16].fill(0xFF);
        for i in 1..MAX_DIRTY_BYTES >> 20 {
            f.write_all_at(&chunk, i << 20).unwrap();
        }
        assert_eq!(f.metadata().unwrap().len(), MAX_DIRTY_BYTES);
        f
    });
    map.try_clone().unwrap()
}

const TIB: u64 = 1 << 40;

/// A sparse memfd of 32 TiB with one page of data at each of `pages`
/// (filled with bytes of the page's number).
fn sparse_memory(pages: &[u64]) -> File {
    let memory = memfd(32 * TIB);
    for &p in pages {
        memory.write_all_at(&stamp(p), p * PAGE).unwrap();
    }
    memory
}

/// A page's bytes as [`sparse_memory`] writes them.
fn stamp(page: u64) -> Vec<u8> {
    page.to_le_bytes().repeat(PAGE as usize / 8)
}

/// Checks `fds` as a registration of all three would.
fn checked(memory: File, backing: File, dirty: File) -> Result<RegionFds, FilesError> {
    let all = RegionFiles {
        memory: true,
        backing: true,
        dirty: true,
    };
    check(all, vec![memory.into(), backing.into(), dirty.into()])
}

#[test]
fn a_full_map_over_a_sparse_32_tib_memfd_reads_only_the_words_over_its_data() {
    // A backing file of 4 MiB (1024 pages): 3, 700 and 1023 are below its
    // end; 5000 and 2^32 + 5 have data but are past it.
    let data = [3, 700, 1023, 5000, (1 << 32) + 5];
    let fds = checked(sparse_memory(&data), backing(1024 * PAGE), full_map()).unwrap();
    let w = write_back(&fds, later()).unwrap();
    assert!(w.is_complete(), "{w:?}");
    assert_eq!((w.written, w.failed), (3, 0));
    assert_eq!(w.considered, 1024);
    assert_eq!(w.past_end, (MAX_DIRTY_BYTES - 16) * 8 - 1024);
    // Three extents below the end, a word of the map for each: not 1 GiB.
    assert_eq!(w.extents, 3);
    assert_eq!(w.map_bytes_read, 3 * 8);
    let b = fds.backing.as_ref().unwrap();
    assert_eq!(b.metadata().unwrap().len(), 1024 * PAGE, "never grown");
    for p in 0..1024 {
        let want = match p {
            3 | 700 | 1023 => stamp(p),
            _ => vec![0xEE; PAGE as usize],
        };
        assert!(page_of(b, p) == want, "page {p}");
    }
}

/// A sparse file of 32 TiB in the temporary directory or, if its file
/// system refuses that, in `/dev/shm` (tmpfs); else the largest of
/// 16 TiB - 4 KiB (ext4's limit) or 8 TiB the temporary directory takes.
fn huge_sparse_backing() -> (tempfile::TempDir, File, u64) {
    let tries = [
        (std::env::temp_dir(), 32 * TIB),
        ("/dev/shm".into(), 32 * TIB),
        (std::env::temp_dir(), 16 * TIB - PAGE),
        (std::env::temp_dir(), 8 * TIB),
    ];
    for (dir, len) in tries {
        let Ok(dir) = tempfile::tempdir_in(&dir) else {
            continue;
        };
        let path = dir.path().join("backing");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        if f.set_len(len).is_ok() {
            eprintln!("sparse backing file of {len} bytes at {}", path.display());
            return (dir, f, len);
        }
    }
    panic!("no file system here takes a sparse file of 8 TiB");
}

#[test]
fn a_full_map_over_sparse_32_tib_memory_and_backing_writes_only_the_pages_with_data() {
    let (_dir, backing, len) = huge_sparse_backing();
    let end = len / PAGE;
    let data = [3, 1 << 20, end / 2 + 1, end - 200];
    let fds = checked(sparse_memory(&data), backing, full_map()).unwrap();
    let w = write_back(&fds, later()).unwrap();
    assert!(w.is_complete(), "{w:?}");
    assert_eq!(w.written, 4);
    assert_eq!(w.considered, end.min((MAX_DIRTY_BYTES - 16) * 8));
    assert_eq!((w.extents, w.map_bytes_read), (4, 4 * 8));
    let b = fds.backing.as_ref().unwrap();
    assert_eq!(b.metadata().unwrap().len(), len, "never grown");
    for p in data {
        assert!(page_of(b, p) == stamp(p), "page {p}");
    }
    for p in [0, 4, (1 << 20) + 1, end - 1] {
        assert!(page_of(b, p).iter().all(|&x| x == 0), "page {p}");
    }
}

#[test]
fn a_deadline_already_past_writes_nothing_and_counts_what_it_left() {
    // Data in pages 0..8 and at 1_000_000; dirty: 1, 2, 5 and 1_000_000.
    let pages = 1_000_064;
    let region = || {
        let memory = memfd(pages * PAGE);
        memory
            .write_all_at(&vec![9u8; 8 * PAGE as usize], 0)
            .unwrap();
        memory
            .write_all_at(&vec![9u8; PAGE as usize], 1_000_000 * PAGE)
            .unwrap();
        let backing = tempfile::tempfile().unwrap();
        backing.set_len(pages * PAGE).unwrap();
        RegionFds {
            memory: Some(memory),
            backing: Some(backing),
            dirty: Some(dirty_file(pages, &[1, 2, 5, 1_000_000])),
        }
    };
    let fds = region();
    let w = write_back(&fds, Instant::now()).unwrap();
    assert!(w.out_of_time && !w.is_complete());
    assert_eq!((w.written, w.failed), (0, 0));
    // The first extent's dirty pages were found, none written; the rest
    // of the region was not looked at.
    assert_eq!((w.left, w.unexamined), (3, pages - 8));
    let b = fds.backing.as_ref().unwrap();
    for p in [1, 2, 5, 1_000_000] {
        assert!(page_of(b, p).iter().all(|&x| x == 0), "page {p}");
    }
    // The same region with time to spare is written whole.
    let fds = region();
    let w = write_back(&fds, later()).unwrap();
    assert!(w.is_complete(), "{w:?}");
    assert_eq!((w.written, w.left, w.unexamined, w.extents), (4, 0, 0, 2));
}

#[test]
fn a_map_read_in_small_windows_yields_the_dirty_pages_of_the_range_asked() {
    let dirty: Vec<u64> = vec![0, 69, 70, 127, 128, 300, 511, 512, 899, 900, 999];
    let file = dirty_file(1000, &dirty);
    let mut map = DirtyFile::open(&file).unwrap().with_window(2);
    let (mut found, mut windows, mut page) = (Vec::new(), 0, 70);
    while page < 900 {
        let window = map.window(page, 900).unwrap();
        found.extend(window.dirty_pages());
        page = window.end();
        windows += 1;
    }
    assert_eq!(found, vec![70, 127, 128, 300, 511, 512, 899]);
    // Words 1..15 (pages 64..960), two at a time.
    assert_eq!((windows, map.bytes_read), (7, 14 * 8));
}

/// A backing file of `len` bytes of 0xEE with `mode`.
fn backing_with_mode(len: u64, mode: u32) -> File {
    let f = backing(len);
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .unwrap();
    f
}

fn one_dirty_page() -> (File, File) {
    let memory = memfd(4 * PAGE);
    memory.write_all_at(&vec![1u8; PAGE as usize], 0).unwrap();
    (memory, dirty_file(4, &[0]))
}

#[test]
fn setuid_and_setgid_executable_backing_files_are_refused_at_registration() {
    for mode in [0o4644, 0o4755, 0o2674, 0o6755] {
        let (memory, dirty) = one_dirty_page();
        let err = checked(memory, backing_with_mode(4 * PAGE, mode), dirty).unwrap_err();
        assert!(
            matches!(err, FilesError::BackingPrivileged { mode: m } if m & 0o7777 == mode),
            "{mode:o}: {err}"
        );
    }
    // Setgid without group-execute marks mandatory locking: no privilege.
    let (memory, dirty) = one_dirty_page();
    let fds = checked(memory, backing_with_mode(4 * PAGE, 0o2664), dirty).unwrap();
    assert_eq!(write_back(&fds, later()).unwrap().written, 1);
}

#[test]
fn a_backing_file_made_setuid_after_registration_is_not_written_back() {
    for mode in [0o4666, 0o2676] {
        let (memory, dirty) = one_dirty_page();
        let fds = checked(memory, backing_with_mode(4 * PAGE, 0o666), dirty).unwrap();
        let b = fds.backing.as_ref().unwrap();
        b.set_permissions(std::fs::Permissions::from_mode(mode))
            .unwrap();
        let err = write_back(&fds, later()).unwrap_err();
        assert!(
            matches!(err, WriteBackError::Privileged { mode: m } if m & 0o7777 == mode),
            "{mode:o}: {err}"
        );
        assert!(page_of(b, 0).iter().all(|&x| x == 0xEE), "written");
        assert_eq!(b.metadata().unwrap().permissions().mode() & 0o7777, mode);
    }
}

#[test]
fn regular_files_as_memory_or_dirty_are_refused_as_not_memfds() {
    let (memory, dirty) = one_dirty_page();
    let on_disk = |f: &File| {
        let copy = tempfile::tempfile().unwrap();
        let mut bytes = vec![0u8; f.metadata().unwrap().len() as usize];
        f.read_exact_at(&mut bytes, 0).unwrap();
        copy.write_all_at(&bytes, 0).unwrap();
        copy
    };
    let err = checked(
        on_disk(&memory),
        backing(4 * PAGE),
        dirty.try_clone().unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            FilesError::NotMemfd {
                which: "memory",
                ..
            }
        ),
        "{err}"
    );
    let text = pagepilot_policy::chain(&err).to_string();
    assert!(
        text.starts_with(
            "the memory descriptor is not a memfd but a regular file (F_GET_SEALS failed): "
        ),
        "{text}"
    );
    let err = checked(
        memory.try_clone().unwrap(),
        backing(4 * PAGE),
        on_disk(&dirty),
    )
    .unwrap_err();
    assert!(
        matches!(err, FilesError::NotMemfd { which: "dirty", .. }),
        "{err}"
    );
    // The same bytes in memfds are accepted.
    checked(memory, backing(4 * PAGE), dirty).unwrap();
}

#[test]
fn memory_that_is_not_a_file_is_named_for_what_it_is() {
    let (_, dirty) = one_dirty_page();
    let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let socket = File::from(OwnedFd::from(socket));
    let err = checked(socket, backing(4 * PAGE), dirty).unwrap_err();
    assert!(
        err.to_string().contains("not a memfd but a socket"),
        "{err}"
    );
}
