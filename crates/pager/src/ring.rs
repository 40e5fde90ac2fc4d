//! An io_uring for prefetched windows: the thread that issues a window
//! submits its read and goes on; the completion is reaped when a fault needs
//! it (by any thread serving the region's faults). No reader threads, no
//! hand-off per window: in the faulting-thread mode the application's own
//! thread issues, waits and maps, with reads in flight while it computes.
//! The read is issued by the submitting thread itself (an `O_DIRECT` read
//! does not block), so no io_uring worker is woken on the way to the disk,
//! except for a window into free frames: an `O_DIRECT` read allocates and
//! clears the frames it fills in the thread that issues it, as much work as
//! the device's (`benches/cold_floor.c`), and a worker does it beside the
//! handler (`bench scan`, cold sequential first touches of 1 GiB under a
//! 2 GiB budget, one thread: 326-333k pages/s punted, 274-280k not).
//!
//! Default setup flags: a completion is posted by task work of the
//! submitting thread, which the kernel runs promptly (waking it from an
//! interruptible sleep or interrupting it), so a thread waiting on the ring
//! for another's read never waits for that thread's next fault.
//! (`DEFER_TASKRUN`/`COOP_TASKRUN` would let a submitter asleep in `epoll`
//! hold back a read another thread waits for.)

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types, IoUring};

/// Reads in flight on one region's ring, keyed by ticket.
pub struct Ring {
    ring: IoUring,
    /// Reads submitted and not reaped yet.
    in_flight: usize,
    /// Reaped results (bytes read, or `-errno`) not consumed yet, by ticket.
    done: BTreeMap<u64, i32>,
}

/// Submission-queue entries: more than the most windows in flight.
const ENTRIES: u32 = 32;

impl Ring {
    /// A ring. Fails where the kernel has no io_uring, or forbids it
    /// (`kernel.io_uring_disabled`).
    pub fn new() -> io::Result<Ring> {
        Ok(Ring {
            ring: IoUring::new(ENTRIES)?,
            in_flight: 0,
            done: BTreeMap::new(),
        })
    }

    /// Submits a read of `len` bytes at `off` of `fd` into `dst`, tagged
    /// `ticket`; `punt`: by one of io_uring's workers rather than by this
    /// thread. An error (the queue is full) leaves nothing in flight.
    ///
    /// # Safety
    /// `dst` must stay valid for `len` bytes of writes, and not be accessed
    /// by anyone else, until the read is reaped ([`Ring::take`] returns it
    /// or [`Ring::drain`] ran); `fd` must stay open until then.
    pub unsafe fn read(
        &mut self,
        fd: RawFd,
        dst: *mut u8,
        len: usize,
        off: u64,
        ticket: u64,
        punt: bool,
    ) -> io::Result<()> {
        let len = u32::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let sqe = opcode::Read::new(types::Fd(fd), dst, len)
            .offset(off)
            .build()
            .flags(if punt {
                squeue::Flags::ASYNC
            } else {
                squeue::Flags::empty()
            })
            .user_data(ticket);
        // SAFETY: the caller keeps `dst` and `fd` valid until the read is reaped.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::from(io::ErrorKind::WouldBlock))?;
        // Queued now: if the submission fails (EBUSY, EINTR) the kernel
        // takes it at the next `reap`; either way a completion reports it.
        self.in_flight += 1;
        let _ = self.ring.submit();
        Ok(())
    }

    /// Records the result of a read done without the ring (a fallback), as
    /// if it had completed.
    pub fn record(&mut self, ticket: u64, result: i32) {
        self.done.insert(ticket, result);
    }

    /// Reaps completed reads; waits for at least one first if `wait` and
    /// any is in flight.
    pub fn reap(&mut self, wait: bool) -> io::Result<()> {
        let want = usize::from(wait && self.in_flight > 0);
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.poll();
        Ok(())
    }

    /// Reaps the completions posted already, without a system call.
    pub fn poll(&mut self) {
        for cqe in self.ring.completion() {
            self.in_flight = self.in_flight.saturating_sub(1);
            self.done.insert(cqe.user_data(), cqe.result());
        }
    }

    /// The result of read `ticket` (bytes read, or `-errno`) if it was
    /// reaped (it is forgotten).
    pub fn take(&mut self, ticket: u64) -> Option<i32> {
        self.done.remove(&ticket)
    }

    /// Waits for every read in flight (before the buffers go away).
    pub fn drain(&mut self) {
        while self.in_flight > 0 {
            if self.reap(true).is_err() {
                // The ring itself failed: closing it (on drop) makes the
                // kernel wait for the requests it holds.
                return;
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.drain();
    }
}
