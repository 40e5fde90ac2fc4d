//! The default budget. In a memory cgroup, frames are memory the kernel
//! cannot reclaim (shared memory, no swap): a budget that leaves the
//! program too little gets it killed where the kernel's page cache would
//! have shrunk. So the default is half of what the cgroup's limit leaves
//! beside the memory the kernel cannot reclaim (anonymous and shared) when
//! the program's first file is taken over; the other half is left for the
//! program's growth and for the page cache (its libraries, the files
//! pagepilot does not page). Without a limit: a quarter of the machine's
//! memory.

/// The budget when `--budget` is not given.
pub fn default_budget() -> u64 {
    let total = mem_total().unwrap_or(1 << 30);
    match cgroup_memory() {
        Some((limit, pinned)) if limit < total => limit.saturating_sub(pinned) / 2,
        _ => total / pagepilot_run::DEFAULT_BUDGET_SHARE_OF_MEMORY,
    }
    .max(1 << 20)
}

/// `MemTotal` of /proc/meminfo, bytes.
fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The memory limit of this process's cgroup (v1 `memory` or v2) and
/// what it holds that the kernel cannot reclaim (anonymous and shared
/// memory, without swap), bytes.
fn cgroup_memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (dir, limit, anon) = if controllers.split(',').any(|c| c == "memory") {
            (
                format!("/sys/fs/cgroup/memory{path}"),
                "memory.limit_in_bytes",
                "rss",
            )
        } else if controllers.is_empty() {
            (format!("/sys/fs/cgroup{path}"), "memory.max", "anon")
        } else {
            continue;
        };
        let Some(limit) = std::fs::read_to_string(format!("{dir}/{limit}"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("{dir}/memory.stat")).unwrap_or_default();
        let field = |name: &str| -> u64 {
            stat.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                .unwrap_or(0)
        };
        return Some((limit, field(anon) + field("shmem")));
    }
    None
}
