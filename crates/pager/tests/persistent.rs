//! Persistent and pinned dataspaces through the pager, across real
//! processes: a child writes random data through a persistent dataspace
//! mapped in a region smaller than it, and a new process reopens it by name
//! and finds every byte, whether the child ended normally or was SIGKILLed
//! right after `Region::flush`; the same with the persistent dataspace
//! below an anonymous one (SawMill, Figure 5). A pinned dataspace
//! (SawMill, Figure 6) mapped in a region keeps all its pages resident
//! under pressure on the rest; one larger than the budget cannot be mapped.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use pagepilot_pager::dataspace::{
    Access, AnonymousManager, DataspaceId, FileManager, Manager, PersistentManager, PinnedManager,
};
use pagepilot_pager::policy::chain;
use pagepilot_pager::{Attachment, Backing, Eviction, MapError, Region, RegionOptions, PAGE_SIZE};

const PAGE: usize = PAGE_SIZE;
/// The dataspace: 256 pages, mapped under a budget of 16.
const PAGES: usize = 256;
const BUDGET: usize = 16 * PAGE;
const WATCHDOG: Duration = Duration::from_secs(60);

/// The random bytes the children write (the same in every process).
fn data(seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..PAGES * PAGE).map(|_| r.next() as u8).collect()
}

/// Maps all of dataspace `id` of `manager` under `budget` bytes.
fn map(manager: Arc<dyn Manager>, id: DataspaceId, budget: usize) -> Result<Region, MapError> {
    let list = vec![Attachment::whole(manager, id)];
    Region::map(RegionOptions::new(Backing::Dataspaces(list), budget, "lru"))
}

/// Writes `bytes` into `region` page by page in a random order, and writes
/// some pages twice (the second time the right bytes): many times the budget.
fn scribble(region: &Region, bytes: &[u8], seed: u64) {
    let pages = bytes.len() / PAGE;
    let mut order: Vec<usize> = (0..pages).collect();
    let mut r = Rng(seed);
    for i in (1..pages).rev() {
        order.swap(i, r.below(i + 1));
    }
    let put = |p: usize, src: &[u8]| {
        // SAFETY: page `p` lies inside the region, which is writable.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), region.as_ptr().add(p * PAGE), PAGE) };
    };
    for &p in &order {
        put(p, &[0xff; PAGE]);
    }
    for &p in order.iter().rev() {
        put(p, &bytes[p * PAGE..(p + 1) * PAGE]);
    }
}

