//! The compressed manager: a file transferred to it reads through, writes
//! stay in the compressed tier until evicted (least recently used first)
//! or synced down; zero pages cost nothing; a test per operation.

mod common;

use std::sync::Arc;

use common::{numbered_file, pages, read, write, Layer, Page};
use pagepilot_dataspace::{
    Access, CloseError, CompressedManager, CreateError, DataspaceId, DeleteError, FileManager,
    IdentifyError, Manager, OpenError, PageStore, PAGE,
};

/// A file of `n` numbered pages transferred to `cm`: its path and new id.
fn compressed_file(
    dir: &tempfile::TempDir,
    cm: &CompressedManager,
    n: usize,
) -> (std::path::PathBuf, DataspaceId) {
    let path = dir.path().join("data");
    numbered_file(&path, n);
    let id = FileManager
        .transfer(&DataspaceId::Path(path.clone()), cm)
        .unwrap();
    (path, id)
}

/// Byte `at` of the file at `path`, read past every store.
fn file_byte(path: &std::path::Path, at: usize) -> u8 {
    std::fs::read(path).unwrap()[at]
}

/// A page of pseudo-random (incompressible) bytes from `seed`.
fn noise(seed: u64) -> Page {
    let mut x = seed | 1;
    let mut p = Page([0; PAGE]);
    for b in p.0.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    p
}

fn put(store: &dyn PageStore, page: usize, data: &Page) {
    // SAFETY: one aligned page of ours.
    unsafe { store.write(page, 1, data.0.as_ptr()) }.unwrap();
}

#[test]
fn test_transferred_file_reads_through_and_writes_reach_it_only_at_sync() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(1 << 20, dir.path());
    let (path, id) = compressed_file(&dir, &cm, 16);
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    let (got, bytes) = read(store.as_ref(), 0, 16);
    assert_eq!(got, 16);
    assert!(bytes
        .chunks(PAGE)
        .enumerate()
        .all(|(i, p)| p.iter().all(|&b| b == i as u8 + 1)));
    let s = cm.stats(&id).unwrap();
    assert_eq!((s.reads_from_lower, s.reads_kept, s.pages), (16, 16, 16));
    // Kept, clean: read again from the tier.
    let (_, again) = read(store.as_ref(), 0, 16);
    assert!(again == bytes);
    let s = cm.stats(&id).unwrap();
    assert_eq!((s.reads_from_lower, s.reads_from_tier), (16, 16));

    write(store.as_ref(), 3, 2, 0xaa);
    assert_eq!(file_byte(&path, 3 * PAGE), 4, "not written down yet");
    let (_, bytes) = read(store.as_ref(), 3, 2);
    assert!(bytes.iter().all(|&b| b == 0xaa));
    let s = cm.stats(&id).unwrap();
    assert_eq!((s.reads_from_tier, s.pages, s.dirty_pages), (18, 16, 2));
    assert!(
        s.compressed_bytes < 16 * PAGE / 10,
        "pages of one byte compress: {s:?}"
    );

    store.sync().unwrap();
    assert_eq!(file_byte(&path, 4 * PAGE + 7), 0xaa);
    let s = cm.stats(&id).unwrap();
    assert_eq!(
        (s.dirty_pages, s.synced_to_lower, s.pages),
        (0, 2, 16),
        "clean, still held"
    );
    cm.close(&id, store).unwrap();
}

#[test]
fn test_tier_over_budget_writes_least_recently_used_pages_down_to_lower() {
    let dir = tempfile::tempdir().unwrap();
    // Four incompressible pages' worth.
    let cm = CompressedManager::with_dir(4 * PAGE, dir.path());
    let (path, id) = compressed_file(&dir, &cm, 8);
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    for p in 0..3 {
        put(store.as_ref(), p, &noise(p as u64 + 1));
    }
    read(store.as_ref(), 0, 1); // page 0 is now the most recently used
    put(store.as_ref(), 3, &noise(4));
    assert_eq!(
        cm.stats(&id).unwrap().evictions_to_lower,
        0,
        "at the budget, not over it"
    );
    put(store.as_ref(), 4, &noise(5));
    let s = cm.stats(&id).unwrap();
    assert!(s.compressed_bytes <= s.budget_bytes, "{s:?}");
    assert_eq!(s.evictions_to_lower, 2, "{s:?}");
    let file = std::fs::read(&path).unwrap();
    assert_eq!(
        &file[PAGE..3 * PAGE],
        [noise(2).0, noise(3).0].concat(),
        "pages 1 and 2 went down"
    );
    assert_eq!(file[0], 1, "page 0 was used since: still only in the tier");
    // Every page reads back its latest contents, from wherever it is.
    for p in 0..5 {
        assert_eq!(
            read(store.as_ref(), p, 1).1,
            noise(p as u64 + 1).0,
            "page {p}"
        );
    }
    cm.close(&id, store).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap()[..PAGE],
        noise(1).0,
        "close writes the rest down"
    );
}

