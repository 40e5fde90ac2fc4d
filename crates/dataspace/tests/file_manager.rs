//! The file manager, operation by operation, on real files in a temp dir.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::{numbered_file, read, write};
use pagepilot_dataspace::{
    Access, AnonymousManager, CloseError, CopyError, CreateError, DataspaceId, DeleteError,
    FileManager, IdentifyError, Manager, NoSuch, OpenError, PAGE,
};

fn path_id(p: &std::path::Path) -> DataspaceId {
    DataspaceId::Path(p.into())
}

#[test]
fn test_file_identify_gives_path_length_and_inode() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 3);
    let who = FileManager.identify(&path_id(&p)).unwrap();
    assert_eq!(who.id, path_id(&p));
    assert_eq!(who.manager, "file");
    assert_eq!(who.len, 3 * PAGE as u64);
    assert_eq!(who.inode, Some(std::fs::metadata(&p).unwrap().ino()));
}

#[test]
fn test_file_identify_of_missing_file_or_directory_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nope");
    let e = FileManager.identify(&path_id(&p)).unwrap_err();
    assert!(
        matches!(&e, IdentifyError::NoSuch(NoSuch { id, .. }) if *id == path_id(&p)),
        "{e}"
    );
    assert!(e.to_string().contains("nope"), "{e}");
    let e = FileManager.identify(&path_id(dir.path())).unwrap_err();
    assert!(matches!(e, IdentifyError::NotAFile(_)), "{e}");
}

#[test]
fn test_file_open_read_only_reads_the_files_pages() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 3);
    let id = path_id(&p);
    let s = FileManager
        .open(&id, Access::ReadOnly, Some(2 * PAGE as u64))
        .unwrap();
    assert_eq!(s.size(), 3 * PAGE as u64);
    assert!(s.persistent());
    let (got, bytes) = read(s.as_ref(), 1, 2);
    assert_eq!(got, 2);
    assert!(bytes[..PAGE].iter().all(|&b| b == 2) && bytes[PAGE..].iter().all(|&b| b == 3));
    // Past the end: no pages.
    assert_eq!(read(s.as_ref(), 3, 1).0, 0);
    assert!(s.writable_file().is_none());
    FileManager.close(&id, s).unwrap();
}

#[test]
fn test_file_open_read_write_writes_pages_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 2);
    let id = path_id(&p);
    let s = FileManager.open(&id, Access::ReadWrite, None).unwrap();
    assert!(s.writable_file().is_some());
    write(s.as_ref(), 1, 1, 0xab);
    FileManager.close(&id, s).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    assert!(bytes[..PAGE].iter().all(|&b| b == 1));
    assert!(bytes[PAGE..].iter().all(|&b| b == 0xab));
}

#[test]
fn test_file_open_refusals_name_the_path_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let e = FileManager
        .open(&path_id(&missing), Access::ReadOnly, None)
        .unwrap_err();
    assert!(
        matches!(&e, OpenError::NoSuch(NoSuch { id, .. }) if *id == path_id(&missing)),
        "{e}"
    );
    assert!(e.to_string().contains("missing"), "{e}");

    let e = FileManager
        .open(&path_id(dir.path()), Access::ReadOnly, None)
        .unwrap_err();
    assert!(
        matches!(&e, OpenError::NotAFile(p) if p == dir.path()),
        "{e}"
    );

    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let e = FileManager
        .open(&path_id(&empty), Access::ReadOnly, None)
        .unwrap_err();
    assert!(matches!(&e, OpenError::Empty(p) if *p == empty), "{e}");

    let short = dir.path().join("short");
    numbered_file(&short, 3);
    let want = Some(4 * PAGE as u64);
    let e = FileManager
        .open(&path_id(&short), Access::ReadOnly, want)
        .unwrap_err();
    assert!(
        matches!(&e, OpenError::Short { id, actual, expected }
            if *id == path_id(&short) && *actual == 3 * PAGE as u64 && *expected == 4 * PAGE as u64),
        "{e}"
    );
    assert!(e.to_string().contains("short"), "{e}");
}

#[test]
fn test_file_open_read_write_of_a_read_only_file_is_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ro");
    numbered_file(&p, 1);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    let e = FileManager
        .open(&path_id(&p), Access::ReadWrite, None)
        .unwrap_err();
    assert!(matches!(&e, OpenError::ReadOnly(x) if *x == p), "{e}");
    let s = FileManager
        .open(&path_id(&p), Access::ReadOnly, None)
        .unwrap();
    FileManager.close(&path_id(&p), s).unwrap();
}