/// Dataspace `name` in `dir`, reopened by a manager of this process,
/// read through a region of its own: its bytes.
fn reopened(dir: &std::path::Path, name: &str) -> Vec<u8> {
    let pm: Arc<dyn Manager> = Arc::new(PersistentManager::new(dir));
    let id = DataspaceId::Name(name.into());
    let list = vec![Attachment::whole(pm, id).read_only()];
    let region = Region::map(RegionOptions::new(Backing::Dataspaces(list), BUDGET, "lru")).unwrap();
    // SAFETY: the region is mapped for `len` bytes while the slice lives.
    let bytes = unsafe { std::slice::from_raw_parts(region.as_ptr(), region.len()) }.to_vec();
    region.unmap().unwrap();
    bytes
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// A fresh directory that test `test` and its child name alike.
fn store_dir(test: &str) -> std::path::PathBuf {
    let dir = shared_path(test, "pds");
    if !in_scenario(test) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    dir
}

#[test]
fn test_persistent_dataspace_written_by_a_child_is_read_back_byte_for_byte_by_a_new_process() {
    let test =
        "test_persistent_dataspace_written_by_a_child_is_read_back_byte_for_byte_by_a_new_process";
    let dir = store_dir(test);
    let out = in_child_process(test, WATCHDOG, || {
        let pm = Arc::new(PersistentManager::new(&dir));
        let id = pm.create_named("foo", (PAGES * PAGE) as u64).unwrap();
        let region = map(pm, id, BUDGET).unwrap();
        scribble(&region, &data(1), 2);
        assert!(
            region.stats().evictions > 0,
            "the budget is smaller than the dataspace"
        );
        // Ends normally: the region dropped, its pages written back.
    });
    assert!(out.succeeded(), "{out:?}");
    let got = reopened(&dir, "foo");
    assert_eq!(first_difference(&got, &data(1)), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_persistent_dataspace_flushed_before_a_sigkill_is_read_back_byte_for_byte() {
    let test = "test_persistent_dataspace_flushed_before_a_sigkill_is_read_back_byte_for_byte";
    let dir = store_dir(test);
    let out = in_child_process(test, WATCHDOG, || {
        let pm = Arc::new(PersistentManager::new(&dir));
        let id = pm.create_named("foo", (PAGES * PAGE) as u64).unwrap();
        let region = map(pm, id, BUDGET).unwrap();
        scribble(&region, &data(3), 4);
        region.flush().unwrap();
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        unreachable!("killed");
    });
    assert_eq!(out.signal(), Some(libc::SIGKILL), "{out:?}");
    let got = reopened(&dir, "foo");
    assert_eq!(first_difference(&got, &data(3)), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_persistent_dataspace_below_an_anonymous_one_keeps_its_pages_across_a_restart() {
    let test = "test_persistent_dataspace_below_an_anonymous_one_keeps_its_pages_across_a_restart";
    let dir = store_dir(test);
    let written = 3 * PAGES / 4;
    let out = in_child_process(test, WATCHDOG, || {
        let pm = PersistentManager::new(&dir);
        let foo = pm.create_named("foo", (PAGES * PAGE) as u64).unwrap();
        let anon = Arc::new(AnonymousManager::new(std::env::temp_dir()));
        let id = pm.transfer(&foo, anon.as_ref()).unwrap();
        let region = map(anon.clone(), id.clone(), BUDGET).unwrap();
        scribble(&region, &data(5)[..written * PAGE], 6);
        region.unmap().unwrap();
        // Anonymous memory to its user: mapped again, the same pages.
        let region = map(anon, id, BUDGET).unwrap();
        // SAFETY: inside the region.
        let byte = unsafe { region.as_ptr().add(7 * PAGE + 1).read() };
        assert_eq!(byte, data(5)[7 * PAGE + 1]);
        region.unmap().unwrap();
    });
    assert!(out.succeeded(), "{out:?}");
    let got = reopened(&dir, "foo");
    let want = data(5);
    assert_eq!(
        first_difference(&got[..written * PAGE], &want[..written * PAGE]),
        None
    );
    assert!(
        got[written * PAGE..].iter().all(|&b| b == 0),
        "never written: zero"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_persistent_dataspace_mapped_read_write_twice_is_refused_while_the_first_holds_it() {
    let scratch = Scratch::new("pds-busy");
    let pm: Arc<dyn Manager> = Arc::new(PersistentManager::new(scratch.file("ds")));
    let id = PersistentManager::new(scratch.file("ds"))
        .create_named("b", 8 * PAGE as u64)
        .unwrap();
    let first = map(pm.clone(), id.clone(), BUDGET).unwrap();
    let e = map(pm.clone(), id.clone(), BUDGET).expect_err("refused");
    assert!(matches!(e, MapError::Attach { .. }), "{e}");
    assert!(chain(&e).to_string().contains("open already"), "{e}");
    first.unmap().unwrap();
    map(pm, id, BUDGET).unwrap().unmap().unwrap();
}

/// An anonymous dataspace of `pages` pages, page `p` filled with `p + 1`,
/// moved to a pinned manager with a quota of `quota` pages.
fn pinned_dataspace(
    dir: &std::path::Path,
    pages: usize,
    quota: usize,
) -> (Arc<PinnedManager>, DataspaceId) {
    let anon = AnonymousManager::new(dir);
    let id = anon.create(None, (pages * PAGE) as u64).unwrap();
    let store = anon.open(&id, Access::ReadWrite, None).unwrap();
    #[repr(C, align(4096))]
    struct Aligned([u8; PAGE]);
    let buf: Vec<Aligned> = (0..pages).map(|p| Aligned([p as u8 + 1; PAGE])).collect();
    // SAFETY: `buf` holds `pages` page-aligned pages.
    unsafe { store.write(0, pages, buf.as_ptr().cast()) }.unwrap();
    anon.close(&id, store).unwrap();
    let pinned = Arc::new(PinnedManager::new((quota * PAGE) as u64));
    let on = anon.transfer(&id, pinned.as_ref()).unwrap();
    // The anonymous manager may go: the pinned one holds the store.
    (pinned, on)
}

#[test]
fn test_pinned_dataspace_pages_are_never_evicted_under_pressure_on_the_rest() {
    let scratch = Scratch::new("pds-pinned");
    let (pinned, id) = pinned_dataspace(&scratch.path, 8, 8);
    let path = scratch.file("body");
    let body = random_file(&path, 128 * PAGE, 9);
    let list = vec![
        Attachment::whole(pinned.clone(), id.clone()),
        Attachment::whole(Arc::new(FileManager), DataspaceId::Path(path)).at(8 * PAGE),
    ];
    let region = Region::map(RegionOptions::new(
        Backing::Dataspaces(list),
        24 * PAGE,
        "lru",
    ))
    .unwrap();
    region.subscribe_evictions(1 << 16);
    assert_eq!(region.stats().pinned_pages, 8);
    let at = |i: usize| {
        // SAFETY: inside the region.
        unsafe { region.as_ptr().add(i).read_volatile() }
    };
    let mut r = Rng(77);
    for _ in 0..4000 {
        let p = 8 + r.below(128);
        assert_eq!(at(p * PAGE + 5), body[(p - 8) * PAGE + 5], "page {p}");
        if r.below(8) == 0 {
            // SAFETY: a pinned page, inside the writable region.
            unsafe { region.as_ptr().add(r.below(8) * PAGE).write_volatile(0xab) };
        }
    }
    let mut events: Vec<Eviction> = Vec::new();
    region.drain_evictions(&mut events);
    let stats = region.stats();
    assert!(stats.evictions > 1000, "{stats:?}");
    let hit: Vec<usize> = events
        .iter()
        .map(|e| e.offset as usize / PAGE)
        .filter(|&p| p < 8)
        .collect();
    assert!(hit.is_empty(), "pinned pages evicted: {hit:?}");
    assert_eq!(stats.pinned_pages, 8);
    region.unmap().unwrap();
    // Closed back to the pinned manager, still pinned, the writes kept.
    let store = pinned.open(&id, Access::ReadWrite, None).unwrap();
    assert!(store.pinned());
    assert_eq!(pinned.pinned_bytes(), 8 * PAGE as u64);
}

#[test]
fn test_pinned_dataspace_larger_than_the_budget_is_refused_at_map_and_kept_by_its_manager() {
    let scratch = Scratch::new("pds-pin-budget");
    let (pinned, id) = pinned_dataspace(&scratch.path, 16, 16);
    let e = map(pinned.clone(), id.clone(), 8 * PAGE).expect_err("refused");
    assert!(matches!(e, MapError::Pin(_)), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("pinned dataspace") && msg.contains("budget"),
        "{msg}"
    );
    // Nothing lost: the dataspace went back to its manager, pages intact.
    let region = map(pinned, id, 32 * PAGE).unwrap();
    // SAFETY: inside the region.
    assert_eq!(unsafe { region.as_ptr().add(15 * PAGE).read() }, 16);
    assert_eq!(region.stats().pinned_pages, 16);
    region.unmap().unwrap();
}
