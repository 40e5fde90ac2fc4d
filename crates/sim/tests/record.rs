//! Recording real programs under valgrind lackey.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use pagepilot_sim::trace::record::{record, RecordError, RecordOptions};
use pagepilot_sim::trace::{self, Format};

/// Fails the test unless `tool` runs: CI has valgrind and cc (scripts/setup
/// installs them), so a missing one is a failure, not a skip.
fn need(tool: &str) {
    let runs = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        runs,
        "{tool} is not installed: recording runs programs under valgrind (scripts/setup installs it)"
    );
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pagepilot-record-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Writes one byte to each of 256 consecutive fresh pages: the recorded
/// trace must show those writes, in address order.
const SWEEP_C: &str = r#"
#include <stdlib.h>
int main(void) {
    volatile char *p = malloc(257 * 4096);
    for (int i = 0; i < 256; i++) p[i * 4096 + 100] = 1;
    return p[100] - 1;
}
"#;

#[test]
fn test_record_streams_a_real_programs_page_writes() {
    need("valgrind");
    need("cc");
    let dir = scratch("sweep");
    std::fs::write(dir.join("sweep.c"), SWEEP_C).unwrap();
    let bin = dir.join("sweep");
    let ok = Command::new("cc")
        .args(["-O0", "-o"])
        .arg(&bin)
        .arg(dir.join("sweep.c"))
        .status()
        .unwrap();
    assert!(ok.success());
    let out = dir.join("sweep.pptrace");
    let r = record(
        &[bin.clone().into_os_string()],
        &out,
        &RecordOptions::default(),
    )
    .unwrap();
    assert!(r.status.success(), "{:?}", r.status);
    // Only the page trace was written: no lackey log next to it.
    assert_eq!(files_in(&dir), ["sweep", "sweep.c", "sweep.pptrace"]);

    let t = trace::load(&out).unwrap();
    assert_eq!(t.len() as u64, r.written.references);
    assert_eq!(t.distinct() as u64, r.written.pages);
    assert_eq!(t.write_count(), r.written.writes);
    assert_eq!(t.page_size, Some(4096));
    // First write to each page, in order of time.
    let mut first_written = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, v) in t.vpns().enumerate() {
        if t.is_write(i) && seen.insert(v) {
            first_written.push(v);
        }
    }
    let run = first_written
        .windows(256)
        .any(|w| w.windows(2).all(|p| p[1] == p[0] + 1));
    assert!(
        run,
        "no 256 consecutive pages first written in address order"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_record_compressed_output_and_missing_program() {
    need("valgrind");
    let dir = scratch("true");
    let out = dir.join("true.pptrace.zst");
    let opts = RecordOptions {
        format: Format::Binary,
        ..RecordOptions::default()
    };
    let r = record(&[OsString::from("/bin/true")], &out, &opts).unwrap();
    assert_eq!(files_in(&dir), ["true.pptrace.zst"]);
    let t = trace::load(&out).unwrap();
    assert_eq!(t.len() as u64, r.written.references);
    assert!(t.has_writes());

    let missing = dir.join("missing.pptrace");
    let e = record(&[OsString::from("/nonexistent/program")], &missing, &opts).unwrap_err();
    assert!(matches!(e, RecordError::Empty { .. }), "{e}");
    assert!(!missing.exists(), "a failed recording leaves no file");
    let _ = std::fs::remove_dir_all(&dir);
}
