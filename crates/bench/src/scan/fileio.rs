//! `bench scan`'s own file I/O, in the benchmark's process: filling the page cache before a
//! warm run, the buffered-`pread` baseline of warm cases, and reading a writing run's stamps
//! back from the file.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use pagepilot_pager::sys::{self, PAGE};

use crate::datafile::DataFile;
use crate::measure::{read_bytes_self, Measured};
use crate::workload::{stamp_of, Plan, Touch, STAMP_OFFSET, TAG_OFFSET};

/// Bytes per read when the whole file is read (warming, checking stamps).
const CHUNK: usize = 1 << 20;

/// Puts the whole file in the page cache (buffered reads of all of it, unless `cachestat`
/// says it is there already) and returns how many of its pages the cache holds.
pub fn warm(file: &DataFile) -> io::Result<u64> {
    let f = File::open(file.path())?;
    let cached = |f: &File| sys::cached_pages(f.as_raw_fd(), 0, file.len() as u64);
    if cached(&f)? < file.pages() as u64 {
        let mut buf = vec![0u8; CHUNK];
        for off in (0..file.len()).step_by(CHUNK) {
            let n = CHUNK.min(file.len() - off);
            f.read_exact_at(&mut buf[..n], off as u64)?;
        }
    }
    cached(&f)
}

/// The baseline of warm cases: each thread `pread`s its pages, in the plan's order, one page
/// at a time into a buffer of its own (and `pwrite`s back those it writes, stamped, with a
/// `fdatasync` at the end, inside the time).
pub fn pread_run(file: &DataFile, plan: &Plan) -> io::Result<Measured> {
    let writes = plan.workload().writes();
    let f = File::options().read(true).write(writes).open(file.path())?;
    let (stamp, _) = plan.written_pages();
    let read0 = read_bytes_self()?;
    let cpu0 = pagepilot_pager::sys::cpu_us_self();
    let t0 = Instant::now();
    let sums = std::thread::scope(|s| {
        let handles: Vec<_> = plan
            .parts()
            .iter()
            .map(|part| {
                let f = &f;
                s.spawn(move || pread_part(f, part, stamp))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("thread panicked")))
            })
            .collect::<io::Result<Vec<u64>>>()
    })?;
    if writes {
        f.sync_data()?;
    }
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    Ok(Measured {
        elapsed_ns,
        cpu_us: pagepilot_pager::sys::cpu_us_self() - cpu0,
        bytes_read: read_bytes_self()? - read0,
        checksum: sums.into_iter().fold(0, u64::wrapping_add),
        ..Default::default()
    })
}

/// One thread of [`pread_run`]: the sum of the tags it read.
fn pread_part(f: &File, part: &[Touch], stamp: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; PAGE];
    let mut sum = 0u64;
    for t in part {
        let off = (t.page() * PAGE) as u64;
        f.read_exact_at(&mut buf, off)?;
        sum = sum.wrapping_add(field(&buf, TAG_OFFSET));
        if t.writes() {
            buf[STAMP_OFFSET..STAMP_OFFSET + 8]
                .copy_from_slice(&stamp_of(stamp, t.page()).to_ne_bytes());
            f.write_all_at(&buf, off)?;
        }
    }
    Ok(sum)
}

/// The 8-byte field at `at` of `buf`.
fn field(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_ne_bytes(b)
}

/// A writing run's stamp that the file does not hold.
#[derive(Debug, thiserror::Error)]
pub enum LostWrite {
    /// The file could not be read back.
    #[error("reading the file back")]
    Io(#[from] io::Error),
    /// A written page holds another stamp.
    #[error(
        "page {page} of the file holds stamp {got:#x} after the run, not {want:#x}: \
         a write did not reach the file"
    )]
    Stamp {
        /// The page.
        page: usize,
        /// What the file holds.
        got: u64,
        /// What the run wrote.
        want: u64,
    },
}

/// Reads back (buffered, through the file) every page the run of `plan` wrote and checks that
/// it holds the run's stamp; returns how many pages were checked (0 for a plan that writes
/// nothing).
pub fn check_written(file: &DataFile, plan: &Plan) -> Result<u64, LostWrite> {
    let (stamp, pages) = plan.written_pages();
    if pages.is_empty() {
        return Ok(0);
    }
    let f = File::open(file.path())?;
    let mut buf = vec![0u8; CHUNK];
    let mut loaded = None;
    for &page in &pages {
        let chunk = page * PAGE / CHUNK;
        if loaded != Some(chunk) {
            let off = chunk * CHUNK;
            let n = CHUNK.min(file.len() - off);
            f.read_exact_at(&mut buf[..n], off as u64)?;
            loaded = Some(chunk);
        }
        let got = field(&buf, page * PAGE % CHUNK + STAMP_OFFSET);
        let want = stamp_of(stamp, page);
        if got != want {
            return Err(LostWrite::Stamp { page, got, want });
        }
    }
    Ok(pages.len() as u64)
}

/// The `read_ahead_kb` of the block device holding `path` (its disk's, for a partition), which
/// sizes the kernel's read-around on faults of a mapping; `None` if not found.
pub fn read_ahead_kb(path: &Path) -> Option<u64> {
    pagepilot_pager::sys::device_readahead_kb(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Pattern, Workload};

    #[test]
    fn test_pread_baseline_writes_stamps_that_the_check_reads_back_and_a_lost_one_fails_it() {
        let file = DataFile::create(&std::env::temp_dir(), "fileio-test", 1 << 20).unwrap();
        assert_eq!(warm(&file).unwrap(), file.pages() as u64);
        let w = Workload::Scan {
            pattern: Pattern::Random,
            threads: 2,
            ops: 0,
            seed: 3,
            write_fraction: 0.5,
            stamp: 0,
        };
        let mut plan = Plan::new(w, file.len());
        plan.set_stamp(0x1234);
        let m = pread_run(&file, &plan).unwrap();
        assert_eq!(m.checksum, plan.expected());
        let (_, written) = plan.written_pages();
        assert_eq!(check_written(&file, &plan).unwrap(), written.len() as u64);
        // A run with another stamp finds the first run's stamps: lost writes.
        plan.set_stamp(0x5678);
        match check_written(&file, &plan) {
            Err(LostWrite::Stamp { page, got, want }) => {
                assert_eq!(page, written[0]);
                assert_eq!(got, stamp_of(0x1234, page));
                assert_eq!(want, stamp_of(0x5678, page));
            }
            other => panic!("{other:?}"),
        }
    }
}
