//! One run of `bench far`: a fresh region over one backing, its pages read
//! once (or written once and written back) by some threads, timed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pagepilot_far::RedisManager;
use pagepilot_pager::dataspace::{DataspaceId, Manager};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

const PAGE: usize = 4096;

/// What backs a region in one row, and what its threads do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The far dataspace, pager defaults: reads.
    Redis,
    /// The same, fault-around and read-ahead set to the hash-tag window.
    RedisTuned,
    /// The same dataspace through a manager doing one GET per page.
    Naive,
    /// The same bytes in a local file (in the page cache).
    File,
    /// The far dataspace, pager defaults: every page written, then the
    /// region unmapped (its pages written back).
    Write,
    /// The same through a manager whose write-backs wait for a replica
    /// (`WAIT`).
    WriteWaited,
}

impl Side {
    /// The rows of reads.
    pub const READS: [Side; 4] = [Side::Redis, Side::RedisTuned, Side::Naive, Side::File];
    /// The rows of writes.
    pub const WRITES: [Side; 2] = [Side::Write, Side::WriteWaited];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Side::Redis => "redis",
            Side::RedisTuned => "redis-tuned",
            Side::Naive => "naive",
            Side::File => "file",
            Side::Write => "write",
            Side::WriteWaited => "write-waited",
        }
    }
}

/// The far dataspace a run maps and the managers that serve it.
pub struct Far<'a> {
    /// Windows per MGET, no replica wait.
    pub batched: &'a Arc<RedisManager>,
    /// One GET per page.
    pub naive: &'a Arc<RedisManager>,
    /// Windows per MGET, write-backs waiting for a replica.
    pub waited: &'a Arc<RedisManager>,
    /// The dataspace.
    pub id: &'a DataspaceId,
    /// The same bytes in a local file.
    pub file: &'a Path,
    /// Its pages.
    pub pages: usize,
}

impl Far<'_> {
    /// The manager serving `side`.
    pub fn manager(&self, side: Side) -> &Arc<RedisManager> {
        match side {
            Side::Naive => self.naive,
            Side::WriteWaited => self.waited,
            _ => self.batched,
        }
    }

    /// Maps a fresh region of the side's backing, touches every page once
    /// with `threads` threads (a read, or for the write sides a write),
    /// and unmaps it (writing dirty pages back): the time from the first
    /// touch to the end of the unmap.
    pub fn run(
        &self,
        side: Side,
        threads: usize,
        random: bool,
    ) -> Result<Duration, crate::BenchError> {
        let len = self.pages * PAGE;
        let write = Side::WRITES.contains(&side);
        let backing = match side {
            Side::File => Backing::File {
                path: PathBuf::from(self.file),
                writable: false,
            },
            _ => {
                let m: Arc<dyn Manager> = self.manager(side).clone();
                let whole = Attachment::whole(m, self.id.clone());
                Backing::Dataspaces(vec![if write { whole } else { whole.read_only() }])
            }
        };
        let mut opts = RegionOptions::new(backing, len, "clock");
        if side == Side::RedisTuned {
            opts = opts.with_fault_around(64).with_readahead(512);
        }
        let region = Region::map(opts)?;
        let base = region.as_ptr() as usize;
        let start = Instant::now();
        let sum = touch_all(base, self.pages, threads, random, write);
        std::hint::black_box(sum);
        region.unmap()?;
        Ok(start.elapsed())
    }
}

/// Touches every page of the `pages` at `base` once, each of `threads`
/// threads its share, in order or in a random order of it: a read, or a
/// write of the page's first byte.
fn touch_all(base: usize, pages: usize, threads: usize, random: bool, write: bool) -> u64 {
    let share = pages.div_ceil(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let first = (t * share).min(pages);
                    let end = ((t + 1) * share).min(pages);
                    let mut order: Vec<usize> = (first..end).collect();
                    if random {
                        let mut x = 0x2545_F491_4F6C_DD1Du64 ^ t as u64;
                        for i in (1..order.len()).rev() {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            order.swap(i, (x % (i as u64 + 1)) as usize);
                        }
                    }
                    let mut sum = 0u64;
                    for p in order {
                        let at = (base + p * PAGE) as *mut u8;
                        // SAFETY: page `p < pages` of the mapped region,
                        // writable when `write`; this thread alone touches it.
                        unsafe {
                            let v = at.read_volatile();
                            if write {
                                at.write_volatile(v ^ 1);
                            }
                            sum += u64::from(v);
                        }
                    }
                    sum
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(0))
            .sum::<u64>()
    })
}
