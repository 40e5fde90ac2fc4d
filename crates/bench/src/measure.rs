//! What one run of a workload measured, for pagepilot and the kernel alike, and medians.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::emit::Format;

/// One run of a workload.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Measured {
    /// Wall-clock time of the workload (mapping and unmapping excluded).
    pub elapsed_ns: u64,
    /// Page-ins: pagepilot's missing faults, or the kernel's major faults.
    pub faults: u64,
    /// Minor faults (pagepilot: reference emulation; kernel: mapped from the page cache).
    pub minor_faults: u64,
    /// Bytes read from the block device by the process (`/proc/<pid>/io` `read_bytes`).
    pub bytes_read: u64,
    /// The workload's checksum.
    pub checksum: u64,
    /// Kernel runs: memory the child process itself had charged to its cgroup before the
    /// workload (binary, heap, stacks), added to the cgroup limit so that the file's pages get
    /// the same budget as pagepilot's frames. 0 for pagepilot.
    #[serde(default)]
    pub cgroup_baseline_bytes: u64,
    /// CPU time of the whole process during the workload, every thread (pagepilot's
    /// handlers and readers included), us.
    #[serde(default)]
    pub cpu_us: u64,
}

/// A measurement a median is taken of: totally ordered (floats by
/// `total_cmp`), with a zero for no measurement at all.
pub trait Ranked: Copy + Default {
    /// The order medians sort by.
    fn rank(&self, other: &Self) -> Ordering;
}

impl Ranked for u64 {
    fn rank(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

impl Ranked for i64 {
    fn rank(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

impl Ranked for f64 {
    fn rank(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

impl Ranked for Duration {
    fn rank(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

/// Median of `xs` (upper median for even counts); zero for none.
pub fn median<T: Ranked>(mut xs: Vec<T>) -> T {
    xs.sort_unstable_by(T::rank);
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

/// Field-wise median of several runs (each field separately, as the runs are noisy).
pub fn median_of(runs: &[Measured]) -> Measured {
    let m = |f: fn(&Measured) -> u64| median(runs.iter().map(f).collect());
    Measured {
        elapsed_ns: m(|r| r.elapsed_ns),
        faults: m(|r| r.faults),
        minor_faults: m(|r| r.minor_faults),
        bytes_read: m(|r| r.bytes_read),
        checksum: runs.first().map_or(0, |r| r.checksum),
        cgroup_baseline_bytes: m(|r| r.cgroup_baseline_bytes),
        cpu_us: m(|r| r.cpu_us),
    }
}

/// `a / b`; `None` when `b` is 0 (nothing to compare with). The bench's one ratio: a report
/// shows the `None` as it always has, `null` or `-` where it says "no ratio", 0 where its
/// field is a number (`.unwrap_or(0.0)`).
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// Per-round speedups over the kernel and their median and range.
#[derive(Serialize)]
pub struct PairedSpeedup {
    /// Median over rounds.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Kernel time / policy time in each round, in order.
    pub rounds: Vec<f64>,
}

impl PairedSpeedup {
    /// `kernel[i] / policy[i]` for each round `i`.
    pub fn of(kernel: &[Measured], policy: &[Measured]) -> Option<PairedSpeedup> {
        let rounds: Vec<f64> = kernel
            .iter()
            .zip(policy)
            .map(|(k, p)| ratio(k.elapsed_ns as f64, p.elapsed_ns as f64).unwrap_or(0.0))
            .collect();
        let mut sorted = rounds.clone();
        sorted.sort_by(f64::total_cmp);
        Some(PairedSpeedup {
            median: *sorted.get(sorted.len() / 2)?,
            min: *sorted.first()?,
            max: *sorted.last()?,
            rounds,
        })
    }
}

/// Bytes this process (all its threads) caused to be read from a block device
/// (`read_bytes` of `/proc/self/io`).
pub fn read_bytes_self() -> std::io::Result<u64> {
    read_bytes_in("/proc/self/io")
}

/// The same for the calling thread alone (`/proc/thread-self/io`).
pub fn read_bytes_thread() -> std::io::Result<u64> {
    read_bytes_in("/proc/thread-self/io")
}

fn read_bytes_in(io: &str) -> std::io::Result<u64> {
    let text = std::fs::read_to_string(io)?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("no read_bytes in {io}"),
            )
        })
}

/// Arguments of the benchmarks that run a workload over a data file, against the kernel.
#[derive(clap::Args)]
pub struct FileBenchArgs {
    /// Runs per point; the median is reported.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Directory for the data file (must be on a disk, not tmpfs).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// A count argument outside its bounds.
#[derive(Debug, thiserror::Error)]
#[error("{0} must be between 1 and {1}")]
pub struct OutOfRange(pub &'static str, pub usize);

/// Checks that `v`, the value of argument `name`, is between 1 and `max`.
pub fn check_range(name: &'static str, v: usize, max: usize) -> Result<(), OutOfRange> {
    if v == 0 || v > max {
        return Err(OutOfRange(name, max));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_median_takes_the_middle_run_per_field() {
        let runs = [
            Measured {
                elapsed_ns: 5,
                faults: 1,
                ..Default::default()
            },
            Measured {
                elapsed_ns: 1,
                faults: 9,
                ..Default::default()
            },
            Measured {
                elapsed_ns: 3,
                faults: 4,
                ..Default::default()
            },
        ];
        let m = median_of(&runs);
        assert_eq!((m.elapsed_ns, m.faults), (3, 4));
    }

    fn timed(ms: &[u64]) -> Vec<Measured> {
        ms.iter()
            .map(|&ms| Measured {
                elapsed_ns: ms * 1_000_000,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn test_paired_speedup_divides_within_each_round() {
        // The kernel slows down in round 2; the policy with it: per round the ratio holds.
        let s = PairedSpeedup::of(&timed(&[400, 800, 420]), &timed(&[200, 400, 300])).unwrap();
        assert_eq!(s.rounds, [2.0, 2.0, 1.4]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.4, 2.0));
        assert!(PairedSpeedup::of(&[], &[]).is_none());
    }
}
