//! One measurement of `bench scale`, in a fresh child process (this binary re-executed by
//! [`crate::child`]): map a region (pagepilot's defaults, or the kernel's `mmap` in a memory
//! cgroup of the budget), touch it, unmap it, and print what it cost as one JSON line.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Backing, Order, Side};
use crate::cgroup;
use pagepilot_pager::sys::{self, Mapping, PAGE};
use pagepilot_pager::Region;

/// The policy of the pagepilot rows: the name a user gives with no option beside it.
pub const POLICY: &str = "lru";

/// What the parent tells the child.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    /// pagepilot or the kernel.
    pub side: Side,
    /// A sparse file or anonymous memory.
    pub backing: Backing,
    /// Random or sequential touches.
    pub order: Order,
    /// The region's size in bytes.
    pub size: u64,
    /// pagepilot's frame budget; the kernel's cgroup limit on top of what the child has
    /// charged before mapping.
    pub budget: u64,
    /// Touches.
    pub touches: usize,
    /// Seed of the touches (the same for every row).
    pub seed: u64,
    /// The sparse file (file backing).
    pub file: Option<PathBuf>,
    /// The memory cgroup to join first: the kernel's of the budget, or pagepilot's cap.
    pub cgroup: Option<PathBuf>,
    /// The kernel's mapping is advised `MADV_RANDOM`.
    pub madvise_random: bool,
}

/// What one child measured.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Measurement {
    /// Mapping the region (pagepilot: `Region::map_file`/`map_anon`; the kernel: open and
    /// `mmap`), ns.
    pub map_ns: u64,
    /// Median time of one touch, ns.
    pub touch_p50_ns: u64,
    /// Mean time of one touch (sum of the touches' times / touches), ns.
    pub touch_mean_ns: u64,
    /// 99th percentile of a touch, ns.
    pub touch_p99_ns: u64,
    /// Unmapping, dirty pages written back included (pagepilot: `Region::unmap`; the kernel:
    /// `msync(MS_SYNC)` of a file mapping, then `munmap`), ns.
    pub unmap_ns: u64,
    /// Pages resident at unmap: pagepilot's frames in use (`RegionStats::frames_in_use`); the
    /// kernel's pages charged to its cgroup since it mapped.
    pub resident_pages: u64,
    /// `VmRSS` before mapping, KiB.
    pub rss_before_kib: u64,
    /// `VmRSS` after the touches (before unmapping), KiB.
    pub rss_after_kib: u64,
    /// `VmPTE` before mapping, KiB.
    pub pte_before_kib: u64,
    /// `VmPTE` after the touches, KiB.
    pub pte_after_kib: u64,
    /// `RssAnon` (private memory: heap, the pager's records, stacks) before mapping, KiB.
    #[serde(default)]
    pub anon_before_kib: u64,
    /// `RssAnon` after the touches, KiB.
    #[serde(default)]
    pub anon_after_kib: u64,
    /// Memory holding the region's pages after the touches: pagepilot's frames as the kernel
    /// counts them (`Region::allocated_bytes`, mapped or not: `VmRSS` misses frames whose
    /// entries reference-bit emulation zapped); the kernel's resident pages.
    #[serde(default)]
    pub frames_bytes: u64,
    /// Bytes held by the pager's structures for the region after the touches
    /// (`RegionStats::bookkeeping_bytes`); `None` for the kernel.
    pub bookkeeping_bytes: Option<u64>,
    /// Reads whose byte was checked against what was written before (or zero).
    pub reads_checked: u64,
    /// Distinct written bytes read back from the file with `pread` after the unmap (file
    /// backing; 0 for anonymous memory).
    pub writes_checked: u64,
    /// Kernel rows: what the touches' page tables can take at most, added to the cgroup's
    /// limit on top of the budget (page tables are charged to the cgroup; the targets keep
    /// them apart). 0 for pagepilot.
    #[serde(default)]
    pub pte_allowance_bytes: u64,
}

