//! A frame pool's minimums and reclamation, live: a region is guaranteed
//! its `min_frames` and starts with its budget as far as free frames allow;
//! a region whose policy program gives nothing back when asked is
//! reclaimed by force at the deadline, the incident reported in the pool's
//! and the region's statistics, nothing lost; a minimum above the budget is
//! refused naming both.

mod common;

use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, MapError, Pool, Region, RegionOptions, PAGE_SIZE};

fn anon(pages: usize, budget: usize, pool: &Pool) -> RegionOptions {
    let backing = Backing::Anonymous {
        len: pages * PAGE_SIZE,
    };
    RegionOptions::new(backing, budget * PAGE_SIZE, "clock").with_pool(pool)
}

#[test]
fn test_a_region_is_guaranteed_its_min_frames_and_starts_with_its_budget_while_frames_are_free() {
    // 256 frames, no partition_burst to speak of.
    let pool = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_partition_burst(256 * PAGE_SIZE);
    // A: minimum 50, budget 200: the 150 above are free, it starts with 200.
    let a = Region::map(anon(512, 200, &pool).with_min_frames(50)).unwrap();
    assert_eq!(a.stats().budget_frames, 200);
    let h = &pool.stats().holders[0];
    assert_eq!((h.min, h.held, h.requested, h.granted), (50, 200, 150, 150));
    // B: minimum 100 (its budget): 56 free, 44 reclaimed from A's frames
    // above its minimum.
    let b = Region::map(anon(512, 100, &pool)).unwrap();
    eventually("B holds its minimum", || b.stats().budget_frames == 100);
    eventually("A gave 44 back", || {
        let s = a.stats();
        s.budget_frames == 156 && s.pool_reclaimed_frames >= 44
    });
    assert_eq!(a.stats().pool_reclaimed_frames, 44);
    // C: minimum 6 of a budget of 50, no frame free: it starts with its
    // minimum only (taken from A), its request above it granted nothing.
    let c = Region::map(anon(512, 50, &pool).with_min_frames(6)).unwrap();
    eventually("C holds its minimum", || c.stats().budget_frames == 6);
    let h = &pool.stats().holders[2];
    assert_eq!((h.min, h.held, h.granted), (6, 6, 0));
    // D: a minimum of 107 does not fit beside 50 + 100 + 6 of 256.
    let refused = Region::map(anon(512, 200, &pool).with_min_frames(107)).unwrap_err();
    assert!(matches!(refused, MapError::Pool(_)), "{refused}");
    assert!(refused.to_string().contains("minFrame of 107"), "{refused}");
    // Every page written through the three regions reads back.
    for (k, r) in [&a, &b, &c].into_iter().enumerate() {
        for p in 0..512 {
            // SAFETY: inside the region.
            unsafe { r.as_ptr().add(p * PAGE_SIZE).write_volatile((p + k) as u8) };
        }
    }
    for (k, r) in [&a, &b, &c].into_iter().enumerate() {
        for p in 0..512 {
            // SAFETY: inside the region.
            let got = unsafe { r.as_ptr().add(p * PAGE_SIZE).read_volatile() };
            assert_eq!(got, (p + k) as u8, "region {k} page {p}");
        }
    }
    let total: usize = pool.stats().holders.iter().map(|h| h.held).sum();
    assert!(total <= 256, "{total}");
}

#[test]
fn test_a_region_starting_above_partition_burst_gives_the_excess_back_as_soon_as_it_is_mapped() {
    // 256 frames, partition_burst half of them: A starts with 150 above
    // its minimum of 50, 22 past the watermark, asked back from A itself
    // (the only region above its minimum) while it is being mapped.
    let pool = Pool::new(256 * PAGE_SIZE).unwrap();
    let a = Region::map(anon(512, 200, &pool).with_min_frames(50)).unwrap();
    eventually("A back at the watermark, the pool told", || {
        a.stats().budget_frames == 178
            && a.stats().pool_reclaimed_frames >= 22
            && pool.stats().holders[0].reclaimed >= 22
    });
    let s = a.stats();
    assert_eq!(
        (s.pool_reclaimed_frames, s.forced_reclaims),
        (22, 0),
        "{s:?}"
    );
    let h = &pool.stats().holders[0];
    assert_eq!((h.held, h.reclaimed), (178, 22));
    for p in 0..512 {
        // SAFETY: inside region A.
        unsafe { a.as_ptr().add(p * PAGE_SIZE).write_volatile(p as u8) };
    }
    for p in 0..512 {
        // SAFETY: inside region A.
        let got = unsafe { a.as_ptr().add(p * PAGE_SIZE).read_volatile() };
        assert_eq!(got, p as u8);
    }
    assert!(a.stats().frames_in_use <= 178);
}