#[test]
fn test_dataspaces_of_one_manager_share_its_budget_and_the_oldest_pages_go_first() {
    let dir = tempfile::tempdir().unwrap();
    // Four incompressible pages' worth, for both dataspaces together.
    let cm = CompressedManager::with_dir(4 * PAGE, dir.path());
    let (a_path, a) = compressed_file(&dir, &cm, 8);
    let b_dir = tempfile::tempdir().unwrap();
    let (b_path, b) = compressed_file(&b_dir, &cm, 8);
    let (sa, sb) = (
        cm.open(&a, Access::ReadWrite, None).unwrap(),
        cm.open(&b, Access::ReadWrite, None).unwrap(),
    );
    put(sa.as_ref(), 0, &noise(1));
    put(sa.as_ref(), 1, &noise(2));
    put(sb.as_ref(), 0, &noise(3));
    put(sb.as_ref(), 1, &noise(4));
    let (ta, tb) = (cm.stats(&a).unwrap(), cm.stats(&b).unwrap());
    assert_eq!(
        ta.evictions_to_lower + tb.evictions_to_lower,
        0,
        "at the budget"
    );
    assert_eq!(ta.pool_bytes, 4 * PAGE, "{ta:?}");
    read(sa.as_ref(), 0, 1); // a's page 0 is now the most recently used
    put(sb.as_ref(), 2, &noise(5));
    let (ta, tb) = (cm.stats(&a).unwrap(), cm.stats(&b).unwrap());
    // Five pages over four: down to 7/8 of the budget, the two least
    // recently used of the pool, one of each dataspace.
    assert_eq!(
        (ta.evictions_to_lower, tb.evictions_to_lower),
        (1, 1),
        "{ta:?} {tb:?}"
    );
    assert_eq!(ta.pool_bytes, 3 * PAGE);
    assert_eq!(ta.pool_bytes, ta.compressed_bytes + tb.compressed_bytes);
    let (fa, fb) = (
        std::fs::read(&a_path).unwrap(),
        std::fs::read(&b_path).unwrap(),
    );
    assert_eq!(&fa[PAGE..2 * PAGE], &noise(2).0[..], "a's page 1 went down");
    assert_eq!(&fb[..PAGE], &noise(3).0[..], "b's page 0 went down");
    assert_eq!(fa[0], 1, "a's page 0 was used since: only in the tier");
    cm.close(&a, sa).unwrap();
    cm.close(&b, sb).unwrap();
    // A dataspace dropped gives its bytes back to the pool.
    cm.delete(&b).unwrap();
    assert_eq!(
        cm.stats(&a).unwrap().pool_bytes,
        cm.stats(&a).unwrap().compressed_bytes
    );
}

#[test]
fn test_zero_pages_are_held_as_nothing_and_still_reach_lower() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(1 << 20, dir.path());
    let (path, id) = compressed_file(&dir, &cm, 4);
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 1, 2, 0);
    let s = cm.stats(&id).unwrap();
    assert_eq!((s.pages, s.zero_pages, s.compressed_bytes), (2, 2, 0));
    assert!(!store.has_data(1) && store.has_data(0));
    assert!(read(store.as_ref(), 1, 2).1.iter().all(|&b| b == 0));
    cm.close(&id, store).unwrap();
    let file = std::fs::read(&path).unwrap();
    assert!(file[PAGE..3 * PAGE].iter().all(|&b| b == 0) && file[3 * PAGE] == 4);

    // Over anonymous swap, a zero page the swap knows is zero needs no entry.
    let anon = cm.create(None, 4 * PAGE as u64).unwrap();
    let store = cm.open(&anon, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 2, 1, 0);
    assert_eq!(cm.stats(&anon).unwrap().pages, 0);
    cm.close(&anon, store).unwrap();
}

