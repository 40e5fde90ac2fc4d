//! Regions sharing one frame pool (HiPEC's global frame manager, live):
//! concurrent faults in several regions lose nothing, also while their
//! frames are reclaimed and requested back all the time; a policy's `Request`
//! beyond the pool is granted partially; a newcomer's minimum is reclaimed
//! from the region first allocated, whose dirty pages reach its file; a
//! minimum the pool cannot hold is refused.

mod common;

use common::*;
use pagepilot_pager::policy::{builtin::Clock, Fault, Memory, Page, Policy};
use pagepilot_pager::{Backing, MapError, Pool, Region, RegionOptions, PAGE_SIZE};

#[test]
fn test_two_regions_faulting_at_once_in_a_pool_a_quarter_their_size_keep_every_byte() {
    let len = 2048 * PAGE_SIZE;
    // Each region's minimum is a quarter of it (hammer_file_region's budget):
    // the pool holds exactly both, a quarter of the two regions.
    let pool = Pool::new(2 * len / 4).unwrap();
    let outcomes: Vec<HammerOutcome> = std::thread::scope(|s| {
        let runs: Vec<_> = [("pool-a", 21), ("pool-b", 22)]
            .into_iter()
            .map(|(tag, seed)| {
                let pool = &pool;
                s.spawn(move || {
                    hammer_file_region(tag, seed, len, "clock", 2, 200_000, |o| o.with_pool(pool))
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for out in &outcomes {
        assert!(out.stats.evictions > 500, "{:?}", out.stats);
        assert!(
            out.allocated_bytes <= (len / 4) as u64,
            "{}",
            out.allocated_bytes
        );
    }
    // Both left the pool: every frame is free again.
    let stats = pool.stats();
    assert_eq!(stats.free_frames, stats.total_frames, "{stats:?}");
}

/// FIFO that asks the pool for 4 more frames at every fault: with a small
/// `partition_burst`, frames go back and forth between the regions all the
/// time.
const REQUESTS_AT_EACH_FAULT: &str = "
queue loaded;
int got;
event PageFault() {
    got = request(4);
    if (free == 0) { victim = fifo(loaded); }
    enqueue(loaded, fault);
}
event ReclaimFrame() {
    victim = fifo(loaded);
}
";

#[test]
fn test_regions_whose_frames_are_reclaimed_while_they_fault_at_once_keep_every_byte() {
    let len = 2048 * PAGE_SIZE;
    let dir = Scratch::new("pool-churn");
    let program = dir.file("requests.hp");
    std::fs::write(&program, REQUESTS_AT_EACH_FAULT).unwrap();
    let program = program.to_str().unwrap();
    // A quarter of the two regions, each guaranteed an eighth of that, at
    // most 128 frames above the minimums: every request past the watermark
    // takes frames back from the region first allocated, while it faults.
    let pool = Pool::new(2 * len / 4)
        .unwrap()
        .with_partition_burst(128 * PAGE_SIZE);
    std::thread::scope(|s| {
        let runs: Vec<_> = [("churn-a", 31), ("churn-b", 32)]
            .into_iter()
            .map(|(tag, seed)| {
                let pool = &pool;
                s.spawn(move || {
                    // Enough operations to touch more pages than the whole
                    // pool holds (about 1,700 of 2,048; 100,000 touched
                    // 902 in one run), so that a region always evicts, and
                    // writes back, whatever frames it was granted.
                    hammer_file_region(tag, seed, len, program, 2, 300_000, |o| {
                        o.with_pool(pool).with_min_frames(128)
                    })
                })
            })
            .collect();
        for r in runs {
            let s = r.join().unwrap().stats;
            // Frames went back while the region faulted, normally or by
            // force (a FIFO head still being read is no victim).
            assert!(s.pool_reclaimed_frames > 100, "{s:?}");
            assert!(s.writebacks > 0, "{s:?}");
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.free_frames, stats.total_frames, "{stats:?}");
}

/// CLOCK that asks the pool for `want` more frames at its first fault.
struct Greedy {
    clock: Clock,
    want: usize,
}

impl Policy for Greedy {
    fn name(&self) -> String {
        "greedy-clock".into()
    }
    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        if self.want > 0 {
            mem.request_frames(std::mem::take(&mut self.want));
        }
        self.clock.on_fault(fault, mem);
    }
    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.clock.victim(incoming, mem)
    }
    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        self.clock.on_evict(page, mem);
    }
}

#[test]
fn test_a_request_is_granted_partially_and_a_newcomer_is_paid_by_the_first_allocated() {
    let pages = 1024;
    let dir = Scratch::new("pool-request");
    let path = dir.file("a");
    let data = random_file(&path, pages * PAGE_SIZE, 5);
    // 256 frames, no partition_burst to speak of: A's minimum 64, it asks
    // for 1000 more (960 as it has 1024 pages) and gets the 192 free.
    let pool = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_partition_burst(256 * PAGE_SIZE);
    let backing = Backing::File {
        path: path.clone(),
        writable: true,
    };
    let opts = RegionOptions::new(backing, 64 * PAGE_SIZE, "clock").with_pool(&pool);
    let greedy = Greedy {
        clock: Clock::new(),
        want: 1000,
    };
    let a = Region::map_with_policy(opts, Box::new(greedy)).unwrap();
    // Dirty 200 pages: they fit in A's 256 frames, nothing is written yet.
    for p in 0..200 {
        // SAFETY: inside region A.
        unsafe {
            a.as_ptr()
                .add(p * PAGE_SIZE)
                .write_volatile(!data[p * PAGE_SIZE])
        };
    }
    let s = a.stats();
    assert_eq!(s.budget_frames, 256, "{s:?}");
    assert_eq!(s.evictions, 0, "{s:?}");
    let holder = &pool.stats().holders[0];
    assert_eq!((holder.requested, holder.granted), (960, 192));

    // B needs 128 frames as its minimum: 128 of A's above its minimum come
    // back, A's dirty pages written to its file first.
    let b = Region::map(
        RegionOptions::new(
            Backing::Anonymous {
                len: 256 * PAGE_SIZE,
            },
            128 * PAGE_SIZE,
            "clock",
        )
        .with_pool(&pool),
    )
    .unwrap();
    eventually("A gives 128 frames back", || a.stats().budget_frames == 128);
    eventually("B holds its minimum", || b.stats().budget_frames == 128);
    // The reclaimer shrinks A's budget, then writes its victims back and
    // tells the pool.
    eventually("A's victims written and its return counted", || {
        a.stats().writebacks >= 72 && pool.stats().holders[0].reclaimed >= 128
    });
    let a_stats = a.stats();
    assert!(a_stats.writebacks >= 72, "{a_stats:?}");
    assert_eq!(pool.stats().holders[0].reclaimed, 128);
    // The evicted pages' bytes are in the file while A is still mapped.
    let written = dirty_in_file(&path, &data, 200);
    assert!(written >= 72, "{written} of A's dirty pages in the file");
    a.unmap().unwrap();
    b.unmap().unwrap();
}

#[test]
fn test_a_minimum_the_pool_cannot_hold_is_refused_naming_the_pool() {
    let pool = Pool::new(100 * PAGE_SIZE).unwrap();
    let _a = Region::map(
        RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 60 * PAGE_SIZE, "clock")
            .with_pool(&pool),
    )
    .unwrap();
    let refused = Region::map(
        RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 41 * PAGE_SIZE, "clock")
            .with_pool(&pool),
    )
    .unwrap_err();
    assert!(matches!(refused, MapError::Pool(_)), "{refused}");
    let text = refused.to_string();
    assert!(
        text.contains("minFrame of 41 frames does not fit") && text.contains("100 frames"),
        "{text}"
    );
    assert!(Pool::new(100).is_err());
}

/// A file region of `pages` pages whose policy asks for `want` frames more
/// than its minimum of `min` at its first fault, touched once.
fn greedy_region(pool: &Pool, dir: &Scratch, name: &str, min: usize, want: usize) -> Region {
    let path = dir.file(name);
    random_file(&path, 1024 * PAGE_SIZE, 9);
    let backing = Backing::File {
        path,
        writable: false,
    };
    let opts = RegionOptions::new(backing, min * PAGE_SIZE, "clock").with_pool(pool);
    let greedy = Greedy {
        clock: Clock::new(),
        want,
    };
    let region = Region::map_with_policy(opts, Box::new(greedy)).unwrap();
    // SAFETY: inside the region.
    unsafe { region.as_ptr().read_volatile() };
    region
}

#[test]
fn test_passing_partition_burst_takes_the_excess_back_from_the_first_allocated_first() {
    let dir = Scratch::new("pool-burst");
    // 256 frames, at most 64 of them held above the regions' minimums.
    let pool = Pool::new(256 * PAGE_SIZE)
        .unwrap()
        .with_partition_burst(64 * PAGE_SIZE);
    let a = greedy_region(&pool, &dir, "a", 32, 100);
    // A holds 132, 100 above its minimum: 36 of them go back.
    eventually("A back to the watermark", || a.stats().budget_frames == 96);
    let b = greedy_region(&pool, &dir, "b", 32, 100);
    // B's 100 more pass the watermark by 100: A, first allocated, gives its
    // 64 above its minimum, then B 36.
    eventually("A down to its minimum", || a.stats().budget_frames == 32);
    eventually("B at the watermark", || b.stats().budget_frames == 96);
    // The reclaimer shrinks a region's budget, then tells the pool: wait
    // for the pool's count too before reading it.
    eventually("both returns counted", || {
        pool.stats()
            .holders
            .iter()
            .map(|h| h.reclaimed)
            .sum::<u64>()
            >= 136
    });
    let holders = pool.stats().holders;
    assert_eq!((holders[0].reclaimed, holders[1].reclaimed), (100, 36));
    assert_eq!((holders[0].forced, holders[1].forced), (0, 0));
}

/// A random read in a region whose pool grants it far fewer frames than
/// its budget is served, and reads its page: read-around is sized from the
/// budget (clusters of 32 pages here), but a cluster read into 16 frames
/// goes no further than 8 pages, and it used to start up to 31 pages
/// before the faulting page, end before it, and answer the fault with
/// SIGBUS as if the page lay beyond the file's end (issue 30, a contended
/// pool killing its program).
#[test]
fn test_a_region_granted_far_less_than_its_budget_serves_random_reads_around_them() {
    let dir = Scratch::new("pool-small-grant");
    let path = dir.file("data");
    let pages = 1024;
    let data = random_file(&path, pages * PAGE_SIZE, 13);
    // The pool holds the region's minimum only: its budget of 1024 frames
    // stays 16.
    let pool = Pool::new(16 * PAGE_SIZE).unwrap();
    let backing = Backing::File {
        path,
        writable: false,
    };
    let opts = RegionOptions::new(backing, pages * PAGE_SIZE, "clock")
        .with_pool(&pool)
        .with_min_frames(16);
    let region = Region::map(opts).unwrap();
    assert_eq!(region.stats().budget_frames, 16);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % (pages * PAGE_SIZE) as u64) as usize;
        // SAFETY: inside the region.
        let got = unsafe { region.as_ptr().add(at).read_volatile() };
        assert_eq!(got, data[at], "byte {at} (page {})", at / PAGE_SIZE);
    }
    let s = region.stats();
    assert_eq!(s.signalled_faults, 0, "{s:?}");
    assert!(s.evictions > 0 && s.readahead_pages > 0, "{s:?}");
    region.unmap().unwrap();
}
