//! RAPHA's fault limits, live: a region allowed so many missing faults per
//! period has the others wait for the next period (counted, with the delay
//! they added), its data intact; a region without a limit beside it is not
//! held back; a limit of zero is refused.

mod common;

use std::time::Duration;

use common::*;
use pagepilot_pager::{Backing, MapError, Region, RegionOptions, PAGE_SIZE};

/// Reads every page of a `pages`-page file region in a scattered order, one
/// page per fault, and checks each against the file.
fn read_scattered(opts: RegionOptions, data: &[u8], pages: usize) -> Region {
    let region = Region::map(opts.with_fault_around(1).with_readahead(1)).unwrap();
    for k in 0..pages {
        let p = (k * 97) % pages;
        // SAFETY: inside the region.
        let got = unsafe { region.as_ptr().add(p * PAGE_SIZE + 5).read_volatile() };
        assert_eq!(got, data[p * PAGE_SIZE + 5], "page {p}");
    }
    region
}

#[test]
fn test_faults_beyond_a_regions_limit_wait_for_the_next_period_and_others_do_not() {
    let pages = 300;
    let dir = Scratch::new("fault-limit");
    let path = dir.file("data");
    let data = random_file(&path, pages * PAGE_SIZE, 3);
    let backing = || Backing::File {
        path: path.clone(),
        writable: false,
    };
    // 300 faults at 50 per 10 ms: at least five periods of waiting.
    let limited = RegionOptions::new(backing(), pages * PAGE_SIZE, "clock")
        .with_fault_limit(50, Duration::from_millis(10));
    let region = read_scattered(limited, &data, pages);
    let s = region.stats();
    assert!(s.missing_faults >= pages as u64, "{s:?}");
    assert!(s.postponed_faults >= 5, "{s:?}");
    assert!(s.postponed_delay_us > 0, "{s:?}");
    region.unmap().unwrap();

    let free = RegionOptions::new(backing(), pages * PAGE_SIZE, "clock");
    let region = read_scattered(free, &data, pages);
    let s = region.stats();
    assert_eq!((s.postponed_faults, s.postponed_delay_us), (0, 0), "{s:?}");
    region.unmap().unwrap();
}

#[test]
fn test_a_fault_limit_of_zero_or_over_no_time_is_refused_naming_it() {
    for (faults, period) in [(0, Duration::from_millis(10)), (10, Duration::ZERO)] {
        let opts = RegionOptions::new(Backing::Anonymous { len: 1 << 20 }, 1 << 20, "clock")
            .with_fault_limit(faults, period);
        let err = Region::map(opts).unwrap_err();
        assert!(
            matches!(
                err,
                MapError::BadOption {
                    name: "fault_limit",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("must be positive"), "{err}");
    }
}
