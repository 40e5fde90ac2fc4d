//! Connections made by other users: a child process of the test binary,
//! switched to the uid and gid asked, connects to the daemon and hands the
//! connected socket back over `SCM_RIGHTS` before it exits. The daemon
//! names a connection by the credentials of the process that connected
//! (`SO_PEERCRED`), so the test speaks as that user from its own process.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use super::{is_child, spawn_role_as};

/// The attacker of the hostile-user tests.
pub const ATTACKER: u32 = 20001;
/// Their victim.
pub const VICTIM: u32 = 20002;

/// A stream connected to the daemon at `socket` by a process of `uid` and
/// primary group `gid` (no supplementary groups). `dir` must be searchable
/// by that user (the daemon's directory in these tests is).
pub fn connect_as(socket: &Path, dir: &Path, uid: u32, gid: u32) -> UnixStream {
    let handoff = dir.join(format!("handoff-{}-{uid}", std::process::id()));
    let _ = std::fs::remove_file(&handoff);
    let listener = UnixListener::bind(&handoff).unwrap();
    std::fs::set_permissions(
        &handoff,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    let mut child = spawn_role_as(
        "live::users::role_connect_as",
        uid,
        gid,
        &[
            ("PP_SOCKET", socket.to_str().unwrap()),
            ("PP_HANDOFF", handoff.to_str().unwrap()),
        ],
    );
    let (from_child, _) = listener.accept().unwrap();
    let fd = receive_fd(&from_child);
    assert!(child.wait().success(), "the connecting child failed");
    let _ = std::fs::remove_file(&handoff);
    UnixStream::from(fd)
}

/// The child's side: connect as this process's user, hand the socket over.
#[test]
fn role_connect_as() {
    if !is_child() {
        return;
    }
    let socket = std::env::var("PP_SOCKET").unwrap();
    let handoff = std::env::var("PP_HANDOFF").unwrap();
    let daemon = UnixStream::connect(socket).expect("connect to the daemon");
    let parent = UnixStream::connect(handoff).expect("connect to the test");
    let fds = [daemon.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    let iov = [std::io::IoSlice::new(b"s")];
    sendmsg(&parent, &iov, &mut control, SendFlags::empty()).expect("hand the socket over");
}

fn receive_fd(from: &UnixStream) -> OwnedFd {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [IoSliceMut::new(&mut byte)];
    recvmsg(from, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC).unwrap();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message {
            if let Some(fd) = fds.next() {
                return fd;
            }
        }
    }
    panic!("the child sent no descriptor");
}