#[test]
fn test_file_close_refuses_a_store_another_manager_opened() {
    let dir = tempfile::tempdir().unwrap();
    let anon = AnonymousManager::new(dir.path());
    let a = anon.create(None, PAGE as u64).unwrap();
    let s = anon.open(&a, Access::ReadWrite, None).unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 1);
    let e = FileManager.close(&path_id(&p), s).unwrap_err();
    assert!(
        matches!(
            e,
            CloseError::Foreign {
                manager: "file",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn test_file_create_makes_a_sparse_file_of_the_length_and_refuses_a_taken_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new");
    let id = FileManager.create(Some(&p), 5 * PAGE as u64).unwrap();
    assert_eq!(id, path_id(&p));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 5 * PAGE as u64);
    let s = FileManager.open(&id, Access::ReadOnly, None).unwrap();
    assert!(read(s.as_ref(), 4, 1).1.iter().all(|&b| b == 0));
    let e = FileManager.create(Some(&p), PAGE as u64).unwrap_err();
    assert!(matches!(&e, CreateError::Exists(x) if *x == p), "{e}");
    let e = FileManager.create(None, PAGE as u64).unwrap_err();
    assert!(matches!(e, CreateError::BadName { .. }), "{e}");
    let e = FileManager
        .create(Some(&dir.path().join("zero")), 0)
        .unwrap_err();
    assert!(matches!(e, CreateError::Empty { .. }), "{e}");
}

#[test]
fn test_file_delete_unlinks_while_an_open_store_keeps_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 2);
    let id = path_id(&p);
    let s = FileManager.open(&id, Access::ReadOnly, None).unwrap();
    FileManager.delete(&id).unwrap();
    assert!(!p.exists());
    assert!(read(s.as_ref(), 1, 1).1.iter().all(|&b| b == 2));
    let e = FileManager.delete(&id).unwrap_err();
    assert!(
        matches!(&e, DeleteError::NoSuch(NoSuch { id: x, .. }) if *x == id),
        "{e}"
    );
}

#[test]
fn test_file_copy_has_the_same_bytes_in_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let (p, q) = (dir.path().join("f"), dir.path().join("g"));
    numbered_file(&p, 3);
    let copy = FileManager.copy(&path_id(&p), Some(&q)).unwrap();
    assert_eq!(copy, path_id(&q));
    assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&q).unwrap());
    let (a, b) = (
        FileManager.identify(&path_id(&p)),
        FileManager.identify(&copy),
    );
    assert_ne!(a.unwrap().inode, b.unwrap().inode);
    let e = FileManager.copy(&path_id(&p), Some(&q)).unwrap_err();
    assert!(
        matches!(&e, CopyError::Create(CreateError::Exists(x)) if *x == q),
        "{e}"
    );
    let missing = path_id(&dir.path().join("missing"));
    let e = FileManager
        .copy(&missing, Some(&dir.path().join("h")))
        .unwrap_err();
    assert!(matches!(e, CopyError::NoSuch(NoSuch { .. })), "{e}");
}

#[test]
fn test_file_share_hands_out_a_descriptor_of_the_same_file_with_the_access() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 1);
    let id = path_id(&p);
    let ro = FileManager.share(&id, Access::ReadOnly).unwrap();
    assert_eq!(
        ro.handle.metadata().unwrap().ino(),
        std::fs::metadata(&p).unwrap().ino()
    );
    assert!(
        (&ro.handle).write_all(b"x").is_err(),
        "read-only share wrote"
    );
    let rw = FileManager.share(&id, Access::ReadWrite).unwrap();
    (&rw.handle).write_all(b"x").unwrap();
    assert_eq!(std::fs::read(&p).unwrap()[0], b'x');
}

#[test]
fn test_file_manager_has_no_anonymous_dataspaces() {
    let id = DataspaceId::Anonymous(0);
    let e = FileManager.open(&id, Access::ReadOnly, None).unwrap_err();
    assert!(
        matches!(
            e,
            OpenError::NoSuch(NoSuch {
                manager: "file",
                ..
            })
        ),
        "{e}"
    );
    assert!(FileManager.identify(&id).is_err());
}

