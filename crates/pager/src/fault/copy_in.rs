//! Prefetched windows copied in from the page cache: where the kernel
//! holds a window's pages already, the thread that issues it copies them
//! into a staging buffer of its own and hands them to `UFFDIO_COPY`, which
//! allocates each frame, fills and maps it in one call. No frame is
//! cleared first (a read into the pager's view clears each), and copies by
//! several threads run side by side (a `splice` into the memfd takes its
//! inode's lock). `benches/warm_threads.c`, a cached 1 GiB file, fresh
//! frames, against `pread` of the same shares: 0.27 at two and four
//! threads, where reads into the view give 0.20 and splices 0.18.

use std::cell::RefCell;

use crate::shared::Shared;
use crate::stats::Counters;
use crate::sys::PAGE;

/// Pages copied per call: the staging buffer each issuing thread keeps.
/// 32 pages copy as fast as 128 (`warm_threads.c`).
const CHUNK: usize = 32;

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Page([u8; PAGE]);

thread_local! {
    /// This thread's staging buffer, allocated at its first window.
    static STAGING: RefCell<Vec<Page>> = const { RefCell::new(Vec::new()) };
}

/// Reads window `first..first + n` (its pages `Loading`, their frames
/// free) from the page cache and maps all but its first page, the marker,
/// which is filled unmapped. The window's result as the ring would give
/// it (bytes read, or `-errno`), or `None`, nothing done: the page cache
/// does not hold the window's first [`CHUNK`] pages, or the region's
/// threads may run in a signal handler (`Tuning::copy_windows`). A window
/// cached only in part has the rest read here into its frames (rare: the
/// kernel caches files in large folios).
pub(super) fn copy_window(sh: &Shared, first: u32, n: usize) -> Option<i32> {
    if !sh.tuning().copy_windows {
        return None;
    }
    STAGING.with_borrow_mut(|staging| {
        let (mut done, mut copied) = (0, 0);
        if staging.is_empty() {
            // Allocated only once a window is found cached: a thread that
            // only ever reads cold windows keeps none (the region's
            // footprint, `cgroup.rs`). The page read to find out is the
            // window's first, placed as such.
            let mut probe = Page([0; PAGE]);
            // SAFETY: `probe` holds one page, this thread's own.
            match unsafe {
                sh.store()
                    .read_cached(first as usize, 1, probe.0.as_mut_ptr())
            }? {
                Ok(0) => return Some(0),
                Ok(_) => place(sh, first, first, 1, probe.0.as_ptr()),
                Err(e) => return Some(-e.raw_os_error().unwrap_or(libc::EIO)),
            }
            (done, copied) = (1, 1);
            staging.resize(CHUNK, Page([0; PAGE]));
        }
        let buf = staging.as_mut_ptr().cast::<u8>();
        while done < n {
            let at = first + done as u32;
            let k = (n - done).min(CHUNK);
            // SAFETY: the staging buffer holds CHUNK >= k pages and is this
            // thread's alone.
            let read = match unsafe { sh.store().read_cached(at as usize, k, buf) } {
                Some(read) => read,
                None if done == 0 => return None,
                // Cached at first, not all the way: the rest is read
                // straight into its frames (Loading, unused) and mapped.
                None => {
                    // SAFETY: as the ring's read: the pages are Loading.
                    let rest = unsafe {
                        sh.store()
                            .read(at as usize, n - done, sh.views().pager_addr(at))
                    };
                    if let Ok(have) = rest.map(|have| have.min(n - done)) {
                        if have > 0 {
                            sh.views().map_quietly(at, have, sh.views().writable());
                        }
                        done += have;
                    }
                    break;
                }
            };
            let have = match read {
                Ok(have) => have.min(k),
                Err(e) if done == 0 => return Some(-e.raw_os_error().unwrap_or(libc::EIO)),
                Err(_) => break,
            };
            place(sh, first, at, have, buf);
            done += have;
            copied += have;
            if have < k {
                break;
            }
        }
        Counters::add(&sh.stats().copied_in_pages, copied as u64);
        Some((done * PAGE) as i32)
    })
}

/// Places `have` pages staged at `buf`, the window's pages from `at` on:
/// the window's first page into its frame, unmapped (the marker whose
/// touch enters the window), the others copied in and mapped.
fn place(sh: &Shared, first: u32, at: u32, have: usize, buf: *const u8) {
    let (mut at, mut have, mut buf) = (at, have, buf);
    if at == first && have > 0 {
        // SAFETY: the marker is Loading, its frame unused by anyone else;
        // `buf` holds at least one page.
        unsafe { std::ptr::copy_nonoverlapping(buf, sh.views().pager_addr(at), PAGE) };
        // SAFETY: still within the `have` staged pages.
        buf = unsafe { buf.add(PAGE) };
        at += 1;
        have -= 1;
    }
    if have > 0 {
        // SAFETY: `buf` holds `have` staged pages; they are Loading.
        unsafe { sh.views().copy_in(at, have, buf) };
    }
}
