//! Bad input to a frame pool, live: a policy program that requests frames
//! in a loop is stopped by its instruction budget, the pool never grants
//! beyond its frames, and the region keeps serving every byte; RAPHA's
//! admission control refuses a region's reserve that does not fit (Eq. 2),
//! accepted at the boundary; a reserve out of range, a reserve without a
//! fault limit and a fault unit of zero are refused naming them.

mod common;

use std::time::Duration;

use common::*;
use pagepilot_pager::frames::RateError;
use pagepilot_pager::{Backing, MapError, Pool, PoolError, Region, RegionOptions, PAGE_SIZE};

/// A FIFO program whose PageFault first asks the pool for frames forever.
const REQUESTS_IN_A_LOOP: &str = "
queue loaded;
int got;
event PageFault() {
    while (true) { got = request(1000000); }
    if (free == 0) { victim = fifo(loaded); }
    enqueue(loaded, fault);
}
event ReclaimFrame() {
    victim = fifo(loaded);
}
";

#[test]
fn test_a_program_requesting_frames_in_a_loop_is_stopped_and_the_pool_grants_no_more_than_it_has() {
    let dir = Scratch::new("pool-loop");
    let program = dir.file("greedy.hp");
    std::fs::write(&program, REQUESTS_IN_A_LOOP).unwrap();
    let pages = 1024;
    let path = dir.file("data");
    let data = random_file(&path, pages * PAGE_SIZE, 31);
    // 256 frames, partition_burst half of them (the default).
    let pool = Pool::new(256 * PAGE_SIZE).unwrap();
    let other = Region::map(
        RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 64 * PAGE_SIZE, "clock")
            .with_pool(&pool),
    )
    .unwrap();
    let backing = Backing::File {
        path,
        writable: false,
    };
    let opts = RegionOptions::new(backing, 32 * PAGE_SIZE, program.to_str().unwrap())
        .with_pool(&pool)
        .with_fault_around(1)
        .with_readahead(1);
    let greedy = Region::map(opts).unwrap();
    // Every page reads back, twice over, while the pool is watched.
    for round in 0..2 {
        for p in 0..pages {
            let p = (p * 7 + round) % pages;
            // SAFETY: inside the region.
            let got = unsafe { greedy.as_ptr().add(p * PAGE_SIZE + 9).read_volatile() };
            assert_eq!(got, data[p * PAGE_SIZE + 9], "page {p}");
            if p % 64 == 0 {
                let s = pool.stats();
                let held: usize = s.holders.iter().map(|h| h.held).sum();
                assert!(held + s.free_frames == 256, "{s:?}");
            }
        }
    }
    let s = greedy.stats();
    assert!(
        s.incidents
            .iter()
            .any(|i| i.contains("PageFault") && i.contains("instruction budget")),
        "{s:?}"
    );
    assert!(s.budget_frames as usize <= 256 - 64, "{s:?}");
    let holders = pool.stats().holders;
    // The loop asked for far more than the pool has; it got the free 160.
    assert!(holders[1].requested > 256, "{holders:?}");
    assert_eq!(holders[1].granted, 160, "{holders:?}");
    // The other region keeps its minimum and works.
    assert_eq!(holders[0].held, 64);
    for p in 0..256 {
        // SAFETY: inside the other region.
        unsafe { other.as_ptr().add(p * PAGE_SIZE).write_volatile(p as u8) };
    }
    for p in 0..256 {
        // SAFETY: inside the other region.
        let got = unsafe { other.as_ptr().add(p * PAGE_SIZE).read_volatile() };
        assert_eq!(got, p as u8);
    }
    greedy.unmap().unwrap();
    other.unmap().unwrap();
}

fn limited(pool: &Pool, reserve: f64, faults: u64) -> RegionOptions {
    RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 16 * PAGE_SIZE, "clock")
        .with_pool(pool)
        .with_reserve(reserve)
        .with_fault_limit(faults, Duration::from_millis(100))
}

#[test]
fn test_a_reserve_that_does_not_fit_is_refused_and_one_at_the_boundary_admitted() {
    // One fault takes 1 ms: the processor serves 100 per system period
    // (100 ms) when nothing is reserved (Eq. 4).
    let pool = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_fault_unit(Duration::from_millis(1))
        .unwrap();
    assert_eq!(pool.stats().system_fault_limit, 100);
    // A reserves 0.5, its 10 faults per period take 0.1 (Eq. 1, 2).
    let a = Region::map(limited(&pool, 0.5, 10)).unwrap();
    assert_eq!(pool.stats().system_fault_limit, 50);
    // B: 0.5 + 0.3 + 0.1 + 0.1 = 1: admitted at the boundary.
    let b = Region::map(limited(&pool, 0.3, 10)).unwrap();
    let s = pool.stats();
    assert_eq!(s.system_fault_limit, 20);
    assert!((s.reserved_pc - 0.8).abs() < 1e-9, "{s:?}");
    // C: one fault more per period passes 1: refused (Eq. 2).
    let err = Region::map(limited(&pool, 0.0, 1)).unwrap_err();
    assert!(
        matches!(
            err,
            MapError::FaultLimit(RateError::ReserveDoesNotFit { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("Eq. 2"), "{err}");
    // The refusal left nothing behind: B leaves, C fits.
    b.unmap().unwrap();
    let c = Region::map(limited(&pool, 0.0, 1)).unwrap();
    assert_eq!(pool.stats().system_fault_limit, 50);
    // Its region works, within its limit.
    // SAFETY: inside region C.
    unsafe { c.as_ptr().write_volatile(7) };
    // SAFETY: as above.
    assert_eq!(unsafe { c.as_ptr().read_volatile() }, 7);
    c.unmap().unwrap();
    a.unmap().unwrap();
}

#[test]
fn test_a_reserve_out_of_range_or_without_a_limit_and_a_zero_fault_unit_are_refused() {
    let pool = Pool::new(256 * PAGE_SIZE).unwrap();
    for bad in [-0.1, 1.5, f64::NAN] {
        let err = Region::map(limited(&pool, bad, 10)).unwrap_err();
        assert!(
            matches!(
                err,
                MapError::BadOption {
                    name: "reserve",
                    ..
                }
            ),
            "{bad}: {err}"
        );
    }
    let no_limit = RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 16 * PAGE_SIZE, "clock")
        .with_pool(&pool)
        .with_reserve(0.2);
    let err = Region::map(no_limit).unwrap_err();
    assert!(
        matches!(
            err,
            MapError::BadOption {
                name: "reserve",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("fault limit"), "{err}");
    let err = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_fault_unit(Duration::ZERO)
        .unwrap_err();
    assert!(
        matches!(err, PoolError::Rate(RateError::ZeroFaultUnit)),
        "{err}"
    );
    // Once a region has joined, the fault unit stays.
    let _r = Region::map(limited(&pool, 0.1, 10)).unwrap();
    let err = pool.with_fault_unit(Duration::from_millis(1)).unwrap_err();
    assert!(matches!(err, PoolError::InUse(_)), "{err}");
}
