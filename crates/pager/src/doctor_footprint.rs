//! `pagepilot doctor`'s measure of the pager's own footprint: what a region
//! with the defaults costs this process beside its frames (threads, heap,
//! page tables), from `/proc/self/status` before the map and once every
//! frame is touched. In a memory cgroup this is what the budget's headroom
//! must hold (`cgroup`).

use super::{check, Check, State};
use crate::{Backing, Region, RegionOptions, PAGE_SIZE};

/// The region measured: its length and budget.
const BYTES: usize = 16 << 20;

/// The fields of `/proc/self/status` measured, in kB (threads: a count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Status {
    pub threads: u64,
    pub anon_kb: u64,
    pub page_tables_kb: u64,
}

/// The fields of a `/proc/<pid>/status` text; a field missing reads 0.
pub(super) fn parse_status(text: &str) -> Status {
    let field = |name: &str| {
        super::status_field(text, name)
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Status {
        threads: field("Threads"),
        anon_kb: field("RssAnon"),
        page_tables_kb: field("VmPTE"),
    }
}

fn status() -> Status {
    parse_status(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
}

/// What one region added, as a sentence.
pub(super) fn describe(before: Status, after: Status, frames: u64) -> String {
    let heap = after.anon_kb.saturating_sub(before.anon_kb);
    let tables = after.page_tables_kb.saturating_sub(before.page_tables_kb);
    format!(
        "a {} MiB anonymous region, its {frames} frames touched: {} thread(s), {} KiB of the \
         pager's own memory beside its {} KiB of frames (heap and stacks {heap} KiB, page \
         tables {tables} KiB)",
        BYTES >> 20,
        after.threads.saturating_sub(before.threads),
        heap + tables,
        frames * PAGE_SIZE as u64 / 1024,
    )
}

/// The check: maps a region with the defaults, touches every page, measures.
pub(super) fn footprint_check(can_map: bool) -> Check {
    let name = "pager footprint";
    if !can_map {
        return check(
            name,
            State::Warn,
            "not measured: no region can be mapped".into(),
            None,
        );
    }
    let before = status();
    let opts = RegionOptions::new(Backing::Anonymous { len: BYTES }, BYTES, "clock");
    let region = match Region::map(opts) {
        Ok(r) => r,
        Err(e) => {
            return check(name, State::Warn, format!("not measured: {e}"), None);
        }
    };
    for page in (0..BYTES).step_by(PAGE_SIZE) {
        // SAFETY: inside the region just mapped, writable anonymous memory.
        unsafe { region.as_ptr().add(page).write_volatile(1) };
    }
    let after = status();
    let frames = region.stats().frames_in_use;
    let _ = region.unmap();
    check(name, State::Ok, describe(before, after, frames), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_status_fields_are_read_and_a_missing_one_is_zero() {
        let text = "Name:\tx\nThreads:\t7\nRssAnon:\t  1200 kB\nVmPTE:\t      88 kB\n";
        let s = parse_status(text);
        assert_eq!(
            s,
            Status {
                threads: 7,
                anon_kb: 1200,
                page_tables_kb: 88
            }
        );
        assert_eq!(parse_status("Threads:\t3\n").anon_kb, 0);
    }

    #[test]
    fn test_the_footprint_sentence_names_threads_and_memory_beside_the_frames() {
        let before = Status {
            threads: 1,
            anon_kb: 1000,
            page_tables_kb: 50,
        };
        let after = Status {
            threads: 4,
            anon_kb: 1300,
            page_tables_kb: 114,
        };
        let text = describe(before, after, 4096);
        assert!(text.contains("3 thread(s)"), "{text}");
        assert!(text.contains("364 KiB of the pager's own memory"), "{text}");
        assert!(text.contains("16384 KiB of frames"), "{text}");
    }
}