#[test]
fn test_text_like_pages_compress_to_well_under_half() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(64 << 20, dir.path());
    let id = cm.create(None, 64 * PAGE as u64).unwrap();
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    let text: Vec<u8> = (0..)
        .flat_map(|i: usize| {
            format!("line {i}: the quick brown fox jumps over the lazy dog\n").into_bytes()
        })
        .take(64 * PAGE)
        .collect();
    let mut buf = pages(64);
    for (p, chunk) in buf.iter_mut().zip(text.chunks(PAGE)) {
        p.0.copy_from_slice(chunk);
    }
    // SAFETY: 64 aligned pages of ours.
    unsafe { store.write(0, 64, buf.as_ptr().cast()) }.unwrap();
    let s = cm.stats(&id).unwrap();
    assert!(s.compressed_bytes * 2 < 64 * PAGE, "{s:?}");
    assert_eq!(read(store.as_ref(), 0, 64).1, text);
    cm.close(&id, store).unwrap();
}

#[test]
fn test_create_makes_a_compressed_dataspace_over_fresh_swap_and_refuses_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(PAGE, dir.path());
    let id = cm.create(None, 8 * PAGE as u64).unwrap();
    assert_eq!(cm.stack(&id).unwrap(), vec![cm.key()]);
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    assert!(!store.persistent(), "over anonymous swap");
    for p in 0..8 {
        put(store.as_ref(), p, &noise(p as u64 + 100));
    }
    assert!(cm.stats(&id).unwrap().evictions_to_lower > 0);
    for p in 0..8 {
        assert_eq!(
            read(store.as_ref(), p, 1).1,
            noise(p as u64 + 100).0,
            "page {p}"
        );
    }
    cm.close(&id, store).unwrap();
    let named = cm
        .create(Some(&dir.path().join("x")), PAGE as u64)
        .unwrap_err();
    assert!(
        matches!(
            named,
            CreateError::BadName {
                manager: "compressed",
                ..
            }
        ),
        "{named}"
    );
    assert!(matches!(cm.create(None, 0), Err(CreateError::Empty { .. })));
}

#[test]
fn test_identify_says_length_and_manager_and_refuses_unknown_ids() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(PAGE, dir.path());
    let (_, id) = compressed_file(&dir, &cm, 3);
    let who = cm.identify(&id).unwrap();
    assert_eq!(
        (who.manager, who.len, who.inode),
        ("compressed", 3 * PAGE as u64, None)
    );
    for bad in [
        DataspaceId::Anonymous(99),
        DataspaceId::Path("/nope".into()),
    ] {
        match cm.identify(&bad) {
            Err(IdentifyError::NoSuch(n)) => assert_eq!((n.manager, n.id), ("compressed", bad)),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn test_open_checks_length_and_read_only_stores_refuse_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(PAGE, dir.path());
    let (_, id) = compressed_file(&dir, &cm, 2);
    let short = cm
        .open(&id, Access::ReadOnly, Some(3 * PAGE as u64))
        .unwrap_err();
    assert!(matches!(short, OpenError::Short { actual, .. } if actual == 2 * PAGE as u64));
    let rw = cm.open(&id, Access::ReadWrite, None).unwrap();
    let ro = cm.open(&id, Access::ReadOnly, None).unwrap();
    write(rw.as_ref(), 1, 1, 0x77);
    assert_eq!(read(ro.as_ref(), 1, 1).1[0], 0x77, "opens share the tier");
    let buf = pages(1);
    // SAFETY: one aligned page of ours.
    let err = unsafe { ro.write(0, 1, buf.as_ptr().cast()) }.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("read-only"), "{err}");
    cm.close(&id, ro).unwrap();
    cm.close(&id, rw).unwrap();
}

