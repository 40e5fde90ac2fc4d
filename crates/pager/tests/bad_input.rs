//! Bad input: each is refused with its own typed error and nothing is mapped.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;
use pagepilot_pager::policy::chain;
use pagepilot_pager::policy::registry::RegistryError;
use pagepilot_pager::{Backing, MapError, Region, RegionOptions, PAGE_SIZE};

/// Mappings of region memfds in this process.
fn region_mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains("pagepilot-region"))
        .count()
}

/// Held while a test maps or counts region mappings: tests run in parallel,
/// and one that maps a region must not be counted by another.
static MAPPINGS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn refused(opts: RegionOptions) -> MapError {
    let _only = MAPPINGS.lock().unwrap_or_else(|p| p.into_inner());
    let before = region_mappings();
    let err = Region::map(opts).expect_err("mapping must be refused");
    assert_eq!(
        region_mappings(),
        before,
        "a refused region left a mapping behind"
    );
    assert!(!err.to_string().is_empty());
    err
}

fn file(path: &std::path::Path, writable: bool) -> Backing {
    Backing::File {
        path: path.into(),
        writable,
    }
}

#[test]
fn test_missing_backing_file_is_refused() {
    let d = Scratch::new("bad");
    let p = d.file("nope");
    let e = refused(RegionOptions::new(file(&p, false), 1 << 20, "lru"));
    assert!(matches!(&e, MapError::MissingFile(x) if *x == p), "{e}");
    assert!(e.to_string().contains("nope"));
}

#[test]
fn test_empty_backing_file_is_refused() {
    let d = Scratch::new("bad");
    let p = d.file("empty");
    std::fs::write(&p, b"").unwrap();
    let e = refused(RegionOptions::new(file(&p, true), 1 << 20, "lru"));
    assert!(matches!(e, MapError::EmptyFile(_)), "{e}");
}

#[test]
fn test_short_backing_file_is_refused() {
    let d = Scratch::new("bad");
    let p = d.file("short");
    random_file(&p, 3 * PAGE_SIZE, 1);
    let e = refused(RegionOptions::new(file(&p, false), 1 << 20, "lru").with_len(4 * PAGE_SIZE));
    assert!(
        matches!(e, MapError::ShortFile { actual, expected, .. }
            if actual == 3 * PAGE_SIZE as u64 && expected == 4 * PAGE_SIZE as u64),
        "{e}"
    );
}

#[test]
fn test_read_only_file_mapped_writable_is_refused() {
    let d = Scratch::new("bad");
    let p = d.file("ro");
    random_file(&p, 2 * PAGE_SIZE, 1);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    let e = refused(RegionOptions::new(file(&p, true), 1 << 20, "lru"));
    assert!(matches!(e, MapError::ReadOnly(_)), "{e}");
    // Read-only is fine.
    let _only = MAPPINGS.lock().unwrap_or_else(|p| p.into_inner());
    let r = Region::map(RegionOptions::new(file(&p, false), 1 << 20, "lru")).unwrap();
    r.unmap().unwrap();
}

#[test]
fn test_budget_smaller_than_a_page_is_refused() {
    let e = refused(RegionOptions::new(
        Backing::Anonymous { len: 1 << 20 },
        PAGE_SIZE - 1,
        "lru",
    ));
    assert!(
        matches!(e, MapError::BudgetTooSmall { budget, .. } if budget == PAGE_SIZE - 1),
        "{e}"
    );
}

#[test]
fn test_unknown_policy_is_refused_with_the_available_ones() {
    let e = refused(RegionOptions::new(
        Backing::Anonymous { len: 1 << 20 },
        1 << 20,
        "lru2",
    ));
    assert!(
        matches!(&e, MapError::Policy { source: RegistryError::Unknown { name }, .. } if name == "lru2"),
        "{e}"
    );
    assert!(chain(&e).to_string().contains("fifo"), "{e}");
}

#[test]
fn test_simulator_only_policy_is_refused() {
    let e = refused(RegionOptions::new(
        Backing::Anonymous { len: 1 << 20 },
        1 << 20,
        "opt",
    ));
    assert!(
        matches!(
            e,
            MapError::Policy {
                source: RegistryError::SimulatorOnly(_),
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn test_zero_length_anonymous_region_is_refused() {
    let e = refused(RegionOptions::new(
        Backing::Anonymous { len: 0 },
        1 << 20,
        "lru",
    ));
    assert!(matches!(e, MapError::BadLength(0)), "{e}");
}

#[test]
fn test_missing_swap_directory_is_refused() {
    let d = Scratch::new("bad");
    let e = refused(
        RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 1 << 20, "lru")
            .with_swap_dir(d.file("no-such-dir")),
    );
    assert!(matches!(e, MapError::Swap { .. }), "{e}");
}
