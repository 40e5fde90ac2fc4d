//! The hung FUSE file of `live::fuse`: it answers until told to hang,
//! then every call on it that asks the server blocks until the mount is
//! aborted, and no longer. These are checks of the harness the daemon's
//! tests rely on, and a record of what the kernel asks the server for the
//! calls the daemon makes on descriptors clients pass.

mod live;

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use live::fuse::HungFs;
use live::{PAGE, WAIT};

/// How long a call must stay blocked to count as blocked. A liveness
/// check (the call did not return), not a claim about speed.
const BLOCKED: Duration = Duration::from_millis(300);

/// Waits (bounded by [`WAIT`]) until `fs` has left `n` requests
/// unanswered; the count then.
fn unanswered_at_least(fs: &HungFs, n: u64) -> u64 {
    let start = Instant::now();
    while fs.requests_unanswered() < n && start.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    fs.requests_unanswered()
}

#[test]
fn a_hung_fuse_file_blocks_fstat_until_the_mount_is_aborted() {
    let fs = HungFs::mount(4 * PAGE).expect("mount a FUSE file system (root and /dev/fuse needed)");
    let file = fs.open_rw();
    file.write_all_at(b"pagepilot", 100).unwrap();
    let mut back = [0u8; 9];
    file.read_exact_at(&mut back, 100).unwrap();
    assert_eq!(&back, b"pagepilot");
    assert_eq!(fs.requests_unanswered(), 0);

    fs.hang();
    let (tx, rx) = mpsc::channel();
    let fstat = std::thread::spawn(move || {
        let _ = tx.send(file.metadata().map(|m| m.len()));
        // `file` is closed here, after the abort: its FLUSH fails at once.
    });
    match rx.recv_timeout(BLOCKED) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("fstat of a hung FUSE file returned: {other:?}"),
    }
    assert!(unanswered_at_least(&fs, 1) >= 1, "the server was not asked");

    drop(fs);
    let after_abort = rx
        .recv_timeout(WAIT)
        .expect("fstat still blocked 10 s after the mount was aborted");
    assert!(
        after_abort.is_err(),
        "fstat of an aborted mount succeeded: {after_abort:?}"
    );
    fstat.join().unwrap();
}

#[test]
fn set_len_and_pwrite_reach_the_server_while_it_answers() {
    let fs = HungFs::mount(PAGE).expect("mount a FUSE file system (root and /dev/fuse needed)");
    let file = fs.open_rw();
    assert_eq!(file.metadata().unwrap().len(), PAGE);

    let len = 3 * PAGE + 10;
    file.set_len(len).unwrap();
    assert_eq!(fs.contents().len() as u64, len);
    assert_eq!(file.metadata().unwrap().len(), len, "fstat asks the server");

    // Two pages' worth across page boundaries, in one pwrite.
    let at = PAGE - 100;
    let data: Vec<u8> = (0..2 * PAGE).map(|i| (i % 251) as u8 + 1).collect();
    file.write_all_at(&data, at).unwrap();
    file.sync_data().unwrap();
    let held = fs.contents();
    assert_eq!(held.len() as u64, len);
    assert_eq!(&held[at as usize..][..data.len()], &data[..]);
    assert!(held[..at as usize].iter().all(|&b| b == 0));
    assert!(held[at as usize + data.len()..].iter().all(|&b| b == 0));

    let mut back = vec![0u8; data.len()];
    file.read_exact_at(&mut back, at).unwrap();
    assert_eq!(back, data);

    file.set_len(PAGE / 2).unwrap();
    assert_eq!(fs.contents(), held[..PAGE as usize / 2]);
    assert_eq!(file.metadata().unwrap().len(), PAGE / 2);
    assert_eq!(fs.requests_unanswered(), 0);
}

/// A call the daemon makes on a client's descriptor.
type Call = fn(&File) -> io::Result<()>;

/// Runs `call` on the file of a hung mount in a thread: it must stay
/// blocked, having asked the server, until the mount is aborted, then
/// fail. What it asked.
fn blocked_until_abort(call: Call) -> Vec<&'static str> {
    let fs = HungFs::mount(4 * PAGE).expect("mount a FUSE file system (root and /dev/fuse needed)");
    let file = Arc::new(fs.open_rw());
    fs.hang();
    let (tx, rx) = mpsc::channel();
    let caller = std::thread::spawn({
        let file = Arc::clone(&file);
        move || {
            let _ = tx.send(call(&file));
        }
    });
    match rx.recv_timeout(BLOCKED) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("a call on a hung FUSE file returned: {other:?}"),
    }
    unanswered_at_least(&fs, 1);
    let asked = fs.unanswered();
    drop(fs);
    let after_abort = rx
        .recv_timeout(WAIT)
        .expect("still blocked 10 s after the mount was aborted");
    assert!(after_abort.is_err(), "succeeded on an aborted mount");
    caller.join().unwrap();
    asked
}

#[test]
fn fstat_pread_pwrite_and_fdatasync_each_wait_for_the_server() {
    let fstat: Call = |f| rustix::fs::fstat(f).map(drop).map_err(io::Error::from);
    let pread: Call = |f| f.read_at(&mut [0u8; 4096], 0).map(drop);
    let pwrite: Call = |f| f.write_at(&[7u8; 4096], 0).map(drop);
    let fdatasync: Call = |f| f.sync_data();
    assert_eq!(blocked_until_abort(fstat), ["GETATTR"]);
    assert_eq!(blocked_until_abort(pread), ["READ"]);
    assert_eq!(blocked_until_abort(pwrite), ["WRITE"]);
    assert_eq!(blocked_until_abort(fdatasync), ["FSYNC"]);
}

#[test]
fn fcntl_getfl_does_not_ask_the_hung_server() {
    let fs = HungFs::mount(PAGE).expect("mount a FUSE file system (root and /dev/fuse needed)");
    let file = fs.open_rw();
    fs.hang();
    let flags = rustix::fs::fcntl_getfl(&file).unwrap();
    assert!(flags.contains(rustix::fs::OFlags::RDWR));
    assert_eq!(fs.requests_unanswered(), 0);
    drop(fs);
    // Closed after the abort: a FLUSH to the hung server would block.
    drop(file);
}
