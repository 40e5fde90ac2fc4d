//! The tests, each with a daemon of its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::harness::{eventually, Daemon, Process};

/// Every test, by name.
pub const ALL: &[(&str, fn())] = &[
    (
        "clients_share_the_budget_each_with_its_min_frame_and_fafr_reclaims_across_processes",
        clients_share_the_budget_each_with_its_min_frame_and_fafr_reclaims_across_processes,
    ),
    (
        "a_stopped_client_is_reclaimed_by_force_and_resumes_with_its_data",
        a_stopped_client_is_reclaimed_by_force_and_resumes_with_its_data,
    ),
    (
        "a_client_killed_in_the_middle_of_writes_loses_no_write_it_logged",
        a_client_killed_in_the_middle_of_writes_loses_no_write_it_logged,
    ),
    (
        "pinned_pages_are_never_evicted_and_the_pin_quota_is_enforced",
        pinned_pages_are_never_evicted_and_the_pin_quota_is_enforced,
    ),
    (
        "a_pinned_dataspace_is_mapped_within_the_pin_quota_and_refused_beyond_it",
        a_pinned_dataspace_is_mapped_within_the_pin_quota_and_refused_beyond_it,
    ),
    (
        "quotas_follow_the_user_the_kernel_names",
        quotas_follow_the_user_the_kernel_names,
    ),
    (
        "when_the_daemon_stops_its_clients_keep_their_budgets_and_data",
        when_the_daemon_stops_its_clients_keep_their_budgets_and_data,
    ),
    (
        "a_forked_child_does_not_keep_its_killed_parent_alive_to_the_daemon",
        a_forked_child_does_not_keep_its_killed_parent_alive_to_the_daemon,
    ),
    (
        "forked_workers_of_a_daemon_client_fill_its_file_region_and_the_parent_sees_every_byte",
        forked_workers_of_a_daemon_client_fill_its_file_region_and_the_parent_sees_every_byte,
    ),
    (
        "thirty_two_clients_come_and_go_for_a_minute_and_no_frame_leaks",
        thirty_two_clients_come_and_go_for_a_minute_and_no_frame_leaks,
    ),
];

const WAIT: Duration = Duration::from_secs(20);

fn args(a: &[&dyn ToString]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

/// `(budget, reclaimed, forced, in_use)` from a `stats`/`checked` line.
fn numbers(line: &str) -> (u64, u64, u64, u64) {
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1], v[2], v[3])
}

