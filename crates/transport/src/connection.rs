//! One end of a Unix stream socket speaking the daemon's protocol.

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use pagepilot_protocol::{encode, Decoder, Message, Peer, MAX_FDS};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{
    recvmsg, sendmsg, sockopt, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

use crate::TransportError;

/// The longest a send waits for a peer that does not read.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// Bytes read per `recvmsg`.
const READ_CHUNK: usize = 16 * 1024;

/// Descriptors one `recvmsg` can take: the kernel never merges the
/// descriptors of two `sendmsg` calls into one read, so one frame's worth
/// is enough; room for more lets a peer that sends too many be named.
const FDS_PER_READ: usize = 2 * MAX_FDS as usize;

/// Who is at the other end, as the kernel reports it (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// Its process (as of `connect`).
    pub pid: u32,
    /// Its user.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
}

/// A message received, with the descriptors its frame announced.
#[derive(Debug)]
pub struct Received {
    /// The message.
    pub message: Message,
    /// Its descriptors, in the order they were sent.
    pub fds: Vec<OwnedFd>,
}

/// What one non-blocking read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Bytes were read (frames may be ready: [`Connection::next_received`]).
    Read(usize),
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed the connection.
    Closed,
}

/// One end of a connection: the socket, a streaming decoder of what the
/// peer sends, and the descriptors received and not yet handed out.
#[derive(Debug)]
pub struct Connection {
    stream: UnixStream,
    decoder: Decoder,
    fds: VecDeque<OwnedFd>,
}

impl Connection {
    /// Connects to a daemon listening at `path` (blocking reads).
    pub fn connect(path: &Path) -> Result<Connection, TransportError> {
        let stream = UnixStream::connect(path)?;
        Ok(Connection::new(stream, Peer::Daemon))
    }

    /// Wraps a connected socket whose other end is `peer` (the daemon wraps
    /// each accepted connection with `Peer::Client`).
    pub fn new(stream: UnixStream, peer: Peer) -> Connection {
        Connection {
            stream,
            decoder: Decoder::from_peer(peer),
            fds: VecDeque::new(),
        }
    }

    /// The socket (to poll it, or set it non-blocking).
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// The peer's process, user and group, from the kernel.
    pub fn peer_credentials(&self) -> Result<Credentials, TransportError> {
        let cred = sockopt::socket_peercred(&self.stream).map_err(std::io::Error::from)?;
        Ok(Credentials {
            pid: cred.pid.as_raw_pid() as u32,
            uid: cred.uid.as_raw(),
            gid: cred.gid.as_raw(),
        })
    }

    /// Bytes of an unfinished frame received (nonzero when the peer stopped
    /// in the middle of one).
    pub fn pending(&self) -> usize {
        self.decoder.pending()
    }

    /// Descriptors received and not yet handed out with a frame. Once every
    /// whole frame is taken, an honest peer leaves at most those of the
    /// frame it is in the middle of; more, or any with no frame pending,
    /// came with frames that did not announce them (a daemon disconnects
    /// such a peer rather than keep its descriptors).
    pub fn queued_fds(&self) -> usize {
        self.fds.len()
    }

    /// Sends `message` with `fds` (as many as it announces) as one frame.
    /// On a non-blocking socket a full buffer is waited on, for at most
    /// [`SEND_TIMEOUT`] in all.
    pub fn send(&self, message: &Message, fds: &[BorrowedFd<'_>]) -> Result<(), TransportError> {
        if fds.len() != usize::from(message.fds()) {
            return Err(TransportError::WrongFdCount {
                kind: message.kind(),
                expected: message.fds(),
                given: fds.len(),
            });
        }
        let bytes = encode(message)?;
        let started = Instant::now();
        let mut sent = 0;
        while sent < bytes.len() {
            // The descriptors travel with the frame's first byte.
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if sent == 0 && !fds.is_empty() {
                control.push(SendAncillaryMessage::ScmRights(fds));
            }
            let iov = [IoSlice::new(&bytes[sent..])];
            match sendmsg(&self.stream, &iov, &mut control, SendFlags::NOSIGNAL) {
                Ok(n) => sent += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    let left = SEND_TIMEOUT.saturating_sub(started.elapsed());
                    if left.is_zero() || !wait_for(self.stream.as_fd(), PollFlags::OUT, left)? {
                        return Err(TransportError::SendTimeout(SEND_TIMEOUT));
                    }
                }
                Err(e) => return Err(std::io::Error::from(e).into()),
            }
        }
        Ok(())
    }

