//! `pagepilot bench scale`: what a region costs as it grows from 1 GiB to 8 TiB under a fixed
//! budget (issue 13): map time, time per touch, unmap time and the process's memory
//! (`VmRSS`, `VmPTE`, the pager's own bookkeeping), for sparse files and anonymous regions,
//! random and sequential touches, pagepilot with its defaults beside the kernel's `mmap` in a
//! memory cgroup of the same limit. Every measurement runs in a fresh child process.

pub(crate) mod child;
mod report;

use crate::error::IoContext;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::child::{self as harness, Exit, Role};
use child::Measurement;
pub(crate) use child::{main as child_main, Job};
use report::{Outcome, Report, Row};

use super::cgroup::{CgroupError, MemCgroup};
use super::kernel;
use super::measure::{check_range, Format};
use crate::emit::emit;
use crate::BenchResult;
use pagepilot_pager::sys::{self, PAGE};

const MIB: u64 = 1 << 20;
/// The largest size accepted: the x86-64 user address space.
const MAX_SIZE: u64 = 128 << 40;

/// Arguments of `pagepilot bench scale`.
#[derive(clap::Args)]
pub struct Args {
    /// Region sizes: a number with a unit K, M, G or T (powers of 1024; `1T` = 1 TiB), or
    /// bytes; multiples of the page size.
    #[arg(
        long,
        default_value = "1G,16G,256G,1T,8T",
        value_delimiter = ',',
        value_parser = parse_size
    )]
    sizes: Vec<u64>,
    /// Frame budget of every region, MiB: pagepilot's frames and the kernel's cgroup limit.
    #[arg(long, default_value_t = 64)]
    budget_mb: usize,
    /// Touches per measurement: one byte read or written (half each) at a random page, or at
    /// the next page.
    #[arg(long, default_value_t = 20_000)]
    touches: usize,
    /// Rounds; each runs every row once, back to back, and the table shows medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Longest one measurement (one child) may take, seconds; a slower one is killed and its
    /// row shows "timeout".
    #[arg(long, default_value_t = 300)]
    timeout_s: usize,
    /// Memory cgroup limit of each pagepilot child, MiB, so that a region whose bookkeeping
    /// outgrows the machine is killed alone (its row shows "oom"); needs root, else unlimited.
    #[arg(long, default_value_t = 8192)]
    child_limit_mb: usize,
    /// Tell the kernel its file mappings of random-order rows are read at random
    /// (`MADV_RANDOM`: one page per fault). Default: the kernel's defaults, whose read-around
    /// of each fault (`read_ahead_kb`, 8 MiB on these machines) fills megabytes of holes.
    #[arg(long)]
    kernel_madvise_random: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Directory for the sparse files (must be on a disk, not tmpfs); default: the system's
    /// temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Backing of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// A sparse file made with `set_len`, mapped writable.
    File,
    /// Anonymous memory.
    Anon,
}

/// Order of the touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Pages drawn uniformly from the whole region.
    Random,
    /// Page 0, 1, 2, ... (wrapping around).
    Sequential,
}

/// Who pages the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// pagepilot through the public Rust API with its defaults.
    Pagepilot,
    /// The kernel's `mmap`, in a memory cgroup limited to the budget.
    Kernel,
}

/// A `--sizes` entry that is not a size.
#[derive(Debug, thiserror::Error)]
pub enum SizeError {
    /// Not a number with a unit.
    #[error("{0:?} is not a size (a number with K, M, G or T, e.g. 16G)")]
    Unparsable(String),
    /// Zero, too large, or not a whole number of pages.
    #[error("{0:?} must be a multiple of 4 KiB between 4K and 128T")]
    OutOfRange(String),
}

/// Parses a size: `1G`, `8T`, `512M`, `64K` (powers of 1024, an optional `iB`/`B` after the
/// unit) or plain bytes.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(SizeError::Unparsable(s.into())),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| SizeError::Unparsable(s.into()))?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| SizeError::OutOfRange(s.into()))?;
    if bytes == 0 || bytes > MAX_SIZE || !bytes.is_multiple_of(PAGE as u64) {
        return Err(SizeError::OutOfRange(s.into()));
    }
    Ok(bytes)
}

/// A size as people write it: `1G`, `8T`, `512M`.
pub fn size_label(bytes: u64) -> String {
    let units = [(40, "T"), (30, "G"), (20, "M"), (10, "K")];
    for (shift, unit) in units {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}")
}

/// A failed or refused measurement.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// `--dir` is on tmpfs.
    #[error("{0} is on tmpfs; give a directory on a disk with --dir")]
    Tmpfs(PathBuf),
    /// Creating or removing a file, or starting a child, failed.
    #[error("{what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A memory cgroup could not be made.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// A child could not be run, failed otherwise than by the OOM killer (its stderr was
    /// passed through), or printed no result.
    #[error("measuring {row}")]
    Child {
        /// The row.
        row: String,
        /// Why.
        source: crate::child::ChildError,
    },
}

/// A sparse file of the region's size, removed on drop.
struct SparseFile(PathBuf);

impl SparseFile {
    fn create(dir: &Path, size: u64) -> Result<SparseFile, ScaleError> {
        let path = dir.join(format!(
            "pagepilot-bench-{}-scale-{}.dat",
            std::process::id(),
            size_label(size)
        ));
        let err = |source| ScaleError::Io {
            what: "creating the sparse file",
            path: path.clone(),
            source,
        };
        let file = File::create(&path).map_err(err)?;
        let sparse = SparseFile(path.clone());
        file.set_len(size).map_err(err)?;
        Ok(sparse)
    }
}