#[test]
fn test_min_frames_above_the_budget_or_without_a_pool_is_refused_naming_both() {
    let pool = Pool::new(256 * PAGE_SIZE).unwrap();
    let err = Region::map(anon(64, 20, &pool).with_min_frames(21)).unwrap_err();
    assert!(
        matches!(
            err,
            MapError::MinAboveBudget {
                min_frames: 21,
                budget_frames: 20
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("min_frames of 21") && text.contains("budget of 20"),
        "{text}"
    );
    let alone = RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 1 << 20, "clock")
        .with_min_frames(4);
    let err = Region::map(alone).unwrap_err();
    assert!(
        matches!(
            err,
            MapError::BadOption {
                name: "min_frames",
                ..
            }
        ),
        "{err}"
    );
    // Nothing joined the pool.
    assert!(pool.stats().holders.is_empty());
}

/// Dirties pages `0..n` of `region`: byte 0 of page `p` becomes `!data`'s.
fn dirty(region: &Region, data: &[u8], n: usize) {
    for p in 0..n {
        // SAFETY: inside the region.
        unsafe {
            region
                .as_ptr()
                .add(p * PAGE_SIZE)
                .write_volatile(!data[p * PAGE_SIZE])
        };
    }
}

#[test]
fn test_a_program_that_gives_nothing_back_is_reclaimed_by_force_reported_and_loses_nothing() {
    let dir = Scratch::new("pool-forced");
    let program = dir.file("keeps.hp");
    std::fs::write(&program, KEEPS_EVERYTHING).unwrap();
    let path = dir.file("a");
    let pages = 256;
    let data = random_file(&path, pages * PAGE_SIZE, 17);
    let pool = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_partition_burst(256 * PAGE_SIZE)
        .with_deadline(Duration::from_millis(20));
    let backing = Backing::File {
        path: path.clone(),
        writable: true,
    };
    // A: minimum 50, starts with 200; 200 pages dirtied fill them.
    let opts = RegionOptions::new(backing, 200 * PAGE_SIZE, program.to_str().unwrap())
        .with_pool(&pool)
        .with_min_frames(50)
        .with_fault_around(1)
        .with_readahead(1);
    let a = Region::map(opts).unwrap();
    dirty(&a, &data, 200);
    let s = a.stats();
    assert_eq!((s.budget_frames, s.evictions), (200, 0), "{s:?}");
    // B's minimum of 150 needs 94 of A's frames. A's ReclaimFrame names
    // none: at the deadline they are taken by force.
    let b = Region::map(anon(256, 150, &pool)).unwrap();
    eventually("B holds its minimum", || b.stats().budget_frames == 150);
    eventually("A down to 106, its victims written", || {
        let s = a.stats();
        s.budget_frames == 106 && s.writebacks >= 94 && s.forced_reclaims >= 1
    });
    let s = a.stats();
    assert_eq!(
        (
            s.pool_reclaimed_frames,
            s.forced_reclaim_frames,
            s.forced_reclaims
        ),
        (0, 94, 1),
        "{s:?}"
    );
    assert_eq!(s.writebacks, 94, "{s:?}");
    let h = &pool.stats().holders[0];
    assert_eq!((h.held, h.forced, h.forced_incidents), (106, 94, 1));
    assert!(pool.stats_json().contains("\"forced_incidents\":1"));
    // The 94 dirty pages taken are in the file while A is still mapped.
    assert_eq!(dirty_in_file(&path, &data, 200), 94);
    // And A still reads every byte it wrote, and the file's others.
    for p in 0..pages {
        // SAFETY: inside region A.
        let got = unsafe { a.as_ptr().add(p * PAGE_SIZE).read_volatile() };
        let want = if p < 200 {
            !data[p * PAGE_SIZE]
        } else {
            data[p * PAGE_SIZE]
        };
        assert_eq!(got, want, "page {p}");
    }
    a.unmap().unwrap();
    assert_eq!(dirty_in_file(&path, &data, 200), 200);
    b.unmap().unwrap();
}
