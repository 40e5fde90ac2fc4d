//! A file region's file read and written beside it, as through the
//! kernel's unified page cache: a `pwrite` to the file is seen through the
//! region at once, a `pread` sees the stores made through the region, and
//! a truncation drops the pages past the new end. `pagepilot run`'s
//! interposer routes a program's own `read`/`write` calls on a taken-over
//! file through these.
//!
//! The file stays the place where other processes see the data: a write
//! goes to the file (the caller's `io`) and, for the pages the region
//! holds, into their frames too, under the region's lock, while no page of
//! the range is being read in or written back (a read begun before the
//! write would bring back the old bytes; a write-back would put them back
//! in the file). While the region is the kernel's mapping of its file
//! (shared with a child after `fork`), the page cache is the one copy and
//! `io` alone does it.

use std::time::Duration;

use crate::frame_table::{State, FLUSHING, MODIFIED};
use crate::lock::Locked;
use crate::region::Region;
use crate::sharing::Mode;
use crate::sys::PAGE;

/// How long a change beside waits between looks at a page being flushed
/// (the end of a flush wakes no one).
const FLUSH_POLL: Duration = Duration::from_millis(1);

impl Region {
    /// Writes `data` to the region's file at `offset` with `io` (the
    /// caller's `pwrite`: the bytes written, or a negative value), and puts
    /// the bytes written into the pages of the range the region holds.
    /// Returns what `io` returned.
    pub fn write_beside(&self, offset: u64, data: &[u8], io: impl FnOnce() -> isize) -> isize {
        self.change_beside(offset, data.len(), io, |at, frame| {
            frame.copy_from_slice(&data[at..at + frame.len()]);
        })
    }

    /// Zeroes `len` bytes of the file at `offset` with `io` (a hole
    /// punched or a range zeroed: 0 on success, negative on failure), and
    /// the same bytes of the pages the region holds. Returns what `io` did.
    pub fn zero_beside(&self, offset: u64, len: usize, io: impl FnOnce() -> isize) -> isize {
        let mut result = 0;
        self.change_beside(
            offset,
            len,
            || {
                result = io();
                if result == 0 {
                    len as isize
                } else {
                    result
                }
            },
            |_, frame| frame.fill(0),
        );
        result
    }

    /// Reads the file at `offset` into `buf` with `io` (the caller's
    /// `pread`: the bytes read, or a negative value), then lays over it the
    /// bytes of the pages the region holds (stores not written back yet).
    /// Returns what `io` returned.
    pub fn read_beside(
        &self,
        offset: u64,
        buf: &mut [u8],
        io: impl FnOnce(&mut [u8]) -> isize,
    ) -> isize {
        let n = io(buf);
        if n <= 0 {
            return n;
        }
        let Some(g) = self.paging() else { return n };
        let views = self.shared.views();
        for (s, at, within, len) in pages_of(offset, n as usize, views.len()) {
            if holds_data(&g, s) {
                // SAFETY: page `s` holds a frame (its state, under the lock),
                // `within + len <= PAGE`, so the bytes lie in the pager's view.
                let frame =
                    unsafe { std::slice::from_raw_parts(views.pager_addr(s).add(within), len) };
                buf[at..at + len].copy_from_slice(frame);
            }
        }
        n
    }

    /// Truncates the file to `len` bytes with `io` (0 on success), and
    /// drops the region's pages past the new end without writing them back
    /// (the kernel drops them from the page cache); the bytes past the end
    /// of a page cut in two become zeros. Returns what `io` returned.
    pub fn truncate_beside(&self, len: u64, io: impl FnOnce() -> isize) -> isize {
        let Some(g) = self.paging() else { return io() };
        let tail = (self.shared.views().len() as u64).saturating_sub(len) as usize;
        let mut g = self.quiet(g, len, tail);
        let r = io();
        if r != 0 {
            return r;
        }
        // Grown: pages that were past the end read the file again.
        clear_absent(&g, self.shared.views(), 0, len as usize);
        let views = self.shared.views();
        let mut victims = Vec::new();
        for (s, _, within, n) in pages_of(len, tail, views.len()) {
            if !holds_data(&g, s) {
                continue;
            }
            if within == 0 && g.table.state(s) == State::Resident {
                let f = g.table.flags(s);
                g.table.set_flags(s, f & !MODIFIED);
                victims.push(g.give_up(s));
            } else {
                // SAFETY: as in `read_beside`.
                unsafe { std::ptr::write_bytes(views.pager_addr(s).add(within), 0, n) };
            }
        }
        drop(g);
        self.shared.evict(&mut victims);
        r
    }