impl Drop for SparseFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What the parent needs to run one row's child.
struct Setup<'a> {
    args: &'a Args,
    dir: &'a Path,
    kernel_ok: bool,
}

/// Runs one measurement of `key` in a fresh child.
fn measure(key: &Row, setup: &Setup) -> Result<Outcome, ScaleError> {
    let args = setup.args;
    let budget = args.budget_mb as u64 * MIB;
    let file = match key.backing {
        Backing::File => Some(SparseFile::create(setup.dir, key.size)?),
        Backing::Anon => None,
    };
    let cgroup = match key.side {
        // The kernel's child lowers its limit to the budget on top of what it has charged.
        _ if setup.kernel_ok => Some(MemCgroup::create(args.child_limit_mb * MIB as usize)?),
        _ => None,
    };
    let job = Job {
        side: key.side,
        backing: key.backing,
        order: key.order,
        size: key.size,
        budget,
        touches: args.touches,
        seed: 0x5ca1_e5eed,
        file: file.as_ref().map(|f| f.0.clone()),
        cgroup: cgroup.as_ref().map(|c| c.dir().to_path_buf()),
        madvise_random: args.kernel_madvise_random && key.order == Order::Random,
    };
    let row = key.label();
    let timeout = Duration::from_secs(args.timeout_s as u64);
    let m: Measurement = match harness::run("bench scale", &Role::Scale(job), Some(timeout)) {
        Ok(Exit::Reported(m)) => m,
        Ok(Exit::TimedOut(_)) => return Ok(Outcome::Timeout),
        Ok(Exit::Killed(_)) => return Ok(Outcome::Oom),
        Err(source) => return Err(ScaleError::Child { row, source }),
    };
    drop(cgroup);
    drop(file);
    Ok(Outcome::Measured(m))
}

/// Checks every argument; the first bad one is named in the error.
fn validate(args: &Args) -> BenchResult {
    if args.sizes.is_empty() {
        return Err(crate::BenchError::EmptyList {
            option: "--sizes",
            why: "needs at least one size",
        });
    }
    check_range("--budget-mb", args.budget_mb, 1 << 20)?;
    check_range("--touches", args.touches, 1 << 26)?;
    check_range("--runs", args.runs, 100)?;
    check_range("--timeout-s", args.timeout_s, 86_400)?;
    check_range("--child-limit-mb", args.child_limit_mb, 1 << 30)?;
    Ok(())
}

/// The rows in the order each round runs them: backing, order, size, side.
fn rows(sizes: &[u64], kernel_ok: bool) -> Vec<Row> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let mut v = Vec::new();
    for backing in [Backing::File, Backing::Anon] {
        for order in [Order::Random, Order::Sequential] {
            for &size in &sizes {
                for side in [Side::Pagepilot, Side::Kernel] {
                    if side == Side::Kernel && !kernel_ok {
                        continue;
                    }
                    v.push(Row::new(backing, order, size, side));
                }
            }
        }
    }
    v
}

/// Runs `pagepilot bench scale`.
pub fn run(args: Args) -> BenchResult {
    validate(&args)?;
    let dir = super::datafile::default_dir(args.dir.clone());
    let tmpfs = sys::is_tmpfs(&dir).map_err(|source| ScaleError::Io {
        what: "checking",
        path: dir.clone(),
        source,
    })?;
    if tmpfs {
        return Err(ScaleError::Tmpfs(dir).into());
    }
    let kernel_skipped = kernel::baseline_available()
        .err()
        .map(|e| pagepilot_policy::chain(&e).to_string());
    if let Some(why) = &kernel_skipped {
        eprintln!("bench scale: kernel rows skipped: {why}");
    }
    let setup = Setup {
        args: &args,
        dir: &dir,
        kernel_ok: kernel_skipped.is_none(),
    };
    let mut rows = rows(&args.sizes, setup.kernel_ok);
    let t0 = Instant::now();
    eprintln!(
        "bench scale: {} rows x {} round(s), one child each",
        rows.len(),
        args.runs
    );
    let count = rows.len();
    for round in 0..args.runs {
        for (i, row) in rows.iter_mut().enumerate() {
            eprint!("[{}/{count}] {} ... ", i + 1, row.label());
            let t = Instant::now();
            let outcome = measure(row, &setup)?;
            eprintln!(
                "{} ({:.1} s, round {})",
                outcome.word(),
                t.elapsed().as_secs_f64(),
                round + 1
            );
            row.runs.push(outcome);
        }
    }
    let report = Report::new(&args, rows, kernel_skipped, t0.elapsed().as_secs_f64());
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, &report, |out| report.write_text(out))
        .doing("writing the report")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sizes_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("8T").unwrap(), 8 << 40);
        assert_eq!(parse_size("16GiB").unwrap(), 16 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("8192").unwrap(), 8192);
        for bad in [
            "0",
            "0G",
            "G",
            "1X",
            "abc",
            "",
            "100",
            "129T",
            "99999999999T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(size_label(1 << 40), "1T");
        assert_eq!(size_label(256 << 30), "256G");
    }

    #[test]
    fn test_rows_run_by_backing_order_size_side() {
        let r = rows(&[16 << 30, 1 << 30, 1 << 30], true);
        assert_eq!(r.len(), 2 * 2 * 2 * 2);
        assert_eq!(r[0].size, 1 << 30);
        assert_eq!((r[0].side, r[1].side), (Side::Pagepilot, Side::Kernel));
        assert_eq!(rows(&[1 << 30], false).len(), 4);
    }
}
