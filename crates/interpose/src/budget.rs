//! The default budget. In a memory cgroup, frames are memory the kernel
//! cannot reclaim (shared memory, no swap): a budget that leaves the
//! program too little gets it killed where the kernel's page cache would
//! have shrunk. So the default is half of what the program has not used
//! yet of the cgroup's limit when its first file is taken over (its
//! libraries and heap by then are counted; the other half is left for its
//! growth and for the page cache of the files pagepilot does not page).
//! Without a limit: a quarter of the machine's memory.

/// The budget when `--budget` is not given.
pub fn default_budget() -> u64 {
    let total = mem_total().unwrap_or(1 << 30);
    match cgroup_memory() {
        Some((limit, used)) if limit < total => limit.saturating_sub(used) / 2,
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
/// what it charges now, bytes.
fn cgroup_memory() -> Option<(u64, u64)> {
    let number =
        |path: String| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (limit, usage) = if controllers.split(',').any(|c| c == "memory") {
            let dir = format!("/sys/fs/cgroup/memory{path}");
            (
                number(format!("{dir}/memory.limit_in_bytes")),
                number(format!("{dir}/memory.usage_in_bytes")),
            )
        } else if controllers.is_empty() {
            let dir = format!("/sys/fs/cgroup{path}");
            (
                number(format!("{dir}/memory.max")),
                number(format!("{dir}/memory.current")),
            )
        } else {
            continue;
        };
        if let Some(limit) = limit {
            return Some((limit, usage.unwrap_or(0)));
        }
    }
    None
}
