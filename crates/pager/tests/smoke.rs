//! Quick checks of the fault path on real userfaultfd.

use std::io::Write;

use pagepilot_pager::{Region, PAGE_SIZE};

fn file_with(pages: usize) -> (tempdir::Dir, std::path::PathBuf) {
    let d = tempdir::Dir::new();
    let p = d.0.join("data");
    let mut f = std::fs::File::create(&p).unwrap();
    for i in 0..pages {
        f.write_all(&vec![(i % 251) as u8; PAGE_SIZE]).unwrap();
    }
    (d, p)
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "pagepilot-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn test_file_region_reads_file_contents_under_budget() {
    let (_d, p) = file_with(64);
    let r = Region::map_file(&p, false, 8 * PAGE_SIZE, "clock").unwrap();
    for round in 0..3 {
        for i in 0..64 {
            // SAFETY: inside the region.
            let b = unsafe { *r.as_ptr().add(i * PAGE_SIZE + round) };
            assert_eq!(b, (i % 251) as u8, "page {i}");
        }
    }
    let s = r.stats();
    assert!(s.frames_in_use <= 8, "{s:?}");
    assert!(s.missing_faults >= 64 * 3, "{s:?}");
    assert!(r.allocated_bytes() <= 8 * PAGE_SIZE as u64);
    r.unmap().unwrap();
}

#[test]
fn test_anon_region_keeps_writes_through_eviction() {
    let r = Region::map_anon(64 * PAGE_SIZE, 8 * PAGE_SIZE, "fifo").unwrap();
    let base = r.as_ptr();
    for i in 0..64 {
        // SAFETY: inside the region.
        unsafe { *base.add(i * PAGE_SIZE + 7) = i as u8 + 1 };
    }
    for i in 0..64 {
        // SAFETY: inside the region.
        let (a, b) = unsafe { (*base.add(i * PAGE_SIZE + 7), *base.add(i * PAGE_SIZE + 8)) };
        assert_eq!((a, b), (i as u8 + 1, 0));
    }
    let s = r.stats();
    assert!(s.evictions > 0 && s.writebacks > 0, "{s:?}");
    println!("{}", r.stats_json());
    r.unmap().unwrap();
}

#[test]
fn test_shrinking_the_budget_reclaims_frames_and_keeps_data() {
    let mut r = Region::map_anon(64 * PAGE_SIZE, 32 * PAGE_SIZE, "clock").unwrap();
    for i in 0..32 {
        // SAFETY: inside the region.
        unsafe { *r.as_ptr().add(i * PAGE_SIZE) = i as u8 + 1 };
    }
    assert_eq!(r.stats().frames_in_use, 32);
    r.set_budget(8 * PAGE_SIZE).unwrap();
    let s = r.stats();
    assert_eq!((s.frames_in_use, s.budget_frames), (8, 8), "{s:?}");
    assert!(r.allocated_bytes() <= 8 * PAGE_SIZE as u64);
    for i in 0..32 {
        // SAFETY: inside the region.
        assert_eq!(unsafe { *r.as_ptr().add(i * PAGE_SIZE) }, i as u8 + 1);
    }
    r.set_budget(64 * PAGE_SIZE).unwrap();
    assert_eq!(r.stats().budget_frames, 64);
    r.unmap().unwrap();
}

#[test]
fn test_region_can_be_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Region>();
    shareable::<pagepilot_pager::RegionStats>();
}

#[test]
fn test_kernel_writes_into_region_memory_are_served_by_handler_threads() {
    use std::io::Read;
    let (_d, p) = file_with(8);
    let r = Region::map_anon(64 * PAGE_SIZE, 8 * PAGE_SIZE, "clock").unwrap();
    // SAFETY: the region is mapped for 64 pages; nothing else uses it.
    let dst = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), 8 * PAGE_SIZE) };
    // read(2) copies into absent region pages from kernel mode: the faults
    // are raised and served like the application's own.
    std::fs::File::open(&p).unwrap().read_exact(dst).unwrap();
    for i in 0..8 {
        assert_eq!(dst[i * PAGE_SIZE + 100], (i % 251) as u8);
    }
    r.unmap().unwrap();
}

