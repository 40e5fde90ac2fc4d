//! Read-around for missing faults outside a sequence, sized by use: the
//! kernel's `mmap_miss` heuristic (mm/filemap.c), with what a user-space
//! pager can observe in place of the page cache's hits.
//!
//! The kernel reads 32 pages around a random fault on a file mapping and
//! counts, per file, faults that missed against cached pages mapped later;
//! once misses outnumber hits by `MMAP_LOTSAMISS` it reads single pages.
//! pagepilot maps a cluster's pages at once, so their later use raises no
//! fault; instead one page of each cluster, at its far end, is left
//! unmapped, a *probe*: its first touch is a minor fault, which says the
//! application reached the far end of the cluster while it was in memory,
//! and counts as a hit for the whole cluster.
//!
//! A fault counts as a miss only while the region's budget is full, i.e.
//! when the cluster's pages displace others, or will (a region larger than
//! its budget fills its free frames, then displaces: uniform random reads
//! of a file four times the budget read 1.15 pages per touch counted from
//! the first fault, 2.9 counted once the budget was full, and ran 0.86x
//! the tuned single pages' speed instead of 0.76x): read-around into free frames
//! costs no page of the resident set, and a uniformly random reading of a
//! file that fits in the budget (every page touched once, in any order)
//! uses every cluster in the end, but only in the end, too late for any
//! count of hits to show it. The kernel keeps reading around in that case
//! as well (the neighbours its fault-around maps count as hits). The price
//! is sparse reading under a large budget: one page in 64 touched still
//! reads clusters.

/// Net misses after which a random fault reads its page alone. The
/// kernel's `MMAP_LOTSAMISS` is 100, but it counts every fault; this count
/// runs only while clusters displace resident pages, where each unused one
/// costs a cluster's worth of the resident set: 16 (uniformly random reads
/// of a file four times the budget then read 1.2 pages per touch after
/// their first 3,000 touches, not 4-6).
const LOTS_OF_MISSES: u32 = 16;
/// Net misses below which clusters are read at their largest size.
const FEW_MISSES: u32 = 4;
/// Where the count starts: the usual size until a probe hit shows the
/// clusters used (starting at the largest, the device's 8 MiB, made a
/// sparse reading read the whole file, 64 pages per touch, and 30% slower,
/// for no gain on random readings of every page: `bench scan`, 2026-11-25).
const START: u32 = FEW_MISSES;
/// While reading single pages, every this many faults reads a cluster with
/// a probe anyway, so that a workload that starts using its neighbours
/// again is noticed (the kernel never looks again).
const EXPLORE_EVERY: u32 = 256;

/// One region's read-around state.
#[derive(Clone, Debug)]
pub struct ReadAround {
    /// Net misses: +1 per random fault that displaces pages, minus the
    /// usual cluster size per probe hit.
    misses: u32,
    /// Random faults since the last cluster read while reading single pages.
    since_cluster: u32,
    /// The usual cluster, pages (the kernel's 32).
    usual: usize,
    /// The largest cluster, pages, read while probes keep hitting.
    largest: usize,
}

/// The usual cluster: the kernel's (`read_ahead_kb` 128 on a disk).
const USUAL_PAGES: usize = 32;

impl ReadAround {
    /// The read-around of a region of `frames` frames whose sequences read
    /// windows of up to `window` pages, backed by a store whose device the
    /// kernel reads `device` pages around a fault of (its `read_ahead_kb`):
    /// clusters of the kernel's usual 32 pages, growing while they are used
    /// to the device's read-around (8 MiB on these machines) or a window,
    /// whichever is larger, within an eighth of the budget. An MRU-like
    /// policy (`mru_like`) keeps to its window: its windows are sized to
    /// what it can spare, and clusters take frames from the same set.
    /// `with_readahead(1)` turns both off.
    pub fn for_region(frames: usize, window: usize, device: Option<usize>, mru_like: bool) -> Self {
        let grown = if mru_like || window <= 1 {
            window
        } else {
            window.max(device.unwrap_or(0))
        };
        let largest = grown.min(frames / 8).max(1);
        ReadAround::new(USUAL_PAGES.min(largest), largest)
    }

    /// Clusters of `usual` pages, up to `largest` while they are used.
    pub fn new(usual: usize, largest: usize) -> Self {
        let usual = usual.max(1);
        ReadAround {
            misses: START,
            since_cluster: 0,
            usual,
            largest: largest.max(usual),
        }
    }

