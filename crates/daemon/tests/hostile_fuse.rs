//! A root daemon and a backing file on a file system that never answers
//! (a FUSE server that stops, as a hung network file system does): the
//! user who passes it is refused in time and bounded in the checks it may
//! leave stuck; every other client is served meanwhile. Its own test
//! binary: a process holding a file of a hung mount cannot start a child
//! (`exec` closes the file, and the close waits for an answer).

mod live;

use std::time::Duration;

use live::fuse::HungFs;
use live::users::{ATTACKER, VICTIM};
use live::*;
use pagepilot_protocol::{ErrorCode, Message};

const SHARED: &str = "
[machine]
budget_frames = 16384

[default]
frames = 2048
";

#[test]
fn a_backing_file_that_never_answers_does_not_stall_other_clients() {
    // Declared before the mount, so dropped after it even when an
    // assertion fails: closing a file of a hung mount waits for its FLUSH.
    let (hung, files, daemon, mut more);
    let fs = HungFs::mount(8 * 4096).expect("a FUSE mount (root, /dev/fuse)");
    hung = fs.open_rw();
    daemon = Daemon::start_with(SHARED, |o| o.check_timeout = Duration::from_millis(500));
    let mut attacker = daemon.client_as(ATTACKER);
    let mut victim = daemon.client_as(VICTIM);
    fs.hang();
    // The check waits for the file system on a thread of its own; the
    // victim is served meanwhile, and the attacker told in time.
    files = RegionFilesOnDisk::over(4, &hung);
    let fds = files.fds().map(std::os::fd::AsFd::as_fd);
    attacker.conn.send(&files.register(1, 1, 4), &fds).unwrap();
    assert!(matches!(
        victim.request(&Message::Status),
        Message::StatusReply(_)
    ));
    assert!(registered(&victim.register(1, 1, 4)));
    let refused = attacker.reply();
    assert_eq!(code(&refused), ErrorCode::BadFiles);
    assert!(
        error(&refused).message.contains("could not be checked"),
        "{refused:?}"
    );
    assert!(
        fs.requests_unanswered() >= 1,
        "the daemon did ask the file system"
    );
    // Stuck checks are bounded per user.
    more = Vec::new();
    let mut refusals = Vec::new();
    for id in 2..8 {
        // Kept by `more` before anything can fail.
        more.push(RegionFilesOnDisk::over(4, &hung));
        let files = &more[more.len() - 1];
        refusals.push(attacker.request_with(&files.register(id, 1, 4), &files.fds()));
    }
    assert!(
        refusals
            .iter()
            .any(|m| error(m).message.contains("have not returned")),
        "{refusals:?}"
    );
    assert!(matches!(
        victim.request(&Message::Status),
        Message::StatusReply(_)
    ));
    // Dropping the mount aborts it: the stuck threads return.
    drop(fs);
}
