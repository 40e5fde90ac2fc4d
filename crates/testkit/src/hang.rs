//! Where a hung test program stands, for the test's failure message:
//! every process of its group, each thread's name, kernel wait channel and
//! kernel stack (`/proc`), and its user stack (`gdb`, where installed).

use std::process::Command;

/// The processes of group `pgid`, and for each thread its name, state,
/// kernel wait channel and kernel stack (`/proc`), then its user stack
/// (`gdb`, where installed): what a hang report needs to name its cause.
pub fn report(pgid: i32) -> String {
    let mut report = String::new();
    for pid in group_members(pgid) {
        report += &format!("process {pid}\n");
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            let path = task.path();
            let read = |name: &str| std::fs::read_to_string(path.join(name)).unwrap_or_default();
            report += &format!(
                "  thread {} ({}) wchan {}\n{}",
                task.file_name().to_string_lossy(),
                read("comm").trim(),
                read("wchan"),
                read("stack")
            );
        }
        let gdb = Command::new("timeout")
            .args(["20", "gdb", "-p", &pid.to_string(), "-batch", "-nx"])
            .args(["-ex", "thread apply all bt 30"])
            .stdin(std::process::Stdio::null())
            .output();
        match gdb {
            Ok(out) => report += &String::from_utf8_lossy(&out.stdout),
            Err(e) => report += &format!("  (no gdb: {e})\n"),
        }
    }
    report
}

/// The pids whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ppid pgrp ...": comm may hold spaces.
            let after = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
            after.split_whitespace().nth(2).and_then(|g| g.parse().ok()) == Some(pgid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_the_report_names_each_process_of_the_group_and_its_threads() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("start sleep");
        let pid = child.id() as i32;
        let text = super::report(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(text.contains(&format!("process {pid}\n")), "{text}");
        assert!(text.contains(&format!("thread {pid} (sleep)")), "{text}");
        // Nothing of another group.
        let processes = text.lines().filter(|l| l.starts_with("process ")).count();
        assert_eq!(processes, 1, "{text}");
    }
}