#[test]
fn test_close_refuses_a_store_of_another_dataspace_or_manager() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(PAGE, dir.path());
    let other = CompressedManager::with_dir(PAGE, dir.path());
    let a = cm.create(None, PAGE as u64).unwrap();
    let b = cm.create(None, PAGE as u64).unwrap();
    let theirs = other.create(None, PAGE as u64).unwrap();
    let store = cm.open(&a, Access::ReadWrite, None).unwrap();
    assert!(matches!(
        cm.close(&b, store),
        Err(CloseError::Foreign {
            manager: "compressed",
            ..
        })
    ));
    let store = other.open(&theirs, Access::ReadWrite, None).unwrap();
    assert!(matches!(
        cm.close(&a, store),
        Err(CloseError::Foreign { .. })
    ));
}

#[test]
fn test_delete_refuses_an_open_dataspace_and_drops_a_closed_one() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(PAGE, dir.path());
    let (path, id) = compressed_file(&dir, &cm, 2);
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 0, 1, 9);
    assert!(matches!(cm.delete(&id), Err(DeleteError::Open(_))));
    cm.close(&id, store).unwrap();
    cm.delete(&id).unwrap();
    assert!(cm.identify(&id).is_err() && cm.stack(&id).is_none());
    assert_eq!(file_byte(&path, 0), 9, "what was synced stays in the file");
    assert!(matches!(cm.delete(&id), Err(DeleteError::NoSuch(_))));
}

#[test]
fn test_transfer_onwards_moves_the_dataspace_and_keeps_its_stack() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(PAGE, dir.path());
    let (_, id) = compressed_file(&dir, &cm, 4);
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    write(store.as_ref(), 2, 1, 0x31);
    cm.close(&id, store).unwrap();
    let layer = Layer::new();
    let moved = cm.transfer(&id, &layer).unwrap();
    assert_eq!(
        layer.stack(&moved).unwrap(),
        vec![FileManager.key(), cm.key(), layer.key()]
    );
    let store = layer.open(&moved, Access::ReadWrite, None).unwrap();
    assert_eq!(read(store.as_ref(), 2, 1).1[0], 0x31);
    assert!(matches!(
        cm.open(&id, Access::ReadWrite, None),
        Err(OpenError::NoSuch(_))
    ));
    assert!(cm.stats(&id).is_some(), "its tier is alive under the layer");
}

#[test]
fn test_concurrent_readers_and_writers_under_a_small_budget_see_their_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(8 * PAGE, dir.path());
    let (path, id) = compressed_file(&dir, &cm, 64);
    let store: Arc<dyn PageStore> = Arc::from(cm.open(&id, Access::ReadWrite, None).unwrap());
    std::thread::scope(|s| {
        for t in 0..4usize {
            let store = store.clone();
            s.spawn(move || {
                for round in 0..50u64 {
                    for p in (t..64).step_by(4) {
                        let page = noise(round * 1000 + p as u64 + 1);
                        put(store.as_ref(), p, &page);
                        assert_eq!(read(store.as_ref(), p, 1).1, page.0, "thread {t} page {p}");
                    }
                }
            });
        }
    });
    let s = cm.stats(&id).unwrap();
    assert!(
        s.evictions_to_lower > 0 && s.compressed_bytes <= s.budget_bytes,
        "{s:?}"
    );
    store.sync().unwrap();
    let file = std::fs::read(&path).unwrap();
    for p in 0..64 {
        assert_eq!(
            file[p * PAGE..(p + 1) * PAGE],
            noise(49_000 + p as u64 + 1).0,
            "page {p}"
        );
    }
}

