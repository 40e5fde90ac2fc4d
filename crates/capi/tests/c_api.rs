//! Compiles C programs against `include/pagepilot.h` and the built
//! `libpagepilot.so` with the system's C compiler and runs them: the C API as
//! a C program sees it (mapping, touching, data checks, bad input).

mod common;
#[path = "common/no_userfaultfd.rs"]
mod no_userfaultfd;

use std::path::{Path, PathBuf};

use common::{c_program, compile, repo_root};
use no_userfaultfd::{as_nobody_without_userfaultfd, assert_names_every_way_and_its_fix};

/// A fresh scratch directory on the disk (target/tmp), not tmpfs.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn test_c_program_maps_touches_and_refuses_bad_input() {
    let dir = scratch("capi");
    let exe = compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/api_test.c"),
        &dir,
    );
    let out = c_program(&exe)
        .arg(&dir)
        .output()
        .expect("run the C test program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && stdout.contains("\nOK\n"),
        "C test program failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Each refusal carried a message to the C side.
    for what in [
        "missing file",
        "unknown policy",
        "budget below one page",
        "read-only file mapped writable",
        "a minimum beyond the pool",
        "a fault limit over no time",
        "a fault limit of no faults",
        "a minimum above the budget",
        "a reserve that does not fit",
        "a reserve above one processor",
        "a reserve without a fault limit",
    ] {
        assert!(
            stdout.contains(&format!("refused {what}: ")),
            "no refusal of {what}:\n{stdout}"
        );
    }
    assert!(stdout.contains("pins and evictions: ok"), "{stdout}");
    // read(2) and pread(2) into regions mapped with defaults worked without pp_prefault.
    assert!(
        stdout.contains("read(2) into defaults regions: ok"),
        "{stdout}"
    );
}

#[test]
fn test_c_example_builds_and_runs() {
    let dir = scratch("capi-example");
    let exe = compile(&repo_root().join("examples/c/pagepilot_example.c"), &dir);
    let out = c_program(&exe)
        .arg(dir.join("example.dat"))
        .output()
        .expect("run the example");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("sum ok"),
        "example failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn test_a_c_program_refused_userfaultfd_every_way_is_told_each_way_and_its_fix() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("capi-refused");
    let exe = compile(&repo_root().join("examples/c/pagepilot_example.c"), &dir);
    // nobody writes the example's file here.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = as_nobody_without_userfaultfd(&exe)
        .arg(dir.join("example.dat"))
        .output()
        .expect("run the example");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "mapped without userfaultfd:\n{stderr}"
    );
    let message = stderr
        .lines()
        .find_map(|l| l.strip_prefix("pp_map_file: "))
        .unwrap_or_else(|| panic!("no pp_map_file error:\n{stderr}"));
    // Whole in a PP_ERR_MAX buffer: its last words are there.
    assert_names_every_way_and_its_fix(message);
}

/// `crates/bench/c/join.c`, the C program of `pagepilot bench join`'s "defaults (C API)" rows.
fn join_program(dir: &Path) -> PathBuf {
    compile(&repo_root().join("crates/bench/c/join.c"), dir)
}

/// Writes the benchmarks' table (`crates/bench/src/datafile.rs`): 64-byte tuples, tuple `i`
/// holding its join key `i % 1024` in bytes 0..8 and its page number in bytes 8..16.
fn write_table(path: &Path, pages: usize) {
    let mut data = vec![0u8; pages * 4096];
    for (i, tuple) in data.chunks_exact_mut(64).enumerate() {
        tuple[0..8].copy_from_slice(&(i as u64 % 1024).to_ne_bytes());
        tuple[8..16].copy_from_slice(&(i as u64 / 64).to_ne_bytes());
        tuple[16..].fill(i as u8);
    }
    std::fs::write(path, data).expect("write the table");
}

/// The join's match count over `pages` pages (`workload::expected`): inner tuple `j`'s key
/// `(j % 64) * 16` matches every 1024th outer tuple from the key on.
fn expected_matches(pages: u64, loops: u64) -> u64 {
    let tuples = pages * 64;
    (0..loops)
        .map(|j| (j % 64) * 16)
        .map(|k| {
            if k < tuples {
                (tuples - k).div_ceil(1024)
            } else {
                0
            }
        })
        .sum()
}

#[test]
fn test_join_program_counts_the_matches_and_pages_in_by_mru_formula_with_defaults() {
    let dir = scratch("capi-join");
    let exe = join_program(&dir);
    // O = 4096 pages, M = 2048, 4 loops: PF_m = O + (O - M)(Loop - 1) = 10240. (At a quarter
    // of this size the defaults' windows cost exactly 5% over PF_m: too close to the bound.)
    let (o, m, loops) = (4096u64, 2048u64, 4u64);
    let table = dir.join("table.dat");
    write_table(&table, o as usize);
    let out = c_program(&exe)
        .arg(&table)
        .arg((m * 4096).to_string())
        .arg("mru")
        .arg(loops.to_string())
        .output()
        .expect("run the join program");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "join program failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("JSON line");
    assert_eq!(
        r["matches"].as_u64(),
        Some(expected_matches(o, loops)),
        "{r}"
    );
    assert_eq!(r["len"].as_u64(), Some(o * 4096), "{r}");
    assert!(r["elapsed_ns"].as_u64().unwrap() > 0, "{r}");
    let stats = &r["stats"];
    assert!(
        stats["policy"].as_str().unwrap().starts_with("mru"),
        "{stats}"
    );
    let page_ins = stats["missing_faults"].as_u64().unwrap();
    let pf_m = o + (o - m) * (loops - 1);
    assert!(
        page_ins.abs_diff(pf_m) * 20 <= pf_m,
        "page-ins {page_ins} not within 5% of PF_m {pf_m}: {stats}"
    );
}

#[test]
fn test_join_program_refuses_bad_arguments_naming_them() {
    let dir = scratch("capi-join-args");
    let exe = join_program(&dir);
    let (missing, table) = (dir.join("missing.dat"), dir.join("table.dat"));
    write_table(&table, 256);
    let (missing, table) = (missing.to_str().unwrap(), table.to_str().unwrap());
    for (args, needle, code) in [
        (vec![missing], "expected 4 arguments", 2),
        (vec![missing, "40M", "mru", "16"], "BUDGET_BYTES \"40M\"", 2),
        (vec![missing, "4096", "mru", "0"], "LOOPS \"0\"", 2),
        (vec![missing, "4096", "mru", "-3"], "LOOPS \"-3\"", 2),
        (vec![missing, "1048576", "mru", "2"], "missing.dat", 1),
        (
            vec![table, "1048576", "no-such-policy", "2"],
            "no-such-policy",
            1,
        ),
        (vec![table, "100", "mru", "2"], "budget", 1),
    ] {
        let out = c_program(&exe).args(&args).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr} lacks {needle}");
        assert!(out.stdout.is_empty(), "{args:?} printed a result");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_refused_map_call_sets_errno_as_well_as_the_message() {
    let dir = scratch("capi-errno");
    let exe = compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/map_errno.c"),
        &dir,
    );
    let out = c_program(&exe)
        .arg(&dir)
        .output()
        .expect("run the errno program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && stdout.contains("\nOK\n"),
        "errno program failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
