//! The default budget: 3/4 of the memory cgroup's limit, where one
//! applies (the rest is the program's own memory and pagepilot's), or a
//! quarter of the machine's memory.

/// The budget when `--budget` is not given.
pub fn default_budget() -> u64 {
    let total = mem_total().unwrap_or(1 << 30);
    match cgroup_limit() {
        Some(limit) if limit < total => limit / 4 * 3,
        _ => total / pagepilot_run::DEFAULT_BUDGET_SHARE_OF_MEMORY,
    }
}

/// `MemTotal` of /proc/meminfo, bytes.
fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The memory limit of this process's cgroup (v1 `memory` or v2), bytes.
fn cgroup_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let file = if controllers.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
        } else if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}/memory.max")
        } else {
            continue;
        };
        if let Some(n) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return Some(n);
        }
    }
    None
}
