//! Failures on the way: a write-back that fails keeps the data in memory and
//! is reported; a policy naming an invalid victim is overruled.

mod common;

use common::*;
use pagepilot_pager::policy::{list::SlotList, Fault, FaultKind, Memory, Page, Policy};
use pagepilot_pager::{Backing, FlushError, Region, RegionOptions, PAGE_SIZE};

fn fill(region: &Region, pages: usize, salt: u8) {
    for p in 0..pages {
        // SAFETY: inside the region.
        unsafe {
            region
                .as_ptr()
                .add(p * PAGE_SIZE + 5)
                .write_volatile(p as u8 ^ salt)
        };
    }
}

fn check(region: &Region, pages: usize, salt: u8) -> usize {
    (0..pages)
        // SAFETY: inside the region.
        .filter(|&p| unsafe { region.as_ptr().add(p * PAGE_SIZE + 5).read_volatile() } != p as u8 ^ salt)
        .count()
}

#[test]
fn test_failed_writeback_to_full_disk_keeps_dirty_data_and_reports_it() {
    // A 64 KiB tmpfs holding a sparse 1 MiB file: writing back more than 16
    // pages fails with ENOSPC.
    let disk = Scratch::tmpfs("full", 64 << 10);
    let path = disk.file("data");
    let pages = 256;
    std::fs::File::create(&path)
        .unwrap()
        .set_len((pages * PAGE_SIZE) as u64)
        .unwrap();
    let opts = RegionOptions::new(
        Backing::File {
            path: path.clone(),
            writable: true,
        },
        16 * PAGE_SIZE,
        "fifo",
    );
    let region = Region::map(opts).unwrap();
    fill(&region, pages, 0x5a);
    let s = region.stats();
    assert!(s.writeback_errors > 0, "{s:?}");
    assert!(s.unwritten_pages > 0, "{s:?}");
    // Nothing was dropped: every page still reads what was written.
    assert_eq!(check(&region, pages, 0x5a), 0);
    match region.flush() {
        Err(FlushError::WriteBack { pages: failed }) => {
            assert!(!failed.is_empty());
            assert!(
                failed.iter().all(|f| f.errno == libc_enospc()),
                "{failed:?}"
            );
        }
        other => panic!("flush to a full disk must fail, got {other:?}"),
    }
    assert_eq!(check(&region, pages, 0x5a), 0);
    // Unmapping must not drop the data either: try_unmap hands the region back.
    let (region, e) = region
        .try_unmap()
        .expect_err("unmap must report the failure");
    assert!(matches!(e, FlushError::WriteBack { .. }));
    // Make room: now everything is written back.
    disk.resize(4 << 20);
    region.flush().unwrap();
    assert_eq!(region.stats().unwritten_pages, 0);
    region.unmap().unwrap();
    let back = std::fs::read(&path).unwrap();
    for p in 0..pages {
        assert_eq!(back[p * PAGE_SIZE + 5], p as u8 ^ 0x5a, "page {p}");
    }
}

fn libc_enospc() -> i32 {
    28
}

#[test]
fn test_anonymous_region_with_full_swap_keeps_its_data() {
    let disk = Scratch::tmpfs("swapfull", 64 << 10);
    let pages = 256;
    let opts = RegionOptions::new(
        Backing::Anonymous {
            len: pages * PAGE_SIZE,
        },
        16 * PAGE_SIZE,
        "clock",
    )
    .with_swap_dir(&disk.path);
    let region = Region::map(opts).unwrap();
    fill(&region, pages, 0x33);
    assert_eq!(check(&region, pages, 0x33), 0);
    fill(&region, pages, 0x44);
    assert_eq!(check(&region, pages, 0x44), 0);
    let s = region.stats();
    assert!(s.writeback_errors > 0 && s.over_budget > 0, "{s:?}");
    region.unmap().unwrap();
}

/// Names a victim that is never valid: a page out of range, the incoming
/// page, or a page that is not resident.
struct Liar {
    fifo: SlotList,
    turn: u32,
}

impl Policy for Liar {
    fn name(&self) -> String {
        "liar".into()
    }
    fn on_fault(&mut self, f: Fault, _m: &mut dyn Memory) {
        if f.kind == FaultKind::Missing {
            self.fifo.push_back(f.page.slot);
        }
    }
    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.turn += 1;
        match self.turn % 3 {
            0 => Some(Page {
                slot: 1 << 30,
                vpn: 1 << 30,
            }),
            1 => Some(incoming),
            _ => (0..mem.slots() as u32)
                .find(|&s| !mem.is_resident(s) && s != incoming.slot)
                .map(|s| mem.page(s)),
        }
    }
    fn on_evict(&mut self, page: Page, _m: &mut dyn Memory) {
        self.fifo.remove(page.slot);
    }
}

#[test]
fn test_policy_naming_invalid_victims_is_overruled() {
    let d = Scratch::new("liar");
    let path = d.file("data");
    let data = random_file(&path, 64 * PAGE_SIZE, 3);
    let opts = RegionOptions::new(
        Backing::File {
            path,
            writable: false,
        },
        8 * PAGE_SIZE,
        "unused",
    );
    let liar = Liar {
        fifo: SlotList::new(),
        turn: 0,
    };
    let region = Region::map_with_policy(opts, Box::new(liar)).unwrap();
    for round in 0..4 {
        for p in 0..64 {
            let off = p * PAGE_SIZE + round * 7;
            // SAFETY: inside the region.
            let got = unsafe { region.as_ptr().add(off).read_volatile() };
            assert_eq!(got, data[off]);
        }
    }
    let s = region.stats();
    assert!(s.overruled >= s.evictions && s.evictions > 100, "{s:?}");
    assert!(s.frames_in_use <= 8, "{s:?}");
    assert_eq!(s.policy, "liar");
    region.unmap().unwrap();
}

/// Panics on its 50th victim choice.
struct Crasher {
    fifo: SlotList,
    calls: u32,
}

impl Policy for Crasher {
    fn name(&self) -> String {
        "crasher".into()
    }
    fn on_fault(&mut self, f: Fault, _m: &mut dyn Memory) {
        if f.kind == FaultKind::Missing {
            self.fifo.push_back(f.page.slot);
        }
    }
    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.calls += 1;
        assert!(self.calls < 50, "deliberate failure");
        self.fifo.front().map(|s| mem.page(s))
    }
    fn on_evict(&mut self, page: Page, _m: &mut dyn Memory) {
        self.fifo.remove(page.slot);
    }
}

#[test]
fn test_panicking_policy_is_retired_and_faults_still_served() {
    let len = 64 * PAGE_SIZE;
    let opts = RegionOptions::new(Backing::Anonymous { len }, 8 * PAGE_SIZE, "unused");
    let crasher = Crasher {
        fifo: SlotList::new(),
        calls: 0,
    };
    let region = Region::map_with_policy(opts, Box::new(crasher)).unwrap();
    fill(&region, 64, 0x21);
    assert_eq!(check(&region, 64, 0x21), 0);
    let s = region.stats();
    assert!(s.evictions > 50 && s.frames_in_use <= 8, "{s:?}");
    assert!(
        s.incidents
            .iter()
            .any(|i| i.contains("crasher") && i.contains("panicked")),
        "{s:?}"
    );
    region.unmap().unwrap();
}
