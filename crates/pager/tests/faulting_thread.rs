//! The faulting-thread service's region table: regions are found without a
//! lock in a fixed table; one more than it holds is refused with a typed
//! error, and a slot freed by unmapping is used again. Its own test binary:
//! other tests' regions would take slots.

use pagepilot_pager::{Backing, FaultService, MapError, Region, RegionOptions, PAGE_SIZE};

/// The tests share the process-wide table: one at a time.
static TABLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn faulting_thread_region() -> Result<Region, MapError> {
    let len = 2 * PAGE_SIZE;
    Region::map(
        RegionOptions::new(Backing::Anonymous { len }, len, "fifo")
            .with_fault_service(FaultService::FaultingThread),
    )
}

fn touch_and_check(r: &Region, salt: u8) {
    for p in 0..2 {
        // SAFETY: inside the region's two pages; only this thread uses it.
        unsafe {
            r.as_ptr()
                .add(p * PAGE_SIZE + 7)
                .write_volatile(salt ^ p as u8)
        };
    }
    for p in 0..2 {
        // SAFETY: as above.
        let v = unsafe { r.as_ptr().add(p * PAGE_SIZE + 7).read_volatile() };
        assert_eq!(v, salt ^ p as u8);
    }
}

#[test]
fn test_faulting_thread_regions_beyond_the_table_are_refused_and_slots_reused() {
    let _one = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let mut regions = Vec::new();
    let max = loop {
        match faulting_thread_region() {
            Ok(r) => regions.push(r),
            Err(MapError::FaultingThreadSlots { max }) => break max,
            Err(e) => panic!("unexpected error: {e}"),
        }
        assert!(regions.len() <= 4096, "no limit reached");
    };
    assert_eq!(regions.len(), max);
    // Every region's faults are served by its own entry in the table.
    for (i, r) in regions.iter().enumerate() {
        touch_and_check(r, i as u8);
    }
    // A freed slot is taken by the next region, whose faults are served.
    regions.swap_remove(max / 2).unmap().unwrap();
    let again = faulting_thread_region().expect("a slot was freed");
    touch_and_check(&again, 0x5a);
    assert_eq!(again.stats().missing_faults, 2);
    again.unmap().unwrap();
    for r in regions {
        r.unmap().unwrap();
    }
}

#[test]
fn test_regions_mapped_and_unmapped_concurrently_keep_their_faults_apart() {
    let _one = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    // Threads map, fault on and unmap their own regions while the others do
    // the same: every lookup in the lock-free table finds the right region
    // (a wrong one would serve the fault elsewhere, and the write would not
    // read back), and a region being unmapped is never used after it is freed.
    std::thread::scope(|s| {
        for t in 0..4u8 {
            s.spawn(move || {
                for i in 0..150u8 {
                    let r = faulting_thread_region().expect("4 regions at a time fit");
                    touch_and_check(&r, t.wrapping_mul(61) ^ i);
                    assert_eq!(r.stats().missing_faults, 2);
                    r.unmap().unwrap();
                }
            });
        }
    });
}