    /// One read of what the peer sent (non-blocking on a non-blocking
    /// socket); the frames it completes come from [`Self::next_received`].
    pub fn read_available(&mut self) -> Result<ReadOutcome, TransportError> {
        let mut buf = [0u8; READ_CHUNK];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_PER_READ))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let got = loop {
            match recvmsg(
                &self.stream,
                &mut iov,
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Ok(got) => break got,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Ok(ReadOutcome::WouldBlock),
                Err(e) => return Err(std::io::Error::from(e).into()),
            }
        };
        let mut fds = 0;
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                for fd in received {
                    fds += 1;
                    self.fds.push_back(fd);
                }
            }
        }
        if got.flags.contains(ReturnFlags::CTRUNC) || fds > usize::from(MAX_FDS) {
            return Err(TransportError::TooManyFds);
        }
        if got.bytes == 0 {
            return Ok(ReadOutcome::Closed);
        }
        self.decoder.feed(&buf[..got.bytes]);
        Ok(ReadOutcome::Read(got.bytes))
    }

    /// The next whole frame received, with its descriptors; `Ok(None)` when
    /// more bytes are needed. A frame refused in its body
    /// ([`pagepilot_protocol::DecodeError::is_recoverable`]) skips that
    /// frame only.
    pub fn next_received(&mut self) -> Result<Option<Received>, TransportError> {
        let frame = match self.decoder.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(None),
            Err(e) => {
                // A frame refused in its body: the descriptors its header
                // announced are dropped with it, or the next frame that
                // announces some would be handed these.
                if let Some(header) = self.decoder.refused() {
                    let n = usize::from(header.fds).min(self.fds.len());
                    self.fds.drain(..n);
                }
                return Err(e.into());
            }
        };
        let announced = frame.message.fds();
        if self.fds.len() < usize::from(announced) {
            return Err(TransportError::MissingFds {
                kind: frame.message.kind(),
                announced,
                arrived: self.fds.len(),
            });
        }
        let fds = self.fds.drain(..usize::from(announced)).collect();
        Ok(Some(Received {
            message: frame.message,
            fds,
        }))
    }

    /// The kind of the frame the last [`Self::next_received`] refused in its
    /// body, to name the request in the error reply.
    pub fn refused_kind(&self) -> Option<pagepilot_protocol::Kind> {
        self.decoder
            .refused()
            .and_then(|h| pagepilot_protocol::Kind::from_u16(h.kind))
    }

    /// Blocks until the next whole frame (a blocking socket), or `timeout`
    /// passes (`Ok(None)`).
    pub fn receive_within(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Received>, TransportError> {
        let started = Instant::now();
        loop {
            if let Some(received) = self.next_received()? {
                return Ok(Some(received));
            }
            if let Some(t) = timeout {
                let left = t.saturating_sub(started.elapsed());
                if left.is_zero() || !wait_for(self.stream.as_fd(), PollFlags::IN, left)? {
                    return Ok(None);
                }
            }
            match self.read_available()? {
                ReadOutcome::Read(_) => {}
                ReadOutcome::WouldBlock => {
                    wait_for(self.stream.as_fd(), PollFlags::IN, Duration::from_secs(1))?;
                }
                ReadOutcome::Closed => {
                    return Err(TransportError::Closed {
                        pending: self.pending(),
                    })
                }
            }
        }
    }

    /// Blocks until the next whole frame.
    pub fn receive(&mut self) -> Result<Received, TransportError> {
        loop {
            if let Some(received) = self.receive_within(None)? {
                return Ok(received);
            }
        }
    }
}

