//! The default budget. In a memory cgroup, frames are memory the kernel
//! cannot reclaim (shared memory, no swap): a budget that leaves the
//! program too little gets it killed where the kernel's page cache would
//! have shrunk. So the default is half of what the cgroup's limit leaves
//! beside the memory the kernel cannot reclaim (anonymous and shared, and
//! mapped files: `MemoryCgroup::unreclaimable`) when
//! the program's first file is taken over; the other half is left for the
//! program's growth and for the page cache (its libraries, the files
//! pagepilot does not page). Without a limit: a quarter of the machine's
//! memory.

/// The budget when `--budget` is not given.
pub fn default_budget() -> u64 {
    match pagepilot_pager::MemoryCgroup::of_this_process() {
        Some(cg) => cg.limit.saturating_sub(cg.unreclaimable) / 2,
        None => {
            pagepilot_pager::machine_memory().unwrap_or(1 << 30)
                / pagepilot_run::DEFAULT_BUDGET_SHARE_OF_MEMORY
        }
    }
    .max(1 << 20)
}
