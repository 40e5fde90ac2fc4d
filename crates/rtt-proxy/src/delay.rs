//! One direction of a connection, on one thread: each chunk read is
//! stamped with the time it was read and written on at that time plus a
//! fixed delay. Chunks queue in between, many at once, so the delay adds
//! latency but does not throttle bandwidth; they leave in the order they
//! came. While chunks wait, the thread polls for more with a timeout that
//! ends shortly before the first is due, then spins (reading without
//! blocking) until it is: no hand-over to another thread, whose wake-up
//! would add its own latency to every chunk.

use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::{recv, RecvFlags};

/// The most bytes one read takes.
const CHUNK: usize = 64 * 1024;
/// How long before a chunk's due time a waiting thread stops sleeping and
/// spins: more than a sleep's usual overshoot here (20-45 us with 1 ns of
/// timer slack).
pub const SPIN: Duration = Duration::from_micros(100);

/// What waits in the delay line, in order.
enum Item {
    Bytes(Vec<u8>),
    /// The reading side ended (or failed): end the writing side.
    End,
}

/// Forwards `from` to `to`, each chunk `delay` after it was read, until
/// `from` ends; then shuts down `to`'s writing side. When writing to `to`
/// fails, shuts both sockets down (which ends the other direction too).
pub fn forward(from: &TcpStream, mut to: &TcpStream, delay: Duration) {
    let mut line: VecDeque<(Instant, Item)> = VecDeque::new();
    let mut buf = vec![0u8; CHUNK];
    let mut ended = false;
    loop {
        let now = Instant::now();
        while line.front().is_some_and(|(due, _)| *due <= now) {
            let Some((_, item)) = line.pop_front() else {
                break;
            };
            let Item::Bytes(bytes) = item else {
                let _ = to.shutdown(Shutdown::Write);
                return;
            };
            if to.write_all(&bytes).is_err() {
                let _ = to.shutdown(Shutdown::Both);
                let _ = from.shutdown(Shutdown::Both);
                return;
            }
        }
        let left = line
            .front()
            .map(|(due, _)| due.saturating_duration_since(now));
        if ended {
            // Nothing more to read: only the line to empty.
            if let Some(left) = left {
                sleep_then_spin(left);
            }
            continue;
        }
        match left {
            // Nothing waits: block until there is something to read.
            None => wait_readable(from, None),
            Some(left) if left > SPIN => wait_readable(from, Some(left - SPIN)),
            // Spinning: each turn reads without blocking.
            Some(_) => std::hint::spin_loop(),
        }
        let got = recv(from, &mut buf[..], RecvFlags::DONTWAIT);
        let due = Instant::now() + delay;
        match got {
            Ok((0, _)) => {
                ended = true;
                line.push_back((due, Item::End));
            }
            Ok((n, _)) => line.push_back((due, Item::Bytes(buf[..n].to_vec()))),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => {
                ended = true;
                line.push_back((due, Item::End));
            }
        }
    }
}

/// Waits until `socket` is readable (or ended), or `timeout` passed.
fn wait_readable(socket: &TcpStream, timeout: Option<Duration>) {
    let timeout = timeout.and_then(|t| Timespec::try_from(t).ok());
    let mut fds = [PollFd::new(socket, PollFlags::IN)];
    // Errors (EINTR) end the wait early; the caller reads and looks again.
    let _ = poll(&mut fds, timeout.as_ref());
}

/// Waits `left`, not less: sleeps until shortly before its end (precise
/// to microseconds with the timer slack main sets), then spins.
pub fn sleep_then_spin(left: Duration) {
    let due = Instant::now() + left;
    loop {
        let Some(left) = due.checked_duration_since(Instant::now()) else {
            return;
        };
        if left.is_zero() {
            return;
        }
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_at_least_as_long_as_asked() {
        for micros in [0, 10, 50, 100, 250, 1000] {
            let start = Instant::now();
            sleep_then_spin(Duration::from_micros(micros));
            assert!(start.elapsed() >= Duration::from_micros(micros));
        }
    }
}