/// Compression ratio and read-path pages/s of the tier on a realistic mix
/// (text-like log lines, counters, zero pages, some noise). A measurement,
/// not a check: `cargo test --release -p pagepilot-dataspace --test
/// compressed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run with --release -- --ignored --nocapture"]
fn measure_tier_ratio_and_read_path_pages_per_second() {
    let n = 16384;
    let dir = tempfile::tempdir().unwrap();
    let cm = CompressedManager::with_dir(usize::MAX, dir.path());
    let id = cm.create(None, (n * PAGE) as u64).unwrap();
    let store = cm.open(&id, Access::ReadWrite, None).unwrap();
    let mut buf = pages(n);
    let mut line = 0u64;
    for (i, p) in buf.iter_mut().enumerate() {
        match i % 10 {
            0..=5 => {
                let mut text = Vec::with_capacity(PAGE + 128);
                while text.len() < PAGE {
                    line += 1;
                    let level = ["INFO", "WARN", "DEBUG"][(line % 3) as usize];
                    text.extend_from_slice(
                        format!("2024-05-{:02} 12:{:02}:{:02} {level} request {line} served in {} us from shard {}\n",
                            line % 28 + 1, line % 60, (line * 7) % 60, line * 37 % 9973, line % 16).as_bytes(),
                    );
                }
                p.0.copy_from_slice(&text[..PAGE]);
            }
            6 => {
                for (k, w) in p.0.chunks_mut(8).enumerate() {
                    w.copy_from_slice(&((i * 512 + k) as u64).to_le_bytes());
                }
            }
            7 | 8 => {}
            _ => p.0 = noise(i as u64 + 1).0,
        }
    }
    let start = std::time::Instant::now();
    // SAFETY: n aligned pages of ours.
    unsafe { store.write(0, n, buf.as_ptr().cast()) }.unwrap();
    let wrote = start.elapsed();
    let s = cm.stats(&id).unwrap();
    let nonzero = s.pages - s.zero_pages;
    let mut out = pages(1);
    let rounds = 8;
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        for p in 0..n {
            // SAFETY: one aligned page of ours.
            unsafe { store.read(p, 1, out.as_mut_ptr().cast()) }.unwrap();
        }
    }
    let read = start.elapsed();
    assert_eq!(read_back_check(store.as_ref(), &buf), 0);
    println!(
        "{n} pages ({} zero, held as nothing): {} compressed bytes; ratio {:.2} over all pages, {:.2} over non-zero ones; \
         write {:.0} pages/s, read {:.0} pages/s ({:.0} MiB/s)",
        n - nonzero,
        s.compressed_bytes,
        (n * PAGE) as f64 / s.compressed_bytes as f64,
        (nonzero * PAGE) as f64 / s.compressed_bytes as f64,
        n as f64 / wrote.as_secs_f64(),
        (rounds * n) as f64 / read.as_secs_f64(),
        (rounds * n * PAGE) as f64 / read.as_secs_f64() / (1 << 20) as f64,
    );
    cm.close(&id, store).unwrap();

    // The same pages in a file (in the page cache) under the tier: the
    // first read takes them from the file and keeps them, the next from
    // the tier; under a budget of a third of their compressed size, the
    // next read takes most from the file again.
    for (label, budget) in [
        ("a budget that holds them", usize::MAX),
        ("a third of them", s.compressed_bytes / 3),
    ] {
        let cm = CompressedManager::with_dir(budget, dir.path());
        let path = dir.path().join("lower");
        // SAFETY: n pages of ours, as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n * PAGE) };
        std::fs::write(&path, bytes).unwrap();
        let id = FileManager
            .transfer(&DataspaceId::Path(path.clone()), &cm)
            .unwrap();
        let store = cm.open(&id, Access::ReadOnly, None).unwrap();
        let mut rates = Vec::new();
        for _ in 0..2 {
            let start = std::time::Instant::now();
            for p in 0..n {
                // SAFETY: one aligned page of ours.
                unsafe { store.read(p, 1, out.as_mut_ptr().cast()) }.unwrap();
            }
            rates.push(n as f64 / start.elapsed().as_secs_f64());
        }
        let s = cm.stats(&id).unwrap();
        println!(
            "over a cached file, {label}: first read {:.0} pages/s (kept {}), second {:.0} pages/s ({} from the tier, {} from the file)",
            rates[0], s.reads_kept, rates[1], s.reads_from_tier, s.reads_from_lower - n as u64
        );
        cm.close(&id, store).unwrap();
    }
}

/// Pages of `store` differing from `want`.
fn read_back_check(store: &dyn PageStore, want: &[Page]) -> usize {
    let (_, got) = read(store, 0, want.len());
    got.chunks(PAGE)
        .zip(want)
        .filter(|(g, w)| *g != w.0.as_slice())
        .count()
}