/// Asks `p` for its stats until `ok` holds for them.
fn stats_until(
    p: &mut Process,
    what: &str,
    ok: impl Fn((u64, u64, u64, u64)) -> bool,
) -> (u64, u64, u64, u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        p.say("stats");
        let s = numbers(&p.expect("stats", WAIT));
        if ok(s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: last stats {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn checked(p: &mut Process) -> (u64, u64, u64, u64) {
    p.say("check");
    numbers(&p.expect("checked", WAIT))
}

fn leave(mut p: Process) {
    p.say("exit");
    p.expect("bye", WAIT);
    assert_eq!(p.wait(WAIT), Some(0));
}

fn clients_share_the_budget_each_with_its_min_frame_and_fafr_reclaims_across_processes() {
    let daemon = Daemon::start(
        "share",
        "[machine]\nbudget_frames = 300\npartition_burst_frames = 300\ndeadline_ms = 500\n",
    );
    // A: minFrame 50, budget 200: granted 50, then the rest from free frames.
    // Each client another user: one user's processes share one quota.
    let mut a = Process::spawn_as(&daemon, 30001, "hold", &args(&[&200, &50, &200]));
    a.expect("ready", WAIT);
    stats_until(&mut a, "A grows to its budget", |s| s.0 == 200);
    // B: minFrame 100 = budget, from the last free frames.
    let mut b = Process::spawn_as(&daemon, 30002, "hold", &args(&[&200, &100, &100]));
    b.expect("ready", WAIT);
    stats_until(&mut b, "B holds its minimum", |s| s.0 == 100);
    // C: minFrame 100 with none free: asked of A (first registered, above
    // its minimum), which gives back as its policy chooses.
    let mut c = Process::spawn_as(&daemon, 30003, "hold", &args(&[&200, &100, &100]));
    c.expect("ready", WAIT);
    stats_until(&mut c, "C settled at its minimum", |s| s.0 == 100);
    let (a_budget, a_reclaimed, a_forced, _) = stats_until(&mut a, "A gave back", |s| s.0 == 100);
    assert_eq!(a_budget, 100);
    assert!(
        a_reclaimed + a_forced >= 100,
        "A gave back {a_reclaimed} and lost {a_forced}"
    );
    let status = daemon.status();
    assert_eq!((status.total_frames, status.free_frames), (300, 0));
    let held: HashMap<u32, (u64, u64)> = status
        .clients
        .iter()
        .map(|c| (c.pid, (c.regions[0].min_frames, c.regions[0].held_frames)))
        .collect();
    assert_eq!(held[&a.pid()], (50, 100));
    assert_eq!(held[&b.pid()], (100, 100));
    assert_eq!(held[&c.pid()], (100, 100));
    // D's minimum does not fit beside theirs: refused, the others served.
    let mut d = Process::spawn_as(&daemon, 30004, "hold", &args(&[&100, &100, &100]));
    let refusal = d.expect("error", WAIT);
    assert!(refusal.contains("RegisterRegion"), "{refusal}");
    assert_eq!(d.wait(WAIT), Some(1));
    for p in [&mut a, &mut b, &mut c] {
        checked(p);
    }
    // A changes its budget: the frames go back to the daemon, and more
    // are asked for (granted from what is free).
    let held_by = |pid| daemon.client_of(pid).map(|c| c.regions[0].held_frames);
    a.say("budget 60");
    a.expect("budget", WAIT);
    eventually(WAIT, "A's frames back in the daemon", || {
        held_by(a.pid()) == Some(60)
    });
    assert_eq!(daemon.status().free_frames, 40);
    a.say("budget 90");
    a.expect("budget", WAIT);
    stats_until(&mut a, "A granted more", |s| s.0 == 90);
    assert_eq!(held_by(a.pid()), Some(90));
    checked(&mut a);
    for p in [a, b, c] {
        leave(p);
    }
    eventually(WAIT, "every frame back", || {
        let s = daemon.status();
        s.free_frames == s.total_frames && s.clients.is_empty()
    });
}

fn a_stopped_client_is_reclaimed_by_force_and_resumes_with_its_data() {
    let daemon = Daemon::start(
        "stopped",
        "[machine]\nbudget_frames = 300\npartition_burst_frames = 300\ndeadline_ms = 200\n",
    );
    let mut a = Process::spawn_as(&daemon, 30001, "hold", &args(&[&300, &50, &300]));
    a.expect("ready", WAIT);
    stats_until(&mut a, "A grows to its budget", |s| s.0 == 300);
    a.signal(libc::SIGSTOP);
    let stopped = Instant::now();
    let mut b = Process::spawn_as(&daemon, 30002, "hold", &args(&[&100, &100, &100]));
    b.expect("ready", WAIT);
    // A cannot answer: after the deadline its frames are taken by force
    // and given to B.
    stats_until(&mut b, "B settled while A is stopped", |s| s.0 == 100);
    let waited = stopped.elapsed();
    let a_status = daemon.client_of(a.pid()).expect("A still a client");
    assert_eq!(a_status.regions[0].held_frames, 200);
    assert_eq!(a_status.regions[0].forced_frames, 100);
    assert!(
        waited >= Duration::from_millis(200),
        "B settled before the deadline: {waited:?}"
    );
    a.signal(libc::SIGCONT);
    // A reads the order and the force, shrinks to what the daemon left it,
    // and every page it wrote is still there.
    let (budget, _, forced, in_use) =
        stats_until(&mut a, "A follows the force", |s| s.0 == 200 && s.2 == 100);
    assert_eq!((budget, forced), (200, 100));
    assert!(in_use <= 200, "A uses {in_use} frames of 200");
    checked(&mut a);
    checked(&mut b);
    leave(a);
    leave(b);
}

fn a_client_killed_in_the_middle_of_writes_loses_no_write_it_logged() {
    let daemon = Daemon::start("killed", "[machine]\nbudget_frames = 1000\n");
    let pages = 2048;
    let file = daemon.dir.join("data");
    std::fs::File::create(&file)
        .unwrap()
        .set_len((pages * 4096) as u64)
        .unwrap();
    let mut writer = Process::spawn(
        &daemon,
        "writer",
        &args(&[&file.display(), &pages, &64, &7]),
    );
    writer.expect("ready", WAIT);
    let mut logged = Vec::new();
    while logged.len() < 3000 {
        let line = writer.line(WAIT);
        if let Some(w) = line.strip_prefix("w ") {
            logged.push(w.to_string());
        }
    }
    writer.signal(libc::SIGKILL);
    assert_eq!(writer.wait(WAIT), None, "killed by a signal");
    logged.extend(
        writer
            .drain(Duration::from_millis(200))
            .into_iter()
            .filter_map(|l| l.strip_prefix("w ").map(str::to_string)),
    );
    // The daemon sees the client gone, writes back its dirty pages, then
    // returns its frames.
    eventually(WAIT, "the killed client gone from the daemon", || {
        let s = daemon.status();
        s.clients.is_empty() && s.free_frames == s.total_frames
    });
    // The daemon had work to do: the client died with dirty pages.
    let log = daemon.log();
    let written: u64 = log
        .lines()
        .find_map(|l| l.split("wrote back ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no write-back in the daemon's log:\n{log}"));
    assert!(written > 0, "the daemon wrote back nothing:\n{log}");
    eprintln!(
        "  {} logged writes; the daemon wrote back {written} dirty pages",
        logged.len()
    );
    let bytes = std::fs::read(&file).unwrap();
    let mut lost = Vec::new();
    for w in &logged {
        let (offset, value) = w.split_once(' ').unwrap();
        let (offset, value): (usize, u64) = (offset.parse().unwrap(), value.parse().unwrap());
        let got = u64::from_ne_bytes(bytes[offset..offset + 8].try_into().unwrap());
        if got != value {
            lost.push((offset, value, got));
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} logged writes lost, first {:?}; daemon log:\n{}",
        lost.len(),
        logged.len(),
        &lost[..lost.len().min(5)],
        daemon.log()
    );
}

fn thirty_two_clients_come_and_go_for_a_minute_and_no_frame_leaks() {
    let mut daemon = Daemon::start(
        "load",
        "[machine]\nbudget_frames = 600\ndeadline_ms = 100\n",
    );
    let dir = daemon.dir.join("files");
    std::fs::create_dir_all(&dir).unwrap();
    let run_for = Duration::from_secs(60);
    let started = Instant::now();
    let mut running: Vec<Process> = Vec::new();
    let (mut spawned, mut finished, mut rounds) = (0u64, 0u64, 0u64);
    let mut rss_early = 0;
    while started.elapsed() < run_for || !running.is_empty() {
        while started.elapsed() < run_for && running.len() < 32 {
            let seconds = 0.5 + (spawned % 5) as f64 * 0.5;
            running.push(Process::spawn(
                &daemon,
                "churn",
                &args(&[&seconds, &spawned, &dir.display()]),
            ));
            spawned += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut still = Vec::new();
        for mut p in running.drain(..) {
            match p.try_exit() {
                None => still.push(p),
                Some(code) => {
                    let lines = p.drain(Duration::from_millis(100));
                    let done = lines.iter().find_map(|l| l.strip_prefix("done "));
                    assert_eq!(code, 0, "client {} failed: {lines:?}", p.pid());
                    rounds += done.expect("done line").parse::<u64>().unwrap();
                    finished += 1;
                }
            }
        }
        running = still;
        if rss_early == 0 && started.elapsed() > Duration::from_secs(10) {
            rss_early = daemon.rss_kib();
        }
        assert!(
            started.elapsed() < run_for + Duration::from_secs(120),
            "clients do not finish"
        );
    }
    assert!(daemon.is_running(), "the daemon died");
    eventually(WAIT, "every frame back after the last client", || {
        let s = daemon.status();
        s.clients.is_empty() && s.free_frames == s.total_frames
    });
    let rss_end = daemon.rss_kib();
    eprintln!(
        "  {finished} clients, {rounds} map-fault-unmap rounds; daemon RSS {rss_early} KiB at 10 s, {rss_end} KiB at the end"
    );
    assert!(finished >= 64, "only {finished} clients finished");
    assert!(
        rss_end <= rss_early + 16 * 1024,
        "the daemon's memory grew from {rss_early} to {rss_end} KiB"
    );
}

fn pinned_pages_are_never_evicted_and_the_pin_quota_is_enforced() {
    let daemon = Daemon::start(
        "pins",
        "[machine]\nbudget_frames = 100\n[default]\npinned_frames = 8\n",
    );
    let mut p = Process::spawn(&daemon, "pinner", &args(&[&400, &32, &8]));
    p.expect("pinned", WAIT);
    // The ninth page is beyond the user's pin quota: EDQUOT, from the daemon.
    let refused = p.expect("refused", WAIT);
    assert!(
        refused.starts_with(&format!("{} ", libc::EDQUOT)),
        "{refused}"
    );
    let region = &daemon.client_of(p.pid()).expect("the pinner").regions[0];
    assert_eq!(region.pinned_frames, 8);
    // Five scans of 400 pages through 32 frames evict hundreds of pages,
    // never a pinned one.
    let evicted = p.expect("evicted", WAIT);
    let v: Vec<u64> = evicted
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(v[0] > 1000, "only {} evictions", v[0]);
    assert_eq!(
        (v[1], v[2]),
        (0, 0),
        "pinned pages evicted, or events lost: {evicted}"
    );
    p.say("exit");
    p.expect("bye", WAIT);
    assert_eq!(p.wait(WAIT), Some(0));
    eventually(WAIT, "every frame back", || {
        let s = daemon.status();
        s.free_frames == s.total_frames && s.clients.is_empty()
    });
}

/// A region made of a pinned dataspace (an anonymous one transferred to a
/// `PinnedManager`) pins its pages at map, through the daemon: beyond the
/// user's pin quota the map fails with `MapError::Pin` carrying EDQUOT;
/// within it the daemon (and `pagepilot status`) shows the pinned frames.
fn a_pinned_dataspace_is_mapped_within_the_pin_quota_and_refused_beyond_it() {
    let pages = 16;
    for (quota, fits) in [(8, false), (32, true)] {
        let daemon = Daemon::start(
            &format!("pinned-ds-{quota}"),
            &format!("[machine]\nbudget_frames = 100\n[default]\npinned_frames = {quota}\n"),
        );
        let dir = daemon.dir.to_str().unwrap().to_string();
        let mut p = Process::spawn(
            &daemon,
            "pinned_dataspace",
            &args(&[&pages, &(pages + 8), &dir]),
        );
        if !fits {
            let refused = p.expect("refused", WAIT);
            assert!(
                refused.starts_with(&format!("{} ", libc::EDQUOT)),
                "quota {quota}: {refused}"
            );
            assert_eq!(p.wait(WAIT), Some(0));
            eventually(WAIT, "nothing held after the refusal", || {
                let s = daemon.status();
                s.clients
                    .iter()
                    .all(|c| c.regions.iter().all(|r| r.pinned_frames == 0))
            });
            continue;
        }
        let mapped = p.expect("mapped", WAIT);
        assert_eq!(
            mapped,
            pages.to_string(),
            "pinned pages in the region's stats"
        );
        let region = &daemon.client_of(p.pid()).expect("the client").regions[0];
        assert_eq!(region.pinned_frames, pages as u64);
        // `pagepilot status` says so too.
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pagepilot"))
            .args(["status", "--format", "json", "--socket"])
            .arg(&daemon.socket)
            .output()
            .expect("pagepilot status");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let text = status.to_string();
        assert!(
            text.contains(&format!("\"pinned_frames\":{pages}")),
            "no region with {pages} pinned frames: {text}"
        );
        p.say("exit");
        p.expect("bye", WAIT);
        assert_eq!(p.wait(WAIT), Some(0));
        eventually(WAIT, "every frame back", || {
            let s = daemon.status();
            s.free_frames == s.total_frames && s.clients.is_empty()
        });
    }
}

fn quotas_follow_the_user_the_kernel_names() {
    let daemon = Daemon::start(
        "quotas",
        "[machine]\nbudget_frames = 1000\n[uid.65534]\nframes = 50\n",
    );
    // The daemon's directory, for nobody to reach the socket.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&daemon.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = Process::spawn(&daemon, "hold", &args(&[&100, &100, &100]));
    root.expect("ready", WAIT);
    // nobody's quota is 50 frames, whatever the process claims.
    let mut over = Process::spawn_as_nobody(&daemon, "hold", &args(&[&200, &100, &100]));
    let refusal = over.expect("error", WAIT);
    assert!(
        refusal.contains("RegisterRegion") && refusal.to_lowercase().contains("quota"),
        "{refusal}"
    );
    assert_eq!(over.wait(WAIT), Some(1));
    let mut within = Process::spawn_as_nobody(&daemon, "hold", &args(&[&200, &40, &40]));
    within.expect("ready", WAIT);
    checked(&mut within);
    let status = daemon.status();
    let uid_of = |pid| status.clients.iter().find(|c| c.pid == pid).map(|c| c.uid);
    assert_eq!(uid_of(within.pid()), Some(65534));
    assert_eq!(uid_of(root.pid()), Some(0));
    leave(within);
    leave(root);
}

fn when_the_daemon_stops_its_clients_keep_their_budgets_and_data() {
    let mut daemon = Daemon::start("stops", "[machine]\nbudget_frames = 200\n");
    let mut a = Process::spawn(&daemon, "hold", &args(&[&300, &50, &100]));
    a.expect("ready", WAIT);
    stats_until(&mut a, "A grows to its budget", |s| s.0 == 100);
    assert_eq!(daemon.stop(), Some(0));
    // The region goes on paging under the budget it had.
    let (budget, _, _, in_use) = checked(&mut a);
    assert_eq!(budget, 100);
    assert!(in_use <= 100, "{in_use} frames in use");
    leave(a);
}

fn a_forked_child_does_not_keep_its_killed_parent_alive_to_the_daemon() {
    let daemon = Daemon::start("fork", "[machine]\nbudget_frames = 100\n");
    let mut parent = Process::spawn(&daemon, "forker", &[]);
    let child: i32 = parent.expect("ready", WAIT).parse().unwrap();
    struct Reap(i32);
    impl Drop for Reap {
        fn drop(&mut self) {
            // SAFETY: kill has no memory effects; the pid is the forker's child.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let _reap = Reap(child);
    assert!(daemon.client_of(parent.pid()).is_some());
    parent.signal(libc::SIGKILL);
    parent.wait(WAIT);
    // The child holds no copy of the connection: the parent is gone to the
    // daemon at once, its frames back, though the child still runs.
    eventually(
        Duration::from_secs(5),
        "the parent gone from the daemon",
        || {
            let s = daemon.status();
            s.clients.is_empty() && s.free_frames == s.total_frames
        },
    );
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(unsafe { libc::kill(child, 0) }, 0, "the child still runs");
}

/// A client's writable file region, its frames from the daemon and read
/// whole: four forked workers fill a quarter each, the parent sees every
/// byte with no flush or invalidate, pages the region again once they are
/// gone (still the daemon's client, the same region), and the file holds
/// every byte; the daemon has every frame back at the end.
fn forked_workers_of_a_daemon_client_fill_its_file_region_and_the_parent_sees_every_byte() {
    use crate::roles::fork_byte;
    let daemon = Daemon::start("fork-fill", "[machine]\nbudget_frames = 1000\n");
    let pages = 1024;
    let budget = 256;
    let file = daemon.dir.join("data");
    let original: Vec<u8> = (0..pages * 4096).map(|i| fork_byte(0, i)).collect();
    std::fs::write(&file, &original).unwrap();
    let mut p = Process::spawn(&daemon, "fork_fill", &args(&[&file.display(), &budget]));
    let resident: u64 = p.expect("ready", WAIT).parse().unwrap();
    assert_eq!(
        resident, budget as u64,
        "the region read whole holds its budget"
    );
    let client = daemon
        .client_of(p.pid())
        .expect("the client joined the daemon");
    assert_eq!(client.regions.len(), 1);
    assert_eq!(client.regions[0].held_frames, budget as u64);
    p.say("go");
    let filled: Vec<u64> = p
        .expect("filled", WAIT)
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let [shares, resumes, shared, paged] = filled[..] else {
        panic!("filled {filled:?}");
    };
    assert_eq!(
        (shares, resumes, shared),
        (1, 1, 0),
        "shared once, paged again once"
    );
    assert!(
        paged >= pages as u64,
        "{paged} pages brought in since the fork: the region was not paged again"
    );
    assert_eq!(p.wait(WAIT), Some(0));
    let bytes = std::fs::read(&file).unwrap();
    let bad = (0..bytes.len())
        .filter(|&i| bytes[i] != fork_byte(1, i))
        .count();
    assert_eq!(bad, 0, "bytes of the file not the workers'");
    eventually(WAIT, "every frame back", || {
        let s = daemon.status();
        s.clients.is_empty() && s.free_frames == s.total_frames
    });
}
