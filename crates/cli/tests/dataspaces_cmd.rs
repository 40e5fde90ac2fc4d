//! `pagepilot dataspaces ...` end to end: the real binary on persistent
//! dataspaces in a scratch directory on the disk.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use pagepilot_pager::dataspace::{DataspaceId, PersistentManager};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

fn pagepilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagepilot"))
        .args(args)
        .output()
        .unwrap()
}

/// A fresh directory on the disk (sparse files, as the dataspaces' will be).
fn scratch(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dataspaces-cmd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The command's error (it failed, naming what).
fn refused(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).expect("JSON")
}

#[test]
fn test_create_list_info_delete_with_sizes_and_sparse_usage() {
    let dir = scratch("lifecycle");
    let d = s(&dir);
    let created = ok(&pagepilot(&[
        "dataspaces",
        "create",
        "big",
        "--size",
        "64M",
        "--dir",
        d,
    ]));
    assert!(
        created.contains("\"big\"") && created.contains("67108864"),
        "{created}"
    );
    ok(&pagepilot(&[
        "dataspaces",
        "create",
        "small",
        "--size",
        "12KiB",
        "--dir",
        d,
    ]));
    // Three pages of "big" written (pages 0, 1 and 1000), as write-back does.
    let data = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("big.pages"))
        .unwrap();
    data.write_all_at(&[7u8; 8192], 0).unwrap();
    data.write_all_at(&[9u8; 4096], 1000 * 4096).unwrap();
    data.sync_all().unwrap();

    let list = json(&pagepilot(&[
        "dataspaces",
        "list",
        "--dir",
        d,
        "--format",
        "json",
    ]));
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    let (big, small) = (&list[0], &list[1]);
    assert_eq!(
        (big["name"].as_str(), big["len"].as_u64()),
        (Some("big"), Some(64 << 20))
    );
    assert_eq!(big["pages_written"].as_u64(), Some(3));
    // Sparse: three pages on disk, not 64 MiB (a filesystem may round up).
    let on_disk = big["bytes_on_disk"].as_u64().unwrap();
    assert!((3 * 4096..=1 << 20).contains(&on_disk), "{big}");
    assert_eq!(
        (small["len"].as_u64(), small["pages_written"].as_u64()),
        (Some(12288), Some(0))
    );
    let table = ok(&pagepilot(&["dataspaces", "list", "--dir", d]));
    assert!(
        table.contains("big") && table.contains("67108864"),
        "{table}"
    );

    let info = json(&pagepilot(&[
        "dataspaces",
        "info",
        "big",
        "--dir",
        d,
        "--format",
        "json",
    ]));
    assert_eq!(info["pages"].as_u64(), Some(16384));
    assert_eq!(info["pages_written"].as_u64(), Some(3));
    assert_eq!(info["header"].as_str(), Some("ok"));
    let text = ok(&pagepilot(&["dataspaces", "info", "big", "--dir", d]));
    assert!(
        text.contains("pages written: 3") && text.contains("header:        ok"),
        "{text}"
    );

    ok(&pagepilot(&["dataspaces", "delete", "big", "--dir", d]));
    assert!(!dir.join("big.pages").exists() && !dir.join("big.meta").exists());
    let list = json(&pagepilot(&[
        "dataspaces",
        "list",
        "--dir",
        d,
        "--format",
        "json",
    ]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_bad_names_sizes_missing_corrupt_and_open_dataspaces_are_refused_naming_them() {
    let dir = scratch("refusals");
    let d = s(&dir);
    let e = refused(&pagepilot(&[
        "dataspaces",
        "create",
        "a/b",
        "--size",
        "1M",
        "--dir",
        d,
    ]));
    assert!(e.contains("\"a/b\"") && e.contains("'/'"), "{e}");
    let e = refused(&pagepilot(&[
        "dataspaces",
        "create",
        ".hidden",
        "--size",
        "1M",
        "--dir",
        d,
    ]));
    assert!(e.contains("\".hidden\""), "{e}");
    for bad in ["0", "lots", "12Q"] {
        let e = refused(&pagepilot(&[
            "dataspaces",
            "create",
            "x",
            "--size",
            bad,
            "--dir",
            d,
        ]));
        assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
    }
    for cmd in ["info", "delete"] {
        let e = refused(&pagepilot(&["dataspaces", cmd, "nothere", "--dir", d]));
        assert!(
            e.contains("no dataspace \"nothere\"") && e.contains(d),
            "{cmd}: {e}"
        );
    }
    ok(&pagepilot(&[
        "dataspaces",
        "create",
        "twice",
        "--size",
        "4k",
        "--dir",
        d,
    ]));
    let e = refused(&pagepilot(&[
        "dataspaces",
        "create",
        "twice",
        "--size",
        "4k",
        "--dir",
        d,
    ]));
    assert!(e.contains("\"twice\"") && e.contains("exists"), "{e}");

    // A header with a byte flipped: info and list name the file and why;
    // it can still be deleted.
    ok(&pagepilot(&[
        "dataspaces",
        "create",
        "hurt",
        "--size",
        "8k",
        "--dir",
        d,
    ]));
    let meta = dir.join("hurt.meta");
    let mut h = std::fs::read(&meta).unwrap();
    h[20] ^= 1;
    std::fs::write(&meta, h).unwrap();
    let e = refused(&pagepilot(&["dataspaces", "info", "hurt", "--dir", d]));
    assert!(e.contains("hurt.meta") && e.contains("checksum"), "{e}");
    let out = pagepilot(&["dataspaces", "list", "--dir", d]);
    let e = refused(&out);
    assert!(e.contains("damaged: hurt"), "{e}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("twice") && table.contains("hurt") && table.contains("DAMAGED"),
        "{table}"
    );
    // A data file of another length than its header says.
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("twice.pages"))
        .unwrap()
        .set_len(100)
        .unwrap();
    let e = refused(&pagepilot(&["dataspaces", "info", "twice", "--dir", d]));
    assert!(e.contains("twice.pages") && e.contains("100 bytes"), "{e}");
    ok(&pagepilot(&["dataspaces", "delete", "hurt", "--dir", d]));

    // One mapped by a region (here, in this process): delete is refused.
    let pm = PersistentManager::new(&dir);
    pm.create_named("mapped", 16 * 4096).unwrap();
    let region = Region::map(RegionOptions::new(
        Backing::Dataspaces(vec![Attachment::whole(
            Arc::new(pm),
            DataspaceId::Name("mapped".into()),
        )]),
        8 * 4096,
        "lru",
    ))
    .expect("map the dataspace");
    let e = refused(&pagepilot(&["dataspaces", "delete", "mapped", "--dir", d]));
    assert!(e.contains("\"mapped\"") && e.contains("open"), "{e}");
    // Written through the region and flushed: info counts the pages.
    for page in [0, 3, 4, 15] {
        // SAFETY: page `page` is inside the 16-page region.
        unsafe { region.as_ptr().add(page * 4096).write_volatile(1) };
    }
    region.flush().unwrap();
    let info = json(&pagepilot(&[
        "dataspaces",
        "info",
        "mapped",
        "--dir",
        d,
        "--format",
        "json",
    ]));
    assert_eq!(info["pages_written"].as_u64(), Some(4), "{info}");
    region.unmap().unwrap();
    ok(&pagepilot(&["dataspaces", "delete", "mapped", "--dir", d]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_the_default_directory_is_under_pagepilot_home() {
    let home = scratch("home");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pagepilot"))
            .args(args)
            .env("PAGEPILOT_HOME", &home)
            .output()
            .unwrap()
    };
    ok(&run(&["dataspaces", "create", "mine", "--size", "1M"]));
    assert!(home.join("dataspaces/mine.meta").exists());
    let list = ok(&run(&["dataspaces", "list"]));
    assert!(list.contains("mine"), "{list}");
    ok(&run(&["dataspaces", "delete", "mine"]));
    // No home at all: told how to name a directory.
    let out = Command::new(env!("CARGO_BIN_EXE_pagepilot"))
        .args(["dataspaces", "list"])
        .env_remove("PAGEPILOT_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("HOME")
        .output()
        .unwrap();
    let e = refused(&out);
    assert!(e.contains("--dir"), "{e}");
    let _ = std::fs::remove_dir_all(&home);
}
