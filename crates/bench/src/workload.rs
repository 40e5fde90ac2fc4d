//! The workloads, run unchanged over a pagepilot region, over the kernel's `mmap` of the same
//! file and (scans) through `pread`: the nested-loops join of HiPEC 5.3 and page scans.
//!
//! Each returns a checksum that depends on every value read, so the work cannot be optimised
//! away, and [`expected`] says what it must be, so a pager that served wrong data is caught.
//! A scan may also write: each touched page chosen by [`Workload::Scan`]'s `write_fraction`
//! gets a stamp at [`STAMP_OFFSET`], a field no checksum reads, so the file's checksums stay
//! right after any number of writing runs and the stamps show what was written back.

use serde::{Deserialize, Serialize};

use super::datafile::{KEY_SPACE, TUPLE, TUPLES_PER_PAGE};
use pagepilot_pager::sys::PAGE;

/// Tuples in the 4 KB inner table.
pub const INNER_TUPLES: usize = PAGE / TUPLE;

/// Offset in a page of the page-number tag a scan reads.
pub const TAG_OFFSET: usize = 8;
/// Offset in a page of the 8-byte stamp a writing scan writes (inside the first tuple's
/// padding, read by no checksum).
pub const STAMP_OFFSET: usize = 16;
/// A sparse scan touches one page in this many.
pub const SPARSE_STRIDE: usize = 64;

/// Order of page reads in a scan. Each thread works on its own contiguous part of the file
/// (the file split in as many parts as threads), except [`Pattern::Uniform`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Every page of the part once, in order.
    Sequential,
    /// Every page of the part in order, twice: under a budget below the
    /// file, the second pass finds what the policy kept of the first.
    Twopass,
    /// Every page of the part once, in a random order (a permutation).
    Random,
    /// One page in 64 ([`SPARSE_STRIDE`]) of the part, one at random in each block of 64,
    /// the blocks in a random order.
    Sparse,
    /// `ops` reads in all, each of a page chosen uniformly from the whole file (pages may be
    /// read several times).
    Uniform,
}

impl Pattern {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Sequential => "sequential",
            Pattern::Twopass => "twopass",
            Pattern::Random => "random",
            Pattern::Sparse => "sparse",
            Pattern::Uniform => "uniform",
        }
    }
}

/// Whether the data file is in the kernel's page cache when a run starts.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// Dropped before the run: every page comes from the disk.
    #[default]
    Cold,
    /// Read once before the run and not dropped: the whole file is cached.
    Warm,
}

impl Cache {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Cache::Cold => "cold",
            Cache::Warm => "warm",
        }
    }
}

/// One workload over a mapped table.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum Workload {
    /// Nested-loops join: the outer table is scanned once per inner tuple, `loops` times.
    Join {
        /// Scans of the outer table (64 in the paper: one per inner tuple).
        loops: usize,
    },
    /// Page reads (and writes) by several threads.
    Scan {
        /// Read order.
        pattern: Pattern,
        /// Application threads.
        threads: usize,
        /// Uniform reads in total (all threads); only [`Pattern::Uniform`] uses it.
        ops: usize,
        /// Seed of the random orders and of the choice of written pages.
        seed: u64,
        /// Share of the touched pages also written (each page chosen or not from the seed).
        #[serde(default)]
        write_fraction: f64,
        /// What a written page gets at [`STAMP_OFFSET`], combined with its number
        /// ([`stamp_of`]); a new stamp per run shows which run wrote a page.
        #[serde(default)]
        stamp: u64,
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

    /// Whether the workload writes (it needs a writable mapping).
    pub fn writes(&self) -> bool {
        matches!(*self, Workload::Scan { write_fraction, .. } if write_fraction > 0.0)
    }
}