/// `fill` moves cached pages into a frames file at the frames' offset,
/// zeroes the last page past the end of file whatever the frame held, and
/// declines pages the page cache does not hold (read with O_DIRECT then).
#[test]
fn test_file_fill_splices_cached_pages_into_frames_and_zeroes_past_the_end() {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 3);
    // A file ending 100 bytes into its fourth page.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(&[9u8; 100])
        .unwrap();
    let id = path_id(&p);
    let s = FileManager.open(&id, Access::ReadOnly, None).unwrap();
    // Into the page cache.
    std::fs::read(&p).unwrap();
    let mut frames = tempfile::tempfile().unwrap();
    // Stale bytes in every frame: a refilled frame must not show them.
    frames.write_all(&[0xee; 6 * PAGE]).unwrap();
    let filled = s.fill(1, 4, frames.as_fd(), 2 * PAGE as u64);
    match filled {
        Some(Ok(pages)) => assert_eq!(pages, 3, "pages 1, 2 and the partial page 3"),
        Some(Err(e)) => panic!("fill failed: {e}"),
        None => {
            // A page cache the kernel cannot report on (no cachestat):
            // nothing to check but the refusal.
            assert!(s.direct(), "a buffered store always fills from the cache");
            return;
        }
    }
    let mut back = vec![0u8; 6 * PAGE];
    frames.seek(SeekFrom::Start(0)).unwrap();
    frames.read_exact(&mut back).unwrap();
    assert!(
        back[..2 * PAGE].iter().all(|&b| b == 0xee),
        "frames before the offset untouched"
    );
    assert!(back[2 * PAGE..3 * PAGE].iter().all(|&b| b == 2), "page 1");
    assert!(back[3 * PAGE..4 * PAGE].iter().all(|&b| b == 3), "page 2");
    assert!(
        back[4 * PAGE..4 * PAGE + 100].iter().all(|&b| b == 9),
        "page 3's bytes"
    );
    assert!(
        back[4 * PAGE + 100..5 * PAGE].iter().all(|&b| b == 0),
        "page 3 past the end of file: zero"
    );
    assert!(
        back[5 * PAGE..].iter().all(|&b| b == 0xee),
        "no page past the file"
    );
    // Out of the page cache: declined (read with O_DIRECT instead).
    let file = std::fs::File::open(&p).unwrap();
    // Written back first: dirty pages stay cached.
    file.sync_all().unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: fadvise on an open descriptor; no memory is passed.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert!(
        s.fill(0, 3, frames.as_fd(), 0).is_none(),
        "pages not in the page cache are left to `read`"
    );
    FileManager.close(&id, s).unwrap();
}

/// A child forked by a thread that has filled frames keeps filling through a
/// pipe of its own: the thread's pipe inherited from the parent is not used
/// by both processes at once (one would take the other's pages, or wait
/// forever for pages the other took). Parent and child each fill their own
/// page, many times, at the same time, and check every byte.
#[test]
fn test_file_fill_in_a_forked_child_does_not_share_the_parents_pipe() {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::fd::AsFd;
    const ROUNDS: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    numbered_file(&p, 64);
    std::fs::read(&p).unwrap();
    let id = path_id(&p);
    let s = FileManager.open(&id, Access::ReadOnly, None).unwrap();
    // Fills pages `first..first + 16` into a frames file `ROUNDS` times,
    // checking them each time: the first wrong page, or none.
    let fill_and_check = move |first: usize| -> Result<(), String> {
        let mut frames = tempfile::tempfile().map_err(|e| e.to_string())?;
        let mut back = vec![0u8; 16 * PAGE];
        for round in 0..ROUNDS {
            match s.fill(first, 16, frames.as_fd(), 0) {
                Some(Ok(16)) => {}
                other => return Err(format!("round {round}: fill gave {other:?}")),
            }
            frames.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
            frames.read_exact(&mut back).map_err(|e| e.to_string())?;
            for (k, page) in back.chunks(PAGE).enumerate() {
                let want = (first + k + 1) as u8;
                if let Some(b) = page.iter().find(|&&b| b != want) {
                    return Err(format!("round {round}: page {} holds {b}", first + k));
                }
            }
        }
        Ok(())
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // One thread makes its pipe, forks and goes on with it; the child is a
    // copy of this thread. Not scoped: a hang must fail the test, not hold it.
    std::thread::spawn(move || {
        let made = fill_and_check(0);
        // SAFETY: the child only fills and checks (its own allocations
        // under glibc's fork-reset allocator), then leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = match fill_and_check(32) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("child: {e}");
                    1
                }
            };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let parent = made.and_then(|()| fill_and_check(0));
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let _ = tx.send((parent, status));
    });
    let (parent, status) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("parent and child filled within a minute (a hang shares a pipe)");
    parent.expect("the parent's fills");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's fills failed (status {status:#x})"
    );
}
