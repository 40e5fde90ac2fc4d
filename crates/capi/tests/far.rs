//! Far memory through the C API, as C programs see them (`tests/c/far.c`,
//! compiled against the header and the library), on real Redis: a process
//! writes a far dataspace through a region, flushes and unmaps it; a second
//! process maps the name and compares every byte; a replica wait is met on
//! the cluster (one replica per primary) and refused on a lone server
//! without replicas; `pp_delete_far` removes it; refusals carry errnos and
//! messages naming what was wrong.
//!
//! The cluster: `PAGEPILOT_REDIS_CLUSTER` (scripts/test starts one), else
//! one this test binary starts with scripts/redis-cluster and stops at exit.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::{c_program, compile_for_this_run};
use pagepilot_testkit::redis::{self, redis_cli, shared_cluster, Server};

/// The cluster's seeds, "host:port,...": `PAGEPILOT_REDIS_CLUSTER`, else
/// one this process starts and stops when it exits.
fn cluster() -> String {
    shared_cluster().join(",")
}

/// A name no other test or run uses.
fn unique(tag: &str) -> String {
    redis::unique(&format!("capi-{tag}"))
}

fn program() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_for_this_run("far"))
}

/// Runs `far ARGS`; its stdout, after asserting it exited 0 with `done`.
fn run(args: &[&str], done: &str) -> String {
    let out: Output = c_program(program())
        .args(args)
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.lines().any(|l| l == done),
        "far {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The MESSAGE of line "errno WHAT: N MESSAGE", asserting N.
fn refusal(stdout: &str, what: &str, errno: i32) -> String {
    let rest = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("errno {what}: ")))
        .unwrap_or_else(|| panic!("no errno {what}:\n{stdout}"));
    let (n, msg) = rest.split_once(' ').unwrap_or((rest, ""));
    assert_eq!(n.parse::<i32>().ok(), Some(errno), "{what}: {rest}");
    msg.to_owned()
}

/// Writes `pages` pages from one process, checks them from another, then
/// deletes the dataspace from a third; returns the writer's output.
fn round_trip(seeds: &str, name: &str, pages: usize, seed: u64, replicas: u32) -> String {
    let (p, s) = (pages.to_string(), seed.to_string());
    let wrote = run(
        &["write", seeds, name, &p, &s, &replicas.to_string()],
        "unmapped",
    );
    assert!(wrote.contains("\nflushed\n"), "{wrote}");
    let busy = refusal(&wrote, "mapped twice", libc::EBUSY);
    assert!(
        busy.contains(&format!("\"{name}\"")) && busy.contains("mapped already by this process"),
        "{busy}"
    );
    let busy = refusal(&wrote, "delete while mapped", libc::EBUSY);
    assert!(busy.contains(&format!("\"{name}\"")), "{busy}");
    run(&["check", seeds, name, &p, &s], "checked");
    wrote
}

/// The JSON statistic `key` of the writer's "stats: " line.
fn stat(stdout: &str, key: &str) -> u64 {
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("stats: "))
        .expect("stats line");
    let v: serde_json::Value = serde_json::from_str(json).expect("stats JSON");
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {json}"))
}

#[test]
fn test_written_by_one_process_read_back_by_another_then_deleted() {
    let seeds = cluster();
    let name = unique("round-trip");
    let pages = 200;
    let wrote = round_trip(&seeds, &name, pages, 0x5eed, 0);
    // 16 frames for 200 pages: most were written back before the flush.
    assert!(stat(&wrote, "writebacks") >= (pages - 16) as u64, "{wrote}");
    let deleted = run(&["delete", &seeds, &name], "deleted");
    let gone = refusal(&deleted, "map after delete", libc::ENOENT);
    assert!(
        gone.contains(&format!("no far dataspace \"{name}\"")) && gone.contains(&seeds),
        "{gone}"
    );
    refusal(&deleted, "second delete", libc::ENOENT);
}

#[test]
fn test_replica_wait_is_recorded_and_met_on_the_cluster() {
    let seeds = cluster();
    let name = unique("waited");
    round_trip(&seeds, &name, 70, 0xfeed, 1);
    // The wait is recorded in the dataspace's metadata, for every opener.
    let port = seeds.split(',').next().unwrap().rsplit(':').next().unwrap();
    let meta = redis_cli(
        &["-c", "-p", port],
        &["GET", &format!("pp:{{{name}}}:meta")],
    );
    assert!(
        meta.contains(&format!("wait=1/{}", 500)),
        "metadata of {name}: {meta:?}"
    );
    run(&["delete", &seeds, &name], "deleted");
}

#[test]
fn test_replica_wait_on_a_server_without_replicas_is_refused_and_fails_write_backs() {
    let server = Server::start();
    let name = unique("unreplicated");
    let out = run(&["unreplicated", &server.url(), &name], "OK");
    let msg = refusal(&out, "unreplicated create", libc::ETIMEDOUT);
    for needle in [
        format!("\"{name}\""),
        server.url(),
        "0 of 1 replica(s) acknowledged".to_string(),
    ] {
        assert!(msg.contains(&needle), "{msg:?} lacks {needle:?}");
    }
    // Created nonetheless, its wait recorded: the write-back of a mapping
    // asking no wait failed all the same.
    let meta = server.cli(&["GET", &format!("pp:{{{name}}}:meta")]);
    assert!(meta.contains("wait=1/100"), "{meta:?}");
    let rc: i32 = out
        .lines()
        .find_map(|l| l.strip_prefix("flush unreplicated: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no flush line:\n{out}"));
    assert_eq!(rc, -libc::EIO, "{out}");
    // No page reached the server: only the metadata key is there.
    let keys = server.cli(&["KEYS", &format!("pp:{{{name}:*")]);
    assert_eq!(keys.trim(), "", "page keys written: {keys:?}");
}

#[test]
fn test_missing_names_bad_seeds_names_and_waits_are_refused_naming_them() {
    let seeds = cluster();
    let out = run(&["refusals", &seeds], "OK");
    let cases: &[(&str, i32, &[&str])] = &[
        (
            "missing",
            libc::ENOENT,
            &["no far dataspace \"pp-capi-missing\"", &seeds],
        ),
        ("empty seeds", libc::EINVAL, &["bad Redis seeds \"\""]),
        (
            "seed without port",
            libc::EINVAL,
            &["\"localhost\"", "host:port"],
        ),
        ("empty seed", libc::EINVAL, &["seed 2 of 3 is empty"]),
        ("bad url", libc::EINVAL, &["notaport"]),
        ("NULL seeds", libc::EINVAL, &["seeds is NULL"]),
        ("bad name", libc::EINVAL, &["\"a/b\"", "ASCII letters"]),
        ("empty name", libc::EINVAL, &["empty"]),
        ("NULL name", libc::EINVAL, &["name is NULL"]),
        ("wait of 0 ms", libc::EINVAL, &["wait_ms > 0"]),
        (
            "wait beyond the reply timeout",
            libc::EINVAL,
            &["reply timeout"],
        ),
        (
            "too long",
            libc::EINVAL,
            &["\"pp-capi-huge\"", "2199023255552 bytes"],
        ),
        ("delete missing", libc::ENOENT, &["\"pp-capi-missing\""]),
        ("delete bad name", libc::EINVAL, &["\"a{b}\""]),
        ("delete empty seeds", libc::EINVAL, &["bad Redis seeds"]),
    ];
    for (what, errno, needles) in cases {
        let msg = refusal(&out, what, *errno);
        for n in *needles {
            assert!(msg.contains(n), "{what}: {msg:?} lacks {n:?}");
        }
    }
}
