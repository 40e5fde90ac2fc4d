//! The memory cgroup a process's frames are charged to. Frames are shared
//! memory the kernel cannot reclaim (there is no swap): a budget beyond
//! what the cgroup's limit leaves gets the process killed by the cgroup's
//! OOM killer where the kernel's page cache would have shrunk (issue 32:
//! the HiPEC join with 40 MB of frames in a 44 MB cgroup, killed in 2 runs
//! of 5). So a region alone, or a pool, is given at most what fits
//! ([`fit`]): the limit, less what the cgroup holds that cannot be
//! reclaimed (anonymous and shared memory, and mapped files: the programs'
//! text, which reclaim would only make them read again; or the budgets
//! this process has promised already, whichever is more), less a headroom
//! for the process's own growth. A cut budget is reported in the region's
//! (or pool's) statistics.
//!
//! Mapped files count since the join of issue 32 in a 44 MB cgroup was
//! killed once in 20 runs with them left out: the frames (34.5 MiB) and
//! anonymous memory (5.7 MiB) left the two programs' text under 3 MiB,
//! read again and again (`workingset_refault_file` 242,667) until reclaim
//! gave up.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::sys::PAGE;

/// Least headroom left beside the frames, bytes.
const HEADROOM_MIN: u64 = 4 << 20;
/// Headroom as a share of the limit: 1/HEADROOM_SHARE.
const HEADROOM_SHARE: u64 = 8;

/// Frames promised to this process's live regions and pools, bytes.
static PROMISED: AtomicU64 = AtomicU64::new(0);

/// What a process's memory cgroup allows, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryCgroup {
    /// The limit (v1 `memory.limit_in_bytes`, v2 `memory.max`).
    pub limit: u64,
    /// Memory charged to it that the kernel cannot reclaim, or only from
    /// a program that then reads it again: anonymous memory, and shared
    /// memory with mapped files (`memory.stat`: v1 `rss` + the larger of
    /// `shmem` and `mapped_file`, v2 `anon` + the larger of `shmem` and
    /// `file_mapped`; the mapped count holds mapped shared memory too).
    pub unreclaimable: u64,
}

impl MemoryCgroup {
    /// This process's memory cgroup, if it has a limit below the
    /// machine's memory.
    pub fn of_this_process() -> Option<MemoryCgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let total = machine_memory()?;
        MemoryCgroup::parse(&own, |path| std::fs::read_to_string(path).ok())
            .filter(|c| c.limit < total)
    }

    /// The memory cgroup `self_cgroup` (the text of `/proc/self/cgroup`)
    /// names, its files read by `read` (a path to its text).
    pub fn parse(self_cgroup: &str, read: impl Fn(&str) -> Option<String>) -> Option<MemoryCgroup> {
        for line in self_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let (dir, limit, anon, mapped) = if controllers.split(',').any(|c| c == "memory") {
                (
                    format!("/sys/fs/cgroup/memory{path}"),
                    "memory.limit_in_bytes",
                    "rss",
                    "mapped_file",
                )
            } else if controllers.is_empty() {
                (
                    format!("/sys/fs/cgroup{path}"),
                    "memory.max",
                    "anon",
                    "file_mapped",
                )
            } else {
                continue;
            };
            // v2's "max": no limit.
            let Some(limit) = read(&format!("{dir}/{limit}")).and_then(|t| t.trim().parse().ok())
            else {
                continue;
            };
            let stat = read(&format!("{dir}/memory.stat")).unwrap_or_default();
            let field = |name: &str| -> u64 {
                stat.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                    .unwrap_or(0)
            };
            return Some(MemoryCgroup {
                limit,
                unreclaimable: field(anon) + field("shmem").max(field(mapped)),
            });
        }
        None
    }

    /// Bytes new frames may take, `promised` bytes of frames being
    /// promised already (those charged are part of `unreclaimable`).
    pub fn room(&self, promised: u64) -> u64 {
        let headroom = (self.limit / HEADROOM_SHARE).max(HEADROOM_MIN);
        self.limit
            .saturating_sub(self.unreclaimable.max(promised))
            .saturating_sub(headroom)
    }
}

/// The machine's memory: `MemTotal` of /proc/meminfo, bytes.
pub fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A budget cut to what its memory cgroup leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetCut {
    /// The budget asked, frames.
    pub asked_frames: u64,
    /// The budget given, frames.
    pub given_frames: u64,
    /// The cgroup when it was cut.
    pub cgroup: MemoryCgroup,
    /// Frames promised to the process's other regions and pools then, bytes.
    pub promised_bytes: u64,
}

/// Frames promised to a region or pool, given back when it drops.
#[derive(Debug)]
pub(crate) struct Promise {
    bytes: u64,
}