/// Waits until `fd` is ready for `events` (or hung up), at most `timeout`.
fn wait_for(fd: BorrowedFd<'_>, events: PollFlags, timeout: Duration) -> std::io::Result<bool> {
    let timeout = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [PollFd::from_borrowed_fd(fd, events)];
    loop {
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) => return Ok(n > 0),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagepilot_protocol::{RegionFiles, RegionId, RegisterRegion};
    use std::io::Write;

    fn pair() -> (Connection, Connection) {
        let (a, b) = UnixStream::pair().unwrap();
        (
            Connection::new(a, Peer::Daemon),
            Connection::new(b, Peer::Client),
        )
    }

    #[test]
    fn a_frame_arrives_with_the_descriptors_it_announces() {
        let (client, mut daemon) = pair();
        let files = RegionFiles {
            memory: true,
            backing: true,
            dirty: false,
        };
        let register = Message::RegisterRegion(RegisterRegion {
            region: RegionId(7),
            budget_frames: 10,
            files,
            ..Default::default()
        });
        let (r, mut w) = UnixStream::pair().unwrap();
        client.send(&register, &[r.as_fd(), w.as_fd()]).unwrap();
        client.send(&Message::Status, &[]).unwrap();
        let got = daemon.receive().unwrap();
        assert_eq!(got.message, register);
        assert_eq!(got.fds.len(), 2);
        // The descriptors name the same sockets: what is written to `w`
        // reaches the received copy of `r`... and the other way round.
        w.write_all(b"x").unwrap();
        let mut peer = UnixStream::from(got.fds.into_iter().next().unwrap());
        let mut byte = [0u8];
        std::io::Read::read_exact(&mut peer, &mut byte).unwrap();
        assert_eq!(&byte, b"x");
        let status = daemon.receive().unwrap();
        assert_eq!(status.message, Message::Status);
        assert!(status.fds.is_empty());
    }

    #[test]
    fn send_refuses_a_descriptor_count_the_message_does_not_announce() {
        let (client, _daemon) = pair();
        let (r, _w) = UnixStream::pair().unwrap();
        let err = client.send(&Message::Status, &[r.as_fd()]).unwrap_err();
        assert!(
            matches!(
                err,
                TransportError::WrongFdCount {
                    expected: 0,
                    given: 1,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn descriptors_sent_with_a_frame_that_does_not_announce_them_stay_queued() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut daemon = Connection::new(b, Peer::Client);
        let bytes = encode(&Message::Status).unwrap();
        let (r, _w) = UnixStream::pair().unwrap();
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = [r.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&fds));
        sendmsg(
            &a,
            &[IoSlice::new(&bytes)],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        let got = daemon.receive().unwrap();
        assert_eq!((got.message, got.fds.len()), (Message::Status, 0));
        assert_eq!((daemon.pending(), daemon.queued_fds()), (0, 1));
    }

    #[test]
    fn the_descriptors_of_a_frame_refused_in_its_body_are_dropped_with_it() {
        let (client, mut daemon) = pair();
        let files = RegionFiles {
            memory: true,
            ..Default::default()
        };
        let register = |budget_frames| {
            Message::RegisterRegion(RegisterRegion {
                region: RegionId(1),
                budget_frames,
                files,
                ..Default::default()
            })
        };
        let (refused, _r) = UnixStream::pair().unwrap();
        let (kept, mut w) = UnixStream::pair().unwrap();
        // budget_frames 0 is refused in the body (body bytes 12.. are
        // region u32, min u64, budget u64).
        let mut bytes = encode(&register(1)).unwrap();
        bytes[24..32].copy_from_slice(&0u64.to_le_bytes());
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = [refused.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&fds));
        sendmsg(
            client.stream(),
            &[IoSlice::new(&bytes)],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        client.send(&register(1), &[kept.as_fd()]).unwrap();
        let err = daemon.receive().unwrap_err();
        assert!(matches!(err, TransportError::Decode(_)), "{err}");
        assert_eq!(daemon.queued_fds(), 0);
        let got = daemon.receive().unwrap();
        // The descriptor handed out is the second frame's.
        w.write_all(b"y").unwrap();
        let mut peer = UnixStream::from(got.fds.into_iter().next().unwrap());
        let mut byte = [0u8];
        std::io::Read::read_exact(&mut peer, &mut byte).unwrap();
        assert_eq!(&byte, b"y");
    }

    #[test]
    fn a_frame_announcing_descriptors_that_never_came_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut daemon = Connection::new(b, Peer::Client);
        let register = Message::RegisterRegion(RegisterRegion {
            region: RegionId(1),
            budget_frames: 1,
            files: RegionFiles {
                memory: true,
                ..Default::default()
            },
            ..Default::default()
        });
        (&a).write_all(&encode(&register).unwrap()).unwrap();
        let err = daemon.receive().unwrap_err();
        assert!(
            matches!(
                err,
                TransportError::MissingFds {
                    announced: 1,
                    arrived: 0,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_peer_closing_mid_frame_reports_the_bytes_it_left() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut daemon = Connection::new(b, Peer::Client);
        let bytes = encode(&Message::Status).unwrap();
        (&a).write_all(&bytes[..5]).unwrap();
        drop(a);
        let err = daemon.receive().unwrap_err();
        assert!(
            matches!(err, TransportError::Closed { pending: 5 }),
            "{err}"
        );
    }

    #[test]
    fn a_half_frame_times_out_without_blocking_forever() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut daemon = Connection::new(b, Peer::Client);
        let bytes = encode(&Message::Status).unwrap();
        (&a).write_all(&bytes[..5]).unwrap();
        let got = daemon
            .receive_within(Some(Duration::from_millis(50)))
            .unwrap();
        assert!(got.is_none());
        assert_eq!(daemon.pending(), 5);
    }

    #[test]
    fn peer_credentials_name_this_process() {
        let (client, _daemon) = pair();
        let cred = client.peer_credentials().unwrap();
        assert_eq!(cred.pid, std::process::id());
        assert_eq!(cred.uid, rustix::process::getuid().as_raw());
    }

    #[test]
    fn a_peer_that_never_reads_makes_send_time_out() {
        let (client, _daemon) = pair();
        client.stream().set_nonblocking(true).unwrap();
        let big = Message::error(
            pagepilot_protocol::ErrorCode::Internal,
            None,
            None,
            &"x".repeat(200),
        );
        let err = loop {
            if let Err(e) = client.send(&big, &[]) {
                break e;
            }
        };
        assert!(matches!(err, TransportError::SendTimeout(_)), "{err}");
    }
}