    /// A random missing fault, `displacing` pages of the resident set (the
    /// budget is full): how many pages to read around it (1: the page
    /// alone, no probe).
    pub fn on_fault(&mut self, displacing: bool) -> usize {
        let size = if self.misses < FEW_MISSES {
            self.largest
        } else if self.misses <= LOTS_OF_MISSES {
            self.usual
        } else {
            self.since_cluster += 1;
            if self.since_cluster < EXPLORE_EVERY {
                return 1;
            }
            self.since_cluster = 0;
            self.usual
        };
        // A miss until its probe says otherwise, if it displaces pages.
        if displacing {
            self.misses = (self.misses + 1).min(2 * LOTS_OF_MISSES);
        }
        size
    }

    /// The probe of a cluster was touched: the cluster was used. While
    /// single pages are read, a hit buys one more cluster, not the largest
    /// ones at once: random reads under a full budget touch a resident probe
    /// by chance now and then (one such hit brought 4 clusters of 128 pages
    /// and 12 of 32 back, 1.3 pages read per fault instead of 1.06,
    /// `tests/read_around.rs`), where a change of use hits that cluster's
    /// probe too.
    pub fn on_probe_hit(&mut self) {
        self.misses = if self.misses > LOTS_OF_MISSES {
            LOTS_OF_MISSES
        } else {
            self.misses.saturating_sub(self.usual as u32)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages read for `faults` random faults under a full budget when one
    /// probe in `used_one_in` is hit (0: none).
    fn read(r: &mut ReadAround, faults: usize, used_one_in: usize) -> usize {
        (0..faults)
            .map(|i| {
                let n = r.on_fault(true);
                if n > 1 && used_one_in > 0 && i % used_one_in == 0 {
                    r.on_probe_hit();
                }
                n
            })
            .sum()
    }

    #[test]
    fn test_clusters_grow_to_the_devices_read_around_within_the_budget() {
        assert_eq!(
            ReadAround::for_region(1 << 20, 128, Some(2048), false).largest,
            2048
        );
        assert_eq!(
            ReadAround::for_region(4096, 128, Some(2048), false).largest,
            512
        );
        assert_eq!(
            ReadAround::for_region(1 << 20, 128, None, false).largest,
            128
        );
        // MRU keeps to its window; read-ahead 1 turns read-around off.
        assert_eq!(
            ReadAround::for_region(1 << 20, 64, Some(2048), true).largest,
            64
        );
        let off = ReadAround::for_region(1 << 20, 1, Some(2048), false);
        assert_eq!((off.usual, off.largest), (1, 1));
    }

    #[test]
    fn test_used_clusters_grow_to_the_largest_size() {
        let mut r = ReadAround::new(32, 128);
        read(&mut r, 100, 1);
        assert_eq!(r.on_fault(true), 128);
    }

    #[test]
    fn test_clusters_into_free_frames_are_read_whatever_their_use() {
        let mut r = ReadAround::new(32, 128);
        for _ in 0..10_000 {
            assert!(r.on_fault(false) >= 32);
        }
    }

    #[test]
    fn test_unused_clusters_shrink_to_single_pages_and_are_explored_rarely() {
        let mut r = ReadAround::new(32, 128);
        let pages = read(&mut r, 10_000, 0);
        let clusters = (LOTS_OF_MISSES - START + 1) as usize + 10_000 / 256;
        assert!(pages <= 10_000 + clusters * 128, "{pages}");
        let next: Vec<usize> = (0..256).map(|_| r.on_fault(true)).collect();
        assert_eq!(next.iter().filter(|&&n| n > 1).count(), 1, "{next:?}");
    }

    #[test]
    fn test_clusters_used_one_time_in_sixteen_stay_on() {
        let mut r = ReadAround::new(32, 128);
        read(&mut r, 10_000, 16);
        assert!(r.on_fault(true) >= 32);
    }

    #[test]
    fn test_a_chance_hit_while_reading_single_pages_buys_one_cluster() {
        let mut r = ReadAround::new(32, 128);
        read(&mut r, 1000, 0);
        r.on_probe_hit();
        assert_eq!(r.on_fault(true), 32);
        assert_eq!(r.on_fault(true), 1);
    }

    #[test]
    fn test_clusters_come_back_when_the_application_uses_them_again() {
        let mut r = ReadAround::new(32, 128);
        read(&mut r, 1000, 0);
        let pages = read(&mut r, 2000, 1);
        assert!(pages > 2000 * 16, "{pages}");
    }
}