#[test]
fn test_kernel_writes_into_unmapped_pages_fail_in_faulting_thread_mode() {
    use pagepilot_pager::{Backing, FaultService, RegionOptions};
    use std::io::Read;
    let (_d, p) = file_with(1);
    let opts = RegionOptions::new(Backing::Anonymous { len: PAGE_SIZE }, PAGE_SIZE, "clock")
        .with_fault_service(FaultService::FaultingThread);
    let r = Region::map(opts).unwrap();
    // SAFETY: the region is mapped for one page; nothing else uses it.
    let dst = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), PAGE_SIZE) };
    // The documented limit of serving faults in the faulting thread: the
    // kernel's own access to an absent page gets EFAULT, not a SIGBUS.
    let err = std::fs::File::open(&p).unwrap().read(dst).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(14), "{err}");
    // Touching the page first from user space makes it work.
    dst[0] = 1;
    std::fs::File::open(&p).unwrap().read_exact(dst).unwrap();
    assert_eq!(dst[0], 0, "the read overwrote the byte written before it");
    r.unmap().unwrap();
}

#[test]
fn test_prefault_lets_the_kernel_write_into_faulting_thread_regions() {
    use pagepilot_pager::{Backing, FaultService, PrefaultError, RegionOptions};
    use std::io::Read;
    let (_d, p) = file_with(4);
    let len = 4 * PAGE_SIZE;
    let opts = RegionOptions::new(Backing::Anonymous { len }, len, "clock")
        .with_fault_service(FaultService::FaultingThread);
    let r = Region::map(opts).unwrap();
    // SAFETY: the region is mapped for `len` bytes; nothing else uses it.
    let dst = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), len) };
    // A read(2) into the unmapped range fails (the documented limit)...
    let err = std::fs::File::open(&p).unwrap().read(dst).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(14), "{err}");
    // ...and succeeds once the range is prefaulted for writing.
    r.prefault(0, len, true).unwrap();
    std::fs::File::open(&p).unwrap().read_exact(dst).unwrap();
    for i in 0..4 {
        assert_eq!(dst[i * PAGE_SIZE + 100], (i % 251) as u8);
    }
    // One missing fault per page, served in this thread; a read prefault of
    // mapped pages raises none.
    r.prefault(PAGE_SIZE + 1, 2 * PAGE_SIZE, false).unwrap();
    assert_eq!(r.stats().missing_faults, 4);
    assert_eq!(
        r.prefault(len - 1, 2, false),
        Err(PrefaultError::OutOfRange {
            offset: len - 1,
            len: 2,
            region_len: len
        })
    );
    assert!(r.prefault(usize::MAX, 2, true).is_err());
    r.unmap().unwrap();
}

/// A region mapped with no option but its budget and policy is served by
/// one handler thread per CPU the mapping thread may run on (up to four),
/// and the kernel's own accesses to it are served too (a `read(2)` into
/// absent pages, without `Region::prefault`).
#[test]
fn test_defaults_serve_faults_with_a_handler_per_cpu() {
    use std::io::Read;
    let (_d, p) = file_with(8);
    let r = Region::map_anon(64 * PAGE_SIZE, 8 * PAGE_SIZE, "clock").unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get().min(4);
    assert_eq!(r.stats().handler_threads, cpus as u64);
    // SAFETY: the region is mapped for 64 pages; nothing else uses it.
    let dst = unsafe { std::slice::from_raw_parts_mut(r.as_ptr(), 8 * PAGE_SIZE) };
    std::fs::File::open(&p).unwrap().read_exact(dst).unwrap();
    assert_eq!(dst[5 * PAGE_SIZE + 100], 5);
    r.unmap().unwrap();
}
