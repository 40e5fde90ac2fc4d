//! Persistent dataspaces through the C API, as C programs see them
//! (`tests/c/persistent.c`, compiled against the header and the library):
//! a process writes a dataspace through a region, `pp_flush`es and is
//! SIGKILLed; a new process reopens it by name and compares every byte;
//! the data file is compared byte for byte here too; refusals carry a
//! message naming the dataspace.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use common::{c_program, compile};

/// A fresh scratch directory on the disk (target/tmp), not tmpfs.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Byte `i` written with `seed` (`byte_at` of `persistent.c`).
fn byte_at(seed: u64, i: usize) -> u8 {
    let mut x = (seed ^ (i / 8) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    (x >> (8 * (i % 8))) as u8
}

fn program(dir: &Path) -> PathBuf {
    compile(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/persistent.c"),
        dir,
    )
}

#[test]
fn test_written_flushed_killed_and_reopened_by_name_byte_for_byte() {
    let dir = scratch("capi-persistent");
    let exe = program(&dir);
    let store = dir.join("dataspaces");
    let (name, pages, seed) = ("survivor", 200usize, 0x5eed_u64);
    let run = |mode: &str| {
        c_program(&exe)
            .arg(mode)
            .arg(&store)
            .arg(name)
            .arg(pages.to_string())
            .arg(seed.to_string())
            .output()
            .expect("run the C program")
    };
    let out = run("write");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "the writer was not killed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("flushed"), "{stdout}");
    // The data file, as the persistent manager keeps it.
    let data = std::fs::read(store.join(format!("{name}.pages"))).expect("NAME.pages");
    assert_eq!(data.len(), pages * 4096);
    if let Some(i) = (0..data.len()).find(|&i| data[i] != byte_at(seed, i)) {
        panic!(
            "byte {i} (page {}) of the data file: {}, {} expected",
            i / 4096,
            data[i],
            byte_at(seed, i)
        );
    }
    // A new process, by name, through the C API.
    let out = run("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("checked"),
        "reopening failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("refused mapped twice: ") && stdout.contains(&format!("\"{name}\"")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("errno delete while mapped: {} ", libc::EBUSY)),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_bad_names_missing_dataspaces_and_bad_arguments_are_refused_naming_them() {
    let dir = scratch("capi-persistent-refusals");
    let exe = program(&dir);
    let store = dir.join("dataspaces");
    let out = c_program(&exe)
        .arg("refusals")
        .arg(&store)
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\nOK\n"),
        "C program failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |what: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{what}: ")))
            .unwrap_or_else(|| panic!("no {what}:\n{stdout}"))
            .to_owned()
    };
    let store = store.to_str().unwrap();
    for (what, needles) in [
        ("refused bad name", vec!["\"a/b\"", "'/'", store]),
        ("refused empty name", vec!["\"\"", "empty"]),
        ("refused NULL name", vec!["name is NULL"]),
        (
            "refused missing dataspace",
            vec!["no persistent dataspace \"missing\"", store],
        ),
        ("refused unknown policy", vec!["no-such-policy"]),
        ("refused budget below one page", vec!["budget"]),
        (
            "refused shorter than asked",
            vec!["\"fresh\"", "16384 bytes", "32768"],
        ),
        ("errno delete missing", vec!["2 ", "\"missing\""]),
        ("errno delete bad name", vec!["22 ", "\"..\""]),
    ] {
        let msg = line(what);
        for n in needles {
            assert!(msg.contains(n), "{what}: {msg:?} lacks {n:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
