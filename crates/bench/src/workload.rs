//! The workloads, run unchanged over a pagepilot region and over the kernel's `mmap` of the
//! same file: the nested-loops join of HiPEC 5.3 and page scans.
//!
//! Each returns a checksum that depends on every value read, so the work cannot be optimised
//! away, and [`expected`] says what it must be, so a pager that served wrong data is caught.

use serde::{Deserialize, Serialize};

use super::datafile::{KEY_SPACE, TUPLE, TUPLES_PER_PAGE};
use pagepilot_pager::sys::PAGE;

/// Tuples in the 4 KB inner table.
pub const INNER_TUPLES: usize = PAGE / TUPLE;

/// Order of page reads in a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Each thread reads its contiguous share of the file once, in order.
    Sequential,
    /// Each thread reads pages chosen uniformly at random.
    Random,
}

/// One workload over a mapped table.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum Workload {
    /// Nested-loops join: the outer table is scanned once per inner tuple, `loops` times.
    Join {
        /// Scans of the outer table (64 in the paper: one per inner tuple).
        loops: usize,
    },
    /// Page reads by several threads.
    Scan {
        /// Read order.
        pattern: Pattern,
        /// Application threads.
        threads: usize,
        /// Random reads in total (all threads); ignored by sequential scans.
        ops: usize,
        /// Seed of the random page sequence.
        seed: u64,
    },
}

impl Workload {
    /// Application threads.
    pub fn threads(&self) -> usize {
        match *self {
            Workload::Join { .. } => 1,
            Workload::Scan { threads, .. } => threads.max(1),
        }
    }

    /// Pages this workload reads (references, not faults).
    pub fn pages_read(&self, len: usize) -> u64 {
        match *self {
            Workload::Join { loops } => (len / PAGE * loops) as u64,
            Workload::Scan {
                pattern: Pattern::Sequential,
                ..
            } => (len / PAGE) as u64,
            Workload::Scan {
                pattern: Pattern::Random,
                threads,
                ops,
                ..
            } => (ops / threads.max(1) * threads.max(1)) as u64,
        }
    }
}

/// Key of inner tuple `j`: spread over the outer key space so each matches some outer tuples.
fn inner_key(j: usize) -> u64 {
    (j % INNER_TUPLES) as u64 * (KEY_SPACE / INNER_TUPLES as u64)
}

/// Runs `w` over `len` bytes at `base` and returns its checksum.
///
/// # Safety
/// `base..base+len` must stay mapped and readable for the whole call, `len` a multiple of the
/// page size, holding (or paging in) the table written by `datafile::fill_page`.
pub unsafe fn run(w: Workload, base: *const u8, len: usize) -> u64 {
    match w {
        // SAFETY: forwarded from the caller.
        Workload::Join { loops } => unsafe { join(base, len, loops) },
        Workload::Scan {
            pattern,
            threads,
            ops,
            seed,
        } => {
            let base = base as usize;
            let threads = threads.max(1);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        s.spawn(move || {
                            let it = scan_pages(pattern, t, threads, len / PAGE, ops, seed);
                            // SAFETY: every page index is below len / PAGE; the caller keeps
                            // the mapping alive for the scope.
                            it.map(|p| unsafe { read_page_tag(base as *const u8, p) })
                                .fold(0u64, u64::wrapping_add)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(u64::MAX))
                    .fold(0, u64::wrapping_add)
            })
        }
    }
}

/// What [`run`] must return over a correct table of `len` bytes.
pub fn expected(w: Workload, len: usize) -> u64 {
    let pages = len / PAGE;
    match w {
        Workload::Join { loops } => {
            let tuples = (pages * TUPLES_PER_PAGE) as u64;
            (0..loops)
                .map(|j| {
                    let k = inner_key(j);
                    if k < tuples {
                        (tuples - k).div_ceil(KEY_SPACE)
                    } else {
                        0
                    }
                })
                .sum()
        }
        Workload::Scan {
            pattern,
            threads,
            ops,
            seed,
        } => (0..threads.max(1))
            .flat_map(|t| scan_pages(pattern, t, threads.max(1), pages, ops, seed))
            .fold(0u64, |a, p| a.wrapping_add(p as u64)),
    }
}

/// The nested-loops join: for each inner tuple, scan every outer tuple and count key matches.
///
/// # Safety
/// As for [`run`].
unsafe fn join(base: *const u8, len: usize, loops: usize) -> u64 {
    let tuples = len / TUPLE;
    let inner: Vec<u64> = (0..INNER_TUPLES).map(inner_key).collect();
    let mut matches = 0u64;
    for j in 0..loops {
        let key = inner[j % INNER_TUPLES];
        for i in 0..tuples {
            // SAFETY: i * TUPLE + 8 <= len; the caller keeps the table mapped. Volatile: each
            // scan must really touch the table, as the database's join would.
            let outer = unsafe { std::ptr::read_volatile(base.add(i * TUPLE).cast::<u64>()) };
            matches += u64::from(outer == key);
        }
    }
    matches
}

/// Reads the page-number tag of page `p`.
///
/// # Safety
/// Page `p` must lie inside a live mapping starting at `base`.
unsafe fn read_page_tag(base: *const u8, p: usize) -> u64 {
    // SAFETY: forwarded from the caller; offset 8 is inside the page.
    unsafe { std::ptr::read_volatile(base.add(p * PAGE + 8).cast::<u64>()) }
}

/// The pages thread `t` of `threads` reads, in order.
fn scan_pages(
    pattern: Pattern,
    t: usize,
    threads: usize,
    pages: usize,
    ops: usize,
    seed: u64,
) -> Box<dyn Iterator<Item = usize>> {
    match pattern {
        Pattern::Sequential => {
            let share = pages.div_ceil(threads);
            Box::new(t * share..((t + 1) * share).min(pages))
        }
        Pattern::Random => {
            let mut x = seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            Box::new((0..ops / threads).map(move |_| {
                // xorshift64*: cheap, and replayable by `expected`.
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as usize % pages.max(1)
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datafile::fill_page;

    fn table(pages: usize) -> Vec<u8> {
        let mut v = vec![0u8; pages * PAGE];
        for (p, page) in v.chunks_exact_mut(PAGE).enumerate() {
            fill_page(p as u64, page);
        }
        v
    }

    #[test]
    fn test_join_checksum_matches_expected_count() {
        let t = table(40);
        for loops in [1, 7, 64] {
            let w = Workload::Join { loops };
            // SAFETY: the vector outlives the call and has whole pages.
            assert_eq!(unsafe { run(w, t.as_ptr(), t.len()) }, expected(w, t.len()));
        }
    }

    #[test]
    fn test_scans_checksum_matches_expected_and_detects_corruption() {
        let mut t = table(64);
        for pattern in [Pattern::Sequential, Pattern::Random] {
            for threads in [1, 3] {
                let w = Workload::Scan {
                    pattern,
                    threads,
                    ops: 3000,
                    seed: 7,
                };
                // SAFETY: as above.
                assert_eq!(unsafe { run(w, t.as_ptr(), t.len()) }, expected(w, t.len()));
            }
        }
        t[5 * PAGE + 8] ^= 1;
        let w = Workload::Scan {
            pattern: Pattern::Sequential,
            threads: 2,
            ops: 0,
            seed: 0,
        };
        // SAFETY: as above.
        assert_ne!(unsafe { run(w, t.as_ptr(), t.len()) }, expected(w, t.len()));
    }
}