/// Failure inside the child.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::child::ChildError),
    /// A system call or file operation failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The cgroup could not be joined or set.
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    /// pagepilot refused to map the region.
    #[error("mapping the region")]
    Map(#[from] pagepilot_pager::MapError),
    /// pagepilot's unmap failed to write dirty pages back.
    #[error("unmapping the region")]
    Unmap(#[from] pagepilot_pager::FlushError),
    /// A file job without a file.
    #[error("a file job needs a file")]
    NoFile,
    /// A byte read back differs from the one last written there.
    #[error("{what} at offset {offset}: read {got}, expected {want}")]
    Mismatch {
        /// During the touches, or reading the file back after the unmap.
        what: &'static str,
        /// The byte's offset in the region.
        offset: u64,
        /// What was read.
        got: u8,
        /// What was written there last (0: never written).
        want: u8,
    },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ChildError {
    move |source| ChildError::Io { what, source }
}

/// One touch: a byte offset in the region and the value written there (0: a read).
#[derive(Clone, Copy)]
struct Touch {
    offset: u64,
    value: u8,
}

/// splitmix64: a small, fixed generator, so that every row and side touches the same bytes.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The touches of a job: random pages or the next page (wrapping around), a random byte in
/// each, half of them writes of a non-zero byte.
fn plan(job: &Job) -> Vec<Touch> {
    let pages = job.size / PAGE as u64;
    let mut state = job.seed;
    (0..job.touches as u64)
        .map(|i| {
            let page = match job.order {
                Order::Random => next(&mut state) % pages,
                Order::Sequential => i % pages,
            };
            let r = next(&mut state);
            let value = if r & 1 == 1 { (r >> 8) % 255 + 1 } else { 0 };
            Touch {
                offset: page * PAGE as u64 + (r >> 16) % PAGE as u64,
                value: value as u8,
            }
        })
        .collect()
}

/// Runs the touches at `base`: each one timed alone into `times`, each read's byte into `read`.
///
/// # Safety
/// `base` must point to a readable and writable mapping covering every touch's offset.
unsafe fn touch(base: *mut u8, touches: &[Touch], times: &mut [u64], read: &mut [u8]) {
    for (i, t) in touches.iter().enumerate() {
        // SAFETY: the caller guarantees the offset lies in the mapping.
        let p = unsafe { base.add(t.offset as usize) };
        let t0 = Instant::now();
        if t.value != 0 {
            // SAFETY: as above; the mapping is writable.
            unsafe { p.write_volatile(t.value) };
        } else {
            // SAFETY: as above.
            read[i] = unsafe { p.read_volatile() };
        }
        times[i] = t0.elapsed().as_nanos() as u64;
    }
}

/// Checks each read against the last byte written there before (0 if none); returns the
/// count of reads and the last value written at each offset.
fn check_reads(
    touches: &[Touch],
    read: &[u8],
) -> Result<(u64, std::collections::HashMap<u64, u8>), ChildError> {
    let mut shadow = std::collections::HashMap::new();
    let mut reads = 0;
    for (t, &got) in touches.iter().zip(read) {
        if t.value != 0 {
            shadow.insert(t.offset, t.value);
            continue;
        }
        reads += 1;
        let want = shadow.get(&t.offset).copied().unwrap_or(0);
        if got != want {
            return Err(ChildError::Mismatch {
                what: "a read during the touches",
                offset: t.offset,
                got,
                want,
            });
        }
    }
    Ok((reads, shadow))
}

/// Reads every written byte back from the file with `pread`.
fn check_file(file: &File, shadow: &std::collections::HashMap<u64, u8>) -> Result<u64, ChildError> {
    // Read-ahead would fill megabytes of holes around each byte.
    // SAFETY: posix_fadvise only changes the kernel's read-ahead for this file.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let mut byte = [0u8];
    for (&offset, &want) in shadow {
        file.read_exact_at(&mut byte, offset)
            .map_err(io("reading the file back"))?;
        if byte[0] != want {
            return Err(ChildError::Mismatch {
                what: "the file read back after the unmap",
                offset,
                got: byte[0],
                want,
            });
        }
    }
    Ok(shadow.len() as u64)
}

/// Most bytes of page tables the touches can need: a page-table page for each 2 MiB, 1 GiB
/// and 512 GiB range they touch, and one more at the top.
fn page_table_bytes(touches: &[Touch]) -> u64 {
    let tables: usize = [21, 30, 39]
        .iter()
        .map(|&shift| {
            let mut ranges: Vec<u64> = touches.iter().map(|t| t.offset >> shift).collect();
            ranges.sort_unstable();
            ranges.dedup();
            ranges.len()
        })
        .sum();
    (tables as u64 + 1) * PAGE as u64
}

/// `VmRSS`, `VmPTE` and `RssAnon` of this process, KiB.
fn vm_status() -> Result<(u64, u64, u64), ChildError> {
    let text = std::fs::read_to_string("/proc/self/status").map_err(io("/proc/self/status"))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Ok((field("VmRSS:"), field("VmPTE:"), field("RssAnon:")))
}

/// Percentile `q` (0..=1) of sorted `xs`.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

/// A mapping made by the kernel child.
enum KernelMap {
    File(File, Mapping),
    Anon(usize, usize),
}

impl KernelMap {
    fn ptr(&self) -> *mut u8 {
        match self {
            KernelMap::File(_, m) => m.ptr(),
            KernelMap::Anon(addr, _) => *addr as *mut u8,
        }
    }
}

fn kernel_map(job: &Job) -> Result<KernelMap, ChildError> {
    let len = job.size as usize;
    match job.backing {
        Backing::File => {
            let path = job.file.as_ref().ok_or(ChildError::NoFile)?;
            let file = File::options()
                .read(true)
                .write(true)
                .open(path)
                .map_err(io("opening the file"))?;
            let map = Mapping::shared(file.as_raw_fd(), len, true).map_err(io("mmap"))?;
            if job.madvise_random {
                map.advise_random().map_err(io("madvise"))?;
            }
            Ok(KernelMap::File(file, map))
        }
        Backing::Anon => {
            let prot = libc::PROT_READ | libc::PROT_WRITE;
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
            // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust object.
            let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
            if p == libc::MAP_FAILED {
                return Err(io("mmap")(std::io::Error::last_os_error()));
            }
            Ok(KernelMap::Anon(p as usize, len))
        }
    }
}

/// Writes a file mapping's dirty pages back and unmaps it; returns the file, if any.
fn kernel_unmap(map: KernelMap) -> Result<Option<File>, ChildError> {
    match map {
        KernelMap::File(file, m) => {
            sys::msync(m.ptr() as usize, m.len()).map_err(io("msync"))?;
            drop(m);
            Ok(Some(file))
        }
        KernelMap::Anon(addr, len) => {
            // SAFETY: the mapping made by `kernel_map`, unmapped once; no reference into it
            // outlives this call.
            unsafe { libc::munmap(addr as *mut libc::c_void, len) };
            Ok(None)
        }
    }
}

/// The child side: runs `job` (JSON) and prints its [`Measurement`] as JSON on stdout.
pub fn main(job: Job) -> Result<(), ChildError> {
    // If anything is killed for memory, let it be this child (the current pager's per-page
    // arrays of a terabyte region can outgrow the machine).
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    let touches = plan(&job);
    let mut times = vec![0u64; touches.len()];
    let mut read = vec![0u8; touches.len()];
    let mut charged = 0;
    let mut allowance = 0;
    if let Some(cg) = &job.cgroup {
        if job.side == Side::Kernel {
            // As the other kernel baselines: its code locked while charged to the parent.
            cgroup::enter(cg, cgroup::Entry::CodeLocked)?;
            allowance = page_table_bytes(&touches);
            charged = cgroup::limit_above_charged(cg, job.budget + allowance)?;
        } else {
            cgroup::enter(cg, cgroup::Entry::AsIs)?;
        }
    }
    let (rss0, pte0, anon0) = vm_status()?;
    let mut m = Measurement {
        rss_before_kib: rss0,
        pte_before_kib: pte0,
        anon_before_kib: anon0,
        pte_allowance_bytes: allowance,
        ..Measurement::default()
    };
    let file = match job.side {
        Side::Pagepilot => {
            let t0 = Instant::now();
            let region = match (&job.backing, &job.file) {
                (Backing::File, Some(path)) => {
                    Region::map_file(path, true, job.budget as usize, POLICY)?
                }
                (Backing::File, None) => return Err(ChildError::NoFile),
                (Backing::Anon, _) => {
                    Region::map_anon(job.size as usize, job.budget as usize, POLICY)?
                }
            };
            m.map_ns = t0.elapsed().as_nanos() as u64;
            // SAFETY: the region is mapped writable until `unmap` below and every offset of
            // the plan is below its size (`plan` draws pages below size / PAGE).
            unsafe { touch(region.as_ptr(), &touches, &mut times, &mut read) };
            (m.rss_after_kib, m.pte_after_kib, m.anon_after_kib) = vm_status()?;
            m.frames_bytes = region.allocated_bytes();
            let stats = region.stats();
            m.resident_pages = stats.frames_in_use;
            m.bookkeeping_bytes = Some(stats.bookkeeping_bytes);
            let t0 = Instant::now();
            region.unmap()?;
            m.unmap_ns = t0.elapsed().as_nanos() as u64;
            match &job.file {
                Some(path) if job.backing == Backing::File => {
                    Some(File::open(path).map_err(io("opening the file"))?)
                }
                _ => None,
            }
        }
        Side::Kernel => {
            let t0 = Instant::now();
            let map = kernel_map(&job)?;
            m.map_ns = t0.elapsed().as_nanos() as u64;
            // SAFETY: the mapping is readable and writable, covers `size` bytes, and lives
            // until `kernel_unmap` below.
            unsafe { touch(map.ptr(), &touches, &mut times, &mut read) };
            (m.rss_after_kib, m.pte_after_kib, m.anon_after_kib) = vm_status()?;
            if let Some(cg) = &job.cgroup {
                // Less the page tables the touches added (kernel memory charged beside).
                let tables = (m.pte_after_kib.saturating_sub(pte0)) << 10;
                let data = cgroup::usage(cg)?.saturating_sub(charged + tables);
                m.resident_pages = data / PAGE as u64;
                m.frames_bytes = m.resident_pages * PAGE as u64;
            }
            let t0 = Instant::now();
            let file = kernel_unmap(map)?;
            m.unmap_ns = t0.elapsed().as_nanos() as u64;
            file
        }
    };
    let (reads, shadow) = check_reads(&touches, &read)?;
    m.reads_checked = reads;
    if let Some(file) = &file {
        m.writes_checked = check_file(file, &shadow)?;
    }
    m.touch_mean_ns = times.iter().sum::<u64>() / times.len().max(1) as u64;
    times.sort_unstable();
    m.touch_p50_ns = percentile(&times, 0.5);
    m.touch_p99_ns = percentile(&times, 0.99);
    crate::child::report(&m)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(order: Order, size: u64) -> Job {
        Job {
            side: Side::Pagepilot,
            backing: Backing::File,
            order,
            size,
            budget: 1 << 20,
            touches: 1000,
            seed: 7,
            file: None,
            cgroup: None,
            madvise_random: false,
        }
    }

    #[test]
    fn test_plan_stays_in_the_region_and_writes_about_half() {
        for order in [Order::Random, Order::Sequential] {
            let j = job(order, 64 * PAGE as u64);
            let p = plan(&j);
            assert_eq!(p.len(), 1000);
            assert!(p.iter().all(|t| t.offset < j.size));
            let writes = p.iter().filter(|t| t.value != 0).count();
            assert!((400..600).contains(&writes), "{writes} writes");
            assert_eq!(p.len(), plan(&j).len());
        }
        let seq = plan(&job(Order::Sequential, 64 * PAGE as u64));
        assert_eq!(seq[65].offset / PAGE as u64, 1, "wraps around");
    }

    #[test]
    fn test_check_reads_finds_a_wrong_byte() {
        let touches = [
            Touch {
                offset: 5,
                value: 9,
            },
            Touch {
                offset: 5,
                value: 0,
            },
            Touch {
                offset: 6,
                value: 0,
            },
        ];
        let (reads, shadow) = check_reads(&touches, &[0, 9, 0]).unwrap();
        assert_eq!((reads, shadow.len()), (2, 1));
        assert!(check_reads(&touches, &[0, 8, 0]).is_err());
    }

    #[test]
    fn test_page_table_allowance_counts_each_range_once() {
        let at = |offset| Touch { offset, value: 0 };
        // Two pages of one 2 MiB range, one of another 1 GiB range.
        let touches = [at(0), at(4096), at(3 << 30)];
        assert_eq!(page_table_bytes(&touches), (2 + 2 + 1 + 1) * PAGE as u64);
    }
}
