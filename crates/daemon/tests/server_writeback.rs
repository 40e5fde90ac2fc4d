//! A client that dies loses nothing the kernel would keep: the daemon
//! writes back the dirty pages of a region whose memory, backing file and
//! dirty map it holds, before it returns the region's frames. A region
//! the client unregisters itself is not written back (the client did it).

mod live;

use std::os::unix::fs::FileExt;
use std::path::Path;

use live::*;
use pagepilot_protocol::{Message, RegionId};

const CONFIG: &str = "[machine]\nbudget_frames = 64\n";

/// Pages of the region; the backing file ends in the middle of the last.
const PAGES: u64 = 8;
const BACKING_LEN: u64 = 7 * PAGE + 1000;

/// What the client does to its region: pages with data that are dirty
/// (1, 2, 3: one run; 7: cut at the file's end), dirty but a hole (5:
/// written back and freed already), data but clean (6).
fn touch(files: &RegionFilesOnDisk) {
    for page in [1, 2, 3, 6, 7] {
        files.fill(page, 0x10 + page as u8);
    }
    for page in [1, 2, 3, 5, 7] {
        files.mark_dirty(page);
    }
}

/// The backing file holds the dirty pages' bytes and nothing else changed.
fn check_backing(path: &Path) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(data.len() as u64, BACKING_LEN, "the file's length changed");
    for (i, chunk) in data.chunks(PAGE as usize).enumerate() {
        let want = match i {
            1 | 2 | 3 | 7 => 0x10 + i as u8,
            _ => 0xAA,
        };
        assert!(
            chunk.iter().all(|&b| b == want),
            "page {i}: {:#x}, expected {want:#x}",
            chunk[0]
        );
    }
}

/// A client of `daemon` with region 1 registered over a backing file of
/// 0xAA bytes, then touched.
fn registered_and_touched(daemon: &Daemon) -> (Client, RegionFilesOnDisk, std::path::PathBuf) {
    let backing = backing_file(daemon.dir.path(), "data", BACKING_LEN, 0xAA);
    let mut c = daemon.client();
    let files = RegionFilesOnDisk::new(PAGES, &backing);
    let reply = c.request_with(&files.register(1, 8, 8), &files.fds());
    assert!(matches!(reply, Message::Registered { .. }), "{reply:?}");
    touch(&files);
    (c, files, backing)
}

/// The child's side: registers a region with its three descriptors,
/// dirties it after registering (the map is read when the client dies,
/// not when it registers), reports, then waits to be killed.
#[test]
fn role_writer_killed() {
    if !is_child() {
        return;
    }
    let socket = std::env::var("PP_SOCKET").unwrap();
    let backing = std::env::var("PP_BACKING").unwrap();
    let mut c = Client::joined(socket.as_ref());
    let files = RegionFilesOnDisk::new(PAGES, backing.as_ref());
    let reply = c.request_with(&files.register(1, 8, 8), &files.fds());
    assert!(matches!(reply, Message::Registered { .. }), "{reply:?}");
    touch(&files);
    c.conn
        .send(
            &Message::Report {
                region: RegionId(1),
                faults: 42,
                postponed_faults: 0,
            },
            &[],
        )
        .unwrap();
    std::thread::sleep(WAIT);
}

#[test]
fn a_killed_clients_dirty_pages_are_written_back_before_its_frames_return() {
    let daemon = Daemon::start(CONFIG);
    let backing = backing_file(daemon.dir.path(), "data", BACKING_LEN, 0xAA);
    let mut child = spawn_role(
        "role_writer_killed",
        &[
            ("PP_SOCKET", daemon.socket.to_str().unwrap()),
            ("PP_BACKING", backing.to_str().unwrap()),
        ],
    );
    let pid = child.0.id();
    let s = daemon.until("the child's report", |s| {
        s.clients
            .iter()
            .any(|c| c.pid == pid && c.regions.iter().any(|r| r.faults_per_sec > 0))
    });
    assert_eq!(s.free_frames, 56);
    // Nothing is written while the client lives.
    assert!(std::fs::read(&backing).unwrap().iter().all(|&b| b == 0xAA));
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let s = daemon.until("the child to be gone", |s| {
        s.clients.iter().all(|c| c.pid != pid)
    });
    // Frames return only after the write-back: by now it is done.
    assert_eq!(s.free_frames, s.total_frames);
    check_backing(&backing);
}

#[test]
fn goodbye_with_regions_still_registered_writes_them_back_before_answering() {
    let daemon = Daemon::start(CONFIG);
    let (mut c, _files, backing) = registered_and_touched(&daemon);
    assert_eq!(c.request(&Message::Goodbye), Message::Goodbye);
    check_backing(&backing);
    assert_eq!(daemon.status().free_frames, 64);
}

#[test]
fn a_region_the_client_unregisters_is_not_written_back_by_the_daemon() {
    let daemon = Daemon::start(CONFIG);
    let (mut c, files, backing) = registered_and_touched(&daemon);
    let reply = c.request(&Message::UnregisterRegion {
        region: RegionId(1),
    });
    assert!(matches!(reply, Message::Unregistered { frames: 8, .. }));
    drop(c);
    daemon.until("the client to be gone", |s| s.clients.len() == 1);
    assert!(std::fs::read(&backing).unwrap().iter().all(|&b| b == 0xAA));
    // The daemon closed its copies: the memfd is the client's alone.
    let mut probe = [0u8; 1];
    files.memory.read_exact_at(&mut probe, PAGE).unwrap();
    assert_eq!(probe[0], 0x11);
}

#[test]
fn a_client_whose_connection_ends_while_its_process_runs_is_not_written_back() {
    let daemon = Daemon::start(CONFIG);
    let (c, _files, backing) = registered_and_touched(&daemon);
    // This process keeps running: its memory is its own, and a write-back
    // racing with its own could put an older page over a newer one.
    drop(c);
    let s = daemon.until("the client to be gone", |s| s.clients.len() == 1);
    assert_eq!(s.free_frames, 64);
    assert!(std::fs::read(&backing).unwrap().iter().all(|&b| b == 0xAA));
}
