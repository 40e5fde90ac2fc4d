//! Where a region's lone handler thread runs: on the CPU the region was
//! mapped from, unless asked otherwise.

use pagepilot_pager::{Backing, Region, RegionOptions, PAGE_SIZE};

/// `Cpus_allowed_list` of every thread of this process named `name`, waiting
/// (at most 5 s) for one to be: a new thread names itself once it runs.
fn allowed_cpus_of(name: &str) -> Vec<String> {
    for _ in 0..500 {
        let lists = allowed_cpus_now(name);
        if !lists.is_empty() {
            return lists;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Vec::new()
}

/// `Cpus_allowed_list` of every thread of this process named `name` now (as
/// the kernel keeps names: 15 bytes at most).
fn allowed_cpus_now(name: &str) -> Vec<String> {
    let name = &name[..name.len().min(15)];
    let mut lists = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("task entry").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).expect("status");
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list");
        lists.push(line.trim().to_string());
    }
    lists
}

fn cpu_now() -> i32 {
    // SAFETY: sched_getcpu has no preconditions.
    unsafe { libc::sched_getcpu() }
}

fn anon(on_mapping_cpu: bool) -> RegionOptions {
    RegionOptions::new(
        Backing::Anonymous {
            len: 16 * PAGE_SIZE,
        },
        4 * PAGE_SIZE,
        "fifo",
    )
    .with_handler_on_mapping_cpu(on_mapping_cpu)
}

#[test]
fn test_lone_handler_keeps_to_the_mapping_cpu_unless_told_otherwise() {
    let process = std::fs::read_to_string("/proc/self/status")
        .expect("status")
        .lines()
        .find_map(|l| {
            l.strip_prefix("Cpus_allowed_list:")
                .map(|v| v.trim().to_string())
        })
        .expect("Cpus_allowed_list");

    // Retried until the mapping thread stayed on one CPU across the map.
    let (region, cpu) = (0..100)
        .find_map(|_| {
            let before = cpu_now();
            let r = Region::map(anon(true)).expect("map");
            (cpu_now() == before).then_some((r, before))
        })
        .expect("the test thread kept migrating");
    assert_eq!(allowed_cpus_of("pagepilot-fault-0"), vec![cpu.to_string()]);
    // It still serves faults from wherever the application runs.
    let p = region.as_ptr();
    for i in 0..16 {
        // SAFETY: i < 16 pages: inside the mapped region.
        unsafe { p.add(i * PAGE_SIZE).write_volatile(i as u8 + 1) };
    }
    for i in 0..16 {
        // SAFETY: as above.
        assert_eq!(unsafe { p.add(i * PAGE_SIZE).read_volatile() }, i as u8 + 1);
    }
    region.unmap().expect("unmap");

    let region = Region::map(anon(false)).expect("map");
    assert_eq!(allowed_cpus_of("pagepilot-fault-0"), vec![process]);
    region.unmap().expect("unmap");
}