    /// The shared body of a change to the file beside the region: `io`
    /// makes it (returning the bytes it changed from `offset`, or a
    /// negative value) under the lock while the range is quiet, and `fill`
    /// makes the same change to each held page's bytes (`fill(at, frame)`:
    /// `frame` is the page's part of the range, from byte `at` of it).
    fn change_beside(
        &self,
        offset: u64,
        len: usize,
        io: impl FnOnce() -> isize,
        mut fill: impl FnMut(usize, &mut [u8]),
    ) -> isize {
        let Some(g) = self.paging().filter(|_| len > 0) else {
            return io();
        };
        let g = self.quiet(g, offset, len);
        let n = io();
        if n <= 0 {
            return n;
        }
        let views = self.shared.views();
        clear_absent(&g, views, offset as usize, n as usize);
        for (s, at, within, part) in pages_of(offset, n as usize, views.len()) {
            if holds_data(&g, s) {
                // SAFETY: as in `read_beside`; the frame is written through
                // the pager's view, which the application never sees torn
                // by more than its own racing stores would.
                let frame = unsafe {
                    std::slice::from_raw_parts_mut(views.pager_addr(s).add(within), part)
                };
                fill(at, frame);
            }
        }
        n
    }

    /// The region's lock while the pager pages it; `None` while the region
    /// is the kernel's mapping of its file (in a child after `fork`, or
    /// shared with one), where the page cache alone keeps I/O coherent.
    fn paging(&self) -> Option<Locked<'_>> {
        if self.shared.forked() {
            return None;
        }
        let g = self.shared.lock();
        (self.shared.sharing().mode() == Mode::Paging).then_some(g)
    }

    /// Waits, holding the lock on return, until no page of `len` bytes from
    /// `offset` is being read in, written back or flushed. Windows read
    /// ahead are settled first: one stays in flight until the application
    /// reaches it.
    fn quiet<'a>(&'a self, mut g: Locked<'a>, offset: u64, len: usize) -> Locked<'a> {
        let region_len = self.shared.views().len();
        'again: loop {
            g = crate::fault::settle_locked(&self.shared, g);
            for (s, ..) in pages_of(offset, len, region_len) {
                let busy = matches!(g.table.state(s), State::Loading | State::Evicting);
                if busy || g.table.flags(s) & FLUSHING != 0 {
                    g = self.shared.frames().wait_timeout(g, FLUSH_POLL);
                    continue 'again;
                }
            }
            return g;
        }
    }
}

/// Clears the application's view over the absent pages of `len` bytes
/// from `offset`: a page found past the file's end was poisoned (its
/// access raised SIGBUS), and the file now reaches it.
fn clear_absent(g: &Locked<'_>, views: &crate::views::Views, offset: usize, len: usize) {
    let absent: Vec<u32> = pages_of(offset as u64, len, views.len())
        .map(|(s, ..)| s)
        .filter(|&s| g.table.state(s) == State::Absent)
        .collect();
    for run in absent.chunk_by(|a, b| b - a == 1) {
        views.zap(run[0], run.len());
    }
}

/// Whether page `s`'s frame holds its data (it is not being read in).
fn holds_data(g: &Locked<'_>, s: u32) -> bool {
    matches!(
        g.table.state(s),
        State::Resident | State::Unwritten | State::Locked | State::Evicting
    )
}

/// The pages of `len` bytes from `offset`, within a region of `region_len`
/// bytes: `(page, byte of the range, byte of the page, bytes)` each.
fn pages_of(
    offset: u64,
    len: usize,
    region_len: usize,
) -> impl Iterator<Item = (u32, usize, usize, usize)> {
    let start = (offset as usize).min(region_len);
    let end = (offset as usize).saturating_add(len).min(region_len);
    let mut at = start;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let within = at % PAGE;
        let part = (PAGE - within).min(end - at);
        let item = ((at / PAGE) as u32, at - start, within, part);
        at += part;
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_pages_of_splits_a_range_at_page_bounds_and_the_region_end() {
        let v: Vec<_> = pages_of(4090, 10, 3 * PAGE).collect();
        assert_eq!(v, vec![(0, 0, 4090, 6), (1, 6, 0, 4)]);
        let v: Vec<_> = pages_of(2 * PAGE as u64 + 5, 10 * PAGE, 3 * PAGE).collect();
        assert_eq!(v, vec![(2, 0, 5, PAGE - 5)]);
        assert_eq!(pages_of(5 * PAGE as u64, 10, 3 * PAGE).count(), 0);
    }
}