impl Drop for Promise {
    fn drop(&mut self) {
        PROMISED.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// At most `frames` frames (at least one) that fit in `cgroup` beside the
/// frames promised already, and the cut if there was one. Pure: [`fit`]
/// reads the cgroup and keeps the promise.
pub fn fit_in(
    frames: usize,
    cgroup: Option<MemoryCgroup>,
    promised: u64,
) -> (usize, Option<BudgetCut>) {
    let Some(cgroup) = cgroup else {
        return (frames, None);
    };
    let room = (cgroup.room(promised) / PAGE as u64) as usize;
    if frames <= room {
        return (frames, None);
    }
    let given = room.max(1);
    let cut = BudgetCut {
        asked_frames: frames as u64,
        given_frames: given as u64,
        cgroup,
        promised_bytes: promised,
    };
    (given, Some(cut))
}

/// A budget fitted in its memory cgroup: the cut, if any, and the frames
/// promised, given back when the region or pool holding it drops.
#[derive(Debug)]
pub(crate) struct Fitted {
    /// The cut, if the budget did not fit.
    pub(crate) cut: Option<BudgetCut>,
    _promise: Promise,
}

/// [`fit_in`] this process's memory cgroup: the frames given, and the
/// promise of them, for the region or pool they are given to to hold.
pub(crate) fn fit(frames: usize) -> (usize, Box<Fitted>) {
    let promised = PROMISED.load(Ordering::Acquire);
    let (given, cut) = fit_in(frames, MemoryCgroup::of_this_process(), promised);
    let bytes = (given * PAGE) as u64;
    PROMISED.fetch_add(bytes, Ordering::AcqRel);
    let fitted = Fitted {
        cut,
        _promise: Promise { bytes },
    };
    (given, Box::new(fitted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(v1: bool) -> impl Fn(&str) -> Option<String> {
        move |path: &str| match path {
            "/sys/fs/cgroup/memory/box/memory.limit_in_bytes" if v1 => Some("67108864\n".into()),
            "/sys/fs/cgroup/memory/box/memory.stat" if v1 => {
                Some("cache 100\nrss 4194304\nrss_huge 0\nshmem 1048576\nmapped_file 512\n".into())
            }
            "/sys/fs/cgroup/box/memory.max" if !v1 => Some("67108864\n".into()),
            "/sys/fs/cgroup/box/memory.stat" if !v1 => {
                Some("anon 4194304\nfile 100\nshmem 1048576\nfile_mapped 512\n".into())
            }
            _ => None,
        }
    }

    #[test]
    fn test_the_limit_and_unreclaimable_memory_are_read_from_v1_and_v2() {
        let want = Some(MemoryCgroup {
            limit: 64 << 20,
            unreclaimable: 5 << 20,
        });
        let v1 = "12:cpu,cpuacct:/\n4:memory:/box\n0::/\n";
        assert_eq!(MemoryCgroup::parse(v1, files(true)), want);
        assert_eq!(MemoryCgroup::parse("0::/box\n", files(false)), want);
        // v2 without a limit ("max"), or no memory controller: none.
        let max = |_: &str| Some("max\n".to_string());
        assert_eq!(MemoryCgroup::parse("0::/box\n", max), None);
        assert_eq!(MemoryCgroup::parse("3:cpu:/\n", files(true)), None);
    }

    #[test]
    fn test_mapped_files_beyond_shared_memory_count_as_unreclaimable() {
        // Program text mapped (3 MiB) beside 1 MiB of shared memory, of
        // which mapped_file holds the mapped part too.
        let read = |path: &str| match path {
            "/sys/fs/cgroup/memory/box/memory.limit_in_bytes" => Some("67108864\n".into()),
            "/sys/fs/cgroup/memory/box/memory.stat" => {
                Some("rss 4194304\nshmem 1048576\nmapped_file 4194304\n".into())
            }
            _ => None,
        };
        let cg = MemoryCgroup::parse("4:memory:/box\n", read).expect("a cgroup");
        assert_eq!(cg.unreclaimable, 8 << 20);
    }

    #[test]
    fn test_a_budget_that_fits_is_kept_and_one_that_does_not_is_cut_to_the_room() {
        let cg = MemoryCgroup {
            limit: 64 << 20,
            unreclaimable: 5 << 20,
        };
        // Room: 64 - 5 - 8 (an eighth) = 51 MiB.
        let room = (51 << 20) / PAGE;
        assert_eq!(fit_in(room, Some(cg), 0), (room, None));
        assert_eq!(fit_in(1 << 20, None, 0), (1 << 20, None));
        let (given, cut) = fit_in(room + 1, Some(cg), 0);
        assert_eq!(given, room);
        assert_eq!(
            cut.map(|c| (c.asked_frames, c.given_frames)),
            Some(((room + 1) as u64, room as u64))
        );
        // Promises beyond what is charged count; those charged count once.
        assert_eq!(fit_in(room, Some(cg), 10 << 20).0, room - (5 << 20) / PAGE);
        assert_eq!(fit_in(room, Some(cg), 5 << 20).0, room);
        // No room at all: one frame.
        let full = MemoryCgroup {
            limit: 8 << 20,
            unreclaimable: 8 << 20,
        };
        assert_eq!(fit_in(100, Some(full), 0).0, 1);
    }
}