/// The value a writing scan stores at [`STAMP_OFFSET`] of page `page` in a run stamped `stamp`.
pub fn stamp_of(stamp: u64, page: usize) -> u64 {
    stamp ^ (page as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// One page a scan touches: its number and whether it is also written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch(u32);

impl Touch {
    const WRITE: u32 = 1 << 31;

    /// Page number in the file.
    pub fn page(self) -> usize {
        (self.0 & !Self::WRITE) as usize
    }

    /// Whether the page is written after it is read.
    pub fn writes(self) -> bool {
        self.0 & Self::WRITE != 0
    }
}

/// The largest file, in pages, a scan plan can address (page numbers take 31 bits).
pub const MAX_PAGES: usize = 1 << 31;

/// A workload with its page sequences drawn: built before a run is timed (a permutation of a
/// 1 GiB file is 262,144 draws), then run over any mapping of the file.
pub struct Plan {
    w: Workload,
    len: usize,
    /// Per thread, the pages it touches in order (scans only).
    parts: Vec<Vec<Touch>>,
}

impl Plan {
    /// Draws the page sequences of `w` over a table of `len` bytes.
    pub fn new(w: Workload, len: usize) -> Plan {
        let pages = (len / PAGE).min(MAX_PAGES);
        let parts = match w {
            Workload::Join { .. } => Vec::new(),
            Workload::Scan {
                pattern,
                threads,
                ops,
                seed,
                write_fraction,
                ..
            } => {
                let threads = threads.max(1);
                (0..threads)
                    .map(|t| {
                        scan_pages(pattern, t, threads, pages, ops, seed)
                            .into_iter()
                            .map(|p| {
                                let write = writes_page(seed, p, write_fraction);
                                Touch(p as u32 | if write { Touch::WRITE } else { 0 })
                            })
                            .collect()
                    })
                    .collect()
            }
        };
        Plan { w, len, parts }
    }

    /// The workload.
    pub fn workload(&self) -> Workload {
        self.w
    }

    /// Gives the run a new stamp (the pages it touches and writes stay the same).
    pub fn set_stamp(&mut self, new: u64) {
        if let Workload::Scan { stamp, .. } = &mut self.w {
            *stamp = new;
        }
    }

    /// Per application thread, the pages it touches in order (empty for the join).
    pub fn parts(&self) -> &[Vec<Touch>] {
        &self.parts
    }

    /// Pages the workload reads (references, not faults).
    pub fn pages_touched(&self) -> u64 {
        match self.w {
            Workload::Join { loops } => (self.len / PAGE * loops) as u64,
            Workload::Scan { .. } => self.parts.iter().map(|p| p.len() as u64).sum(),
        }
    }

    /// The stamp of the run, and the distinct pages it writes, in order.
    pub fn written_pages(&self) -> (u64, Vec<usize>) {
        let stamp = match self.w {
            Workload::Scan { stamp, .. } => stamp,
            Workload::Join { .. } => 0,
        };
        let mut pages: Vec<usize> = self
            .parts
            .iter()
            .flatten()
            .filter(|t| t.writes())
            .map(|t| t.page())
            .collect();
        pages.sort_unstable();
        pages.dedup();
        (stamp, pages)
    }

    /// What [`Plan::run`] must return over a correct table.
    pub fn expected(&self) -> u64 {
        match self.w {
            Workload::Join { loops } => join_expected(self.len / PAGE, loops),
            Workload::Scan { .. } => self
                .parts
                .iter()
                .flatten()
                .fold(0u64, |a, t| a.wrapping_add(t.page() as u64)),
        }
    }

    /// Runs the workload over the `len` bytes at `base` and returns its checksum.
    ///
    /// # Safety
    /// `base..base+len` must stay mapped and readable (and writable, if the workload
    /// [writes](Workload::writes)) for the whole call, holding (or paging in) the table written
    /// by `datafile::fill_page`, and no Rust reference may point into it.
    pub unsafe fn run(&self, base: *mut u8) -> u64 {
        match self.w {
            // SAFETY: forwarded from the caller.
            Workload::Join { loops } => unsafe { join(base, self.len, loops) },
            Workload::Scan { stamp, .. } => {
                let base = base as usize;
                std::thread::scope(|s| {
                    let handles: Vec<_> = self
                        .parts
                        .iter()
                        .map(|part| {
                            s.spawn(move || {
                                // SAFETY: every page of a part is below len / PAGE; the caller
                                // keeps the mapping alive (writable when the plan writes) for
                                // the scope.
                                unsafe { touch_pages(base as *mut u8, part, stamp) }
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
}

/// What [`Plan::run`] must return for `w` over a correct table of `len` bytes.
pub fn expected(w: Workload, len: usize) -> u64 {
    match w {
        Workload::Join { loops } => join_expected(len / PAGE, loops),
        Workload::Scan { .. } => Plan::new(w, len).expected(),
    }
}

/// Key of inner tuple `j`: spread over the outer key space so each matches some outer tuples.
fn inner_key(j: usize) -> u64 {
    (j % INNER_TUPLES) as u64 * (KEY_SPACE / INNER_TUPLES as u64)
}

/// The join's match count over a table of `pages` pages.
fn join_expected(pages: usize, loops: usize) -> u64 {
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

/// The nested-loops join: for each inner tuple, scan every outer tuple and count key matches.
///
/// # Safety
/// As for [`Plan::run`].
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

/// Reads the tag of each page of `part` in order, writes the stamp of those it writes, and
/// returns the sum of the tags.
///
/// # Safety
/// Every page of `part` must lie inside a live mapping starting at `base`, writable where a
/// touch writes.
unsafe fn touch_pages(base: *mut u8, part: &[Touch], stamp: u64) -> u64 {
    let mut sum = 0u64;
    for &t in part {
        let page = t.page();
        // SAFETY: forwarded from the caller; both fields lie inside the page. Volatile: the
        // access must reach the mapping.
        unsafe {
            let at = base.add(page * PAGE);
            sum = sum.wrapping_add(std::ptr::read_volatile(at.add(TAG_OFFSET).cast::<u64>()));
            if t.writes() {
                std::ptr::write_volatile(at.add(STAMP_OFFSET).cast::<u64>(), stamp_of(stamp, page));
            }
        }
    }
    sum
}

/// xorshift64*: cheap, and replayable from the seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        Rng(seed ^ (stream + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() >> 11) as usize % n
    }

    fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            xs.swap(i, self.below(i + 1));
        }
    }
}

/// Whether a scan seeded `seed` writes page `page` (the same answer in every run and order).
fn writes_page(seed: u64, page: usize, fraction: f64) -> bool {
    if fraction <= 0.0 {
        return false;
    }
    // splitmix64 of (seed, page): independent of the order pages are touched in.
    let mut z = seed ^ (page as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) < fraction
}

/// The pages thread `t` of `threads` touches, in order.
fn scan_pages(
    pattern: Pattern,
    t: usize,
    threads: usize,
    pages: usize,
    ops: usize,
    seed: u64,
) -> Vec<usize> {
    let share = pages.div_ceil(threads);
    let part = (t * share).min(pages)..((t + 1) * share).min(pages);
    let mut rng = Rng::new(seed, t as u64);
    match pattern {
        Pattern::Sequential => part.collect(),
        Pattern::Twopass => part.clone().chain(part).collect(),
        Pattern::Random => {
            let mut v: Vec<usize> = part.collect();
            rng.shuffle(&mut v);
            v
        }
        Pattern::Sparse => {
            let mut v: Vec<usize> = part
                .clone()
                .step_by(SPARSE_STRIDE)
                .map(|block| block + rng.below(SPARSE_STRIDE.min(part.end - block)))
                .collect();
            rng.shuffle(&mut v);
            v
        }
        Pattern::Uniform => (0..ops / threads)
            .map(|_| rng.below(pages.max(1)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datafile::fill_page;

    /// Runs `w` over the table `t` and returns its checksum.
    fn run(w: Workload, t: &mut [u8]) -> u64 {
        // SAFETY: the slice outlives the call, has whole pages and is writable; no other
        // reference into it is used meanwhile.
        unsafe { Plan::new(w, t.len()).run(t.as_mut_ptr()) }
    }

    fn table(pages: usize) -> Vec<u8> {
        let mut v = vec![0u8; pages * PAGE];
        for (p, page) in v.chunks_exact_mut(PAGE).enumerate() {
            fill_page(p as u64, page);
        }
        v
    }

    fn scan(pattern: Pattern, threads: usize, write_fraction: f64) -> Workload {
        Workload::Scan {
            pattern,
            threads,
            ops: 3000,
            seed: 7,
            write_fraction,
            stamp: 0xabcd,
        }
    }

    #[test]
    fn test_join_checksum_matches_expected_count() {
        let mut t = table(40);
        for loops in [1, 7, 64] {
            let w = Workload::Join { loops };
            assert_eq!(run(w, &mut t), expected(w, t.len()));
        }
    }

    #[test]
    fn test_scans_checksum_matches_expected_and_detects_corruption() {
        let mut t = table(256);
        for pattern in [
            Pattern::Sequential,
            Pattern::Twopass,
            Pattern::Random,
            Pattern::Sparse,
            Pattern::Uniform,
        ] {
            for threads in [1, 3] {
                let w = scan(pattern, threads, 0.0);
                assert_eq!(run(w, &mut t), expected(w, t.len()));
            }
        }
        t[5 * PAGE + TAG_OFFSET] ^= 1;
        let w = scan(Pattern::Sequential, 2, 0.0);
        assert_ne!(run(w, &mut t), expected(w, t.len()));
    }

    #[test]
    fn test_random_touches_every_page_of_each_part_once_and_sparse_one_in_64() {
        let pages = 1000;
        for threads in [1, 3, 4] {
            let random = Plan::new(scan(Pattern::Random, threads, 0.0), pages * PAGE);
            let mut seen: Vec<usize> = random.parts().iter().flatten().map(|t| t.page()).collect();
            assert_ne!(seen, (0..pages).collect::<Vec<_>>(), "not shuffled");
            seen.sort_unstable();
            assert_eq!(seen, (0..pages).collect::<Vec<_>>());
            let sparse = Plan::new(scan(Pattern::Sparse, threads, 0.0), pages * PAGE);
            let share = pages.div_ceil(threads);
            for (t, part) in sparse.parts().iter().enumerate() {
                // One page per block of 64 of the thread's own part.
                let mut blocks: Vec<usize> = part
                    .iter()
                    .map(|p| {
                        assert_eq!(p.page() / share, t, "{p:?} outside part {t}");
                        (p.page() - t * share) / SPARSE_STRIDE
                    })
                    .collect();
                blocks.sort_unstable();
                let want = (share.min(pages - t * share)).div_ceil(SPARSE_STRIDE);
                assert_eq!(blocks, (0..want).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn test_writing_scan_stamps_its_written_pages_and_keeps_the_checksum() {
        let mut t = table(512);
        let w = scan(Pattern::Random, 2, 0.25);
        let plan = Plan::new(w, t.len());
        // SAFETY: as above; the vector is writable.
        assert_eq!(unsafe { plan.run(t.as_mut_ptr()) }, plan.expected());
        let (stamp, written) = plan.written_pages();
        assert!(
            (90..170).contains(&written.len()),
            "{} written",
            written.len()
        );
        let stamp_at = |p: usize| {
            let at = p * PAGE + STAMP_OFFSET;
            u64::from_ne_bytes(t[at..at + 8].try_into().unwrap())
        };
        for p in 0..512 {
            let written = written.binary_search(&p).is_ok();
            assert_eq!(stamp_at(p) == stamp_of(stamp, p), written, "page {p}");
        }
        // The same pages are chosen in every run, whatever the order.
        let again = Plan::new(scan(Pattern::Sequential, 1, 0.25), t.len());
        assert_eq!(again.written_pages().1, written);
        // SAFETY: as above.
        assert_eq!(unsafe { plan.run(t.as_mut_ptr()) }, plan.expected());
    }
}
