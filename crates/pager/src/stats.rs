//! Per-region statistics: lock-free counters and a log-bucketed latency
//! histogram of fault service.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// Sub-buckets per power of two (2 bits: bucket bounds within 25%).
const SUB_BITS: u32 = 2;
/// Bucket 251 holds values up to u64::MAX.
const BUCKETS: usize = (62 << SUB_BITS) + (1 << SUB_BITS);

/// A histogram of durations in nanoseconds with buckets growing by 2^(1/4).
/// Recording is on every fault's path: one atomic increment (the count is
/// the buckets' sum), plus a second only when the maximum grows.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    if ns < (1 << SUB_BITS) {
        return ns as usize;
    }
    let log = 63 - ns.leading_zeros();
    let sub = (ns >> (log - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    (((log - SUB_BITS + 1) << SUB_BITS) as u64 + sub) as usize
}

/// The largest value that falls in bucket `b`.
fn upper_of(b: usize) -> u64 {
    if b < (1 << SUB_BITS) {
        return b as u64;
    }
    let log = (b >> SUB_BITS) as u32 + SUB_BITS - 1;
    let sub = (b & ((1 << SUB_BITS) - 1)) as u64;
    let base = 1u64 << log.min(63);
    let step = base >> SUB_BITS;
    base.saturating_add((sub + 1) * step - 1)
}

impl Histogram {
    /// Records one duration.
    pub fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns).min(BUCKETS - 1)].fetch_add(1, Relaxed);
        if ns > self.max.load(Relaxed) {
            self.max.fetch_max(ns, Relaxed);
        }
    }

    /// p50, p99, max and count (quantiles are bucket upper bounds, capped at max).
    pub fn summary(&self) -> LatencySummary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let max = self.max.load(Relaxed);
        let quantile = |q: f64| {
            if total == 0 {
                return 0;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (b, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return upper_of(b).min(max);
                }
            }
            max
        };
        LatencySummary {
            p50_ns: quantile(0.50),
            p99_ns: quantile(0.99),
            max_ns: max,
            count: total,
        }
    }
}

/// Fault-service latency: from reading the fault to waking the faulting thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    /// Median, nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile, nanoseconds.
    pub p99_ns: u64,
    /// Largest, nanoseconds.
    pub max_ns: u64,
    /// Faults measured.
    pub count: u64,
}

/// The live counters of one region.
#[derive(Default)]
pub struct Counters {
    pub(crate) missing_faults: AtomicU64,
    pub(crate) fault_events: AtomicU64,
    pub(crate) readahead_pages: AtomicU64,
    pub(crate) copied_in_pages: AtomicU64,
    pub(crate) probe_hits: AtomicU64,
    pub(crate) reads_in_flight: AtomicU64,
    pub(crate) reads_in_flight_max: AtomicU64,
    pub(crate) windows_ahead_max: AtomicU64,
    pub(crate) zero_around_pages: AtomicU64,
    pub(crate) minor_faults: AtomicU64,
    pub(crate) wp_faults: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) evictions_lost: AtomicU64,
    pub(crate) writebacks: AtomicU64,
    pub(crate) writeback_errors: AtomicU64,
    pub(crate) read_errors: AtomicU64,
    pub(crate) signalled_faults: AtomicU64,
    pub(crate) overruled: AtomicU64,
    pub(crate) retried_faults: AtomicU64,
    pub(crate) refaults_guarded: AtomicU64,
    pub(crate) over_budget: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) shares: AtomicU64,
    pub(crate) resumes: AtomicU64,
    pub(crate) latency: Histogram,
    pub(crate) read_latency: Histogram,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}

/// A snapshot of a region's statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RegionStats {
    /// Pages brought in from the backing store (demand and read-ahead), each
    /// delivered to the policy as a missing fault.
    pub missing_faults: u64,
    /// Missing-fault events raised by the application (one per userfaultfd
    /// message; a clustered read serves several pages per event).
    pub fault_events: u64,
    /// Of `missing_faults`, pages read ahead of the faulting page.
    pub readahead_pages: u64,
    /// Of `readahead_pages`, pages of windows copied in from the page cache
    /// (`UFFDIO_COPY` from a staging buffer: frames never cleared first).
    pub copied_in_pages: u64,
    /// Clusters read around a random fault whose probe (their unmapped last
    /// page) the application touched while it was in memory: read-around
    /// that was used (docs/pager.md, "Read-around").
    pub probe_hits: u64,
    /// The most reads of missing faults' clusters in flight at once (several
    /// application threads faulting together: see `FaultReads`).
    pub reads_in_flight_max: u64,
    /// The most windows read ahead of the application at once, of all the
    /// sequences it streams (each keeps `readahead_depth` of its own).
    pub windows_ahead_max: u64,
    /// Of `missing_faults`, pages zero-filled ahead of the faulting page in
    /// clusters along a stream of first touches (`zero_around_max_pages`).
    pub zero_around_pages: u64,
    /// Minor faults from reference-bit emulation.
    pub minor_faults: u64,
    /// Write-protect faults (first write to a clean page: dirty tracking).
    pub wp_faults: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Eviction notifications dropped because the subscriber's queue was
    /// full (`Region::subscribe_evictions`), in total.
    pub evictions_lost: u64,
    /// Dirty pages written back (by eviction or flush).
    pub writebacks: u64,
    /// Write-backs that failed (the data stayed in memory).
    pub writeback_errors: u64,
    /// Reads from the backing store that failed (the page was poisoned).
    pub read_errors: u64,
    /// Faults answered with SIGBUS in the faulting thread, as `MAP_SHARED`
    /// answers them: the page lies wholly beyond the file's current end
    /// (truncated while mapped), or its read failed.
    pub signalled_faults: u64,
    /// Victims the policy named that were not resident pages, overruled.
    pub overruled: u64,
    /// Fault events on pages evicted since they were raised: the thread was
    /// woken to fault again rather than the page read (it may not need it).
    pub retried_faults: u64,
    /// Victims the policy named among the pages the last faults brought in,
    /// replaced because the faulting page had itself just been evicted (two
    /// pages evicting each other in turn, as MRU does to a copy reading from
    /// two pages alternately: no access would complete).
    pub refaults_guarded: u64,
    /// Missing faults held back by the region's fault limit or its pool's
    /// system limit (RAPHA), each postponement counted.
    pub postponed_faults: u64,
    /// The delay those postponements added, microseconds.
    pub postponed_delay_us: u64,
    /// In a pool: frames the region gave back when the pool asked
    /// (normal reclamation: its policy's ReclaimFrame).
    pub pool_reclaimed_frames: u64,
    /// In a pool: frames taken from the region by force because it had not
    /// given them back by the deadline (the engine chose the pages).
    pub forced_reclaim_frames: u64,
    /// In a pool: reclamations the region did not complete by the deadline
    /// (each reported incident).
    pub forced_reclaims: u64,
    /// Faults served above the budget because no frame could be freed.
    pub over_budget: u64,
    /// Bytes read from the backing store.
    pub bytes_read: u64,
    /// Bytes written to the backing store.
    pub bytes_written: u64,
    /// Of `bytes_read`, bytes the kernel's page cache held already and was
    /// read from (a warm file), not from the device.
    pub cached_bytes_read: u64,
    /// Frames holding pages now (resident, loading or pinned; frames being
    /// evicted are freed before the pages that replace them are read).
    pub frames_in_use: u64,
    /// The budget, in frames.
    pub budget_frames: u64,
    /// Pages in the region.
    pub pages: u64,
    /// Pages pinned by the application (`Region::pin`): held outside the
    /// policy, never evicted, counted in `frames_in_use`.
    pub pinned_pages: u64,
    /// Pages held outside the policy because their write-back failed (a
    /// flush retries them).
    pub unwritten_pages: u64,
    /// Bytes the pager's records of the region hold: its frame table (an
    /// entry per page held or remembered, [`crate::resident`]) and the
    /// backing store's records. They follow the budget and what was
    /// written, not the region's size.
    pub bookkeeping_bytes: u64,
    /// Fault-service latency (from reading the fault to mapping the page).
    pub latency: LatencySummary,
    /// Backing-store read latency, per read (a cluster is one read): the
    /// transfer part of a missing fault, as the Cache Kernel splits it.
    pub read_latency: LatencySummary,
    /// The policy's name.
    pub policy: String,
    /// Whether the backing store is read and written with O_DIRECT.
    pub direct_io: bool,
    /// How the region's userfaultfd was opened.
    pub uffd_access: crate::sys::UffdAccess,
    /// Fault-handler threads.
    pub handler_threads: u64,
    /// Reader threads started so far (they start as reads queue, up to a
    /// limit; none for a region whose reads never did).
    pub reader_threads: u64,
    /// The read-ahead in force: largest window, pages.
    pub readahead_max_pages: u64,
    /// The read-ahead in force: windows kept ahead (asynchronous only).
    pub readahead_depth: u64,
    /// The read-ahead in force: whether windows are read ahead asynchronously.
    pub async_readahead: bool,
    /// Policy incidents (for example a program stopped by its budget).
    pub incidents: Vec<String>,
    /// Whether the region is shared with other processes now (a child
    /// after `fork`): the kernel's mapping of its file, not paged here.
    pub shared: bool,
    /// Times the region was made the kernel's mapping of its file for a
    /// child (once per stretch of sharing, however many children).
    pub shares: u64,
    /// Times the pager took the region back once no child used it.
    pub resumes: u64,
    /// The budget asked, if it was cut to what the memory cgroup left.
    pub budget_cut: Option<crate::cgroup::BudgetCut>,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RegionStats {
        let l = |c: &AtomicU64| c.load(Relaxed);
        RegionStats {
            missing_faults: l(&self.missing_faults),
            fault_events: l(&self.fault_events),
            readahead_pages: l(&self.readahead_pages),
            copied_in_pages: l(&self.copied_in_pages),
            probe_hits: l(&self.probe_hits),
            reads_in_flight_max: l(&self.reads_in_flight_max),
            windows_ahead_max: l(&self.windows_ahead_max),
            zero_around_pages: l(&self.zero_around_pages),
            minor_faults: l(&self.minor_faults),
            wp_faults: l(&self.wp_faults),
            evictions: l(&self.evictions),
            evictions_lost: l(&self.evictions_lost),
            writebacks: l(&self.writebacks),
            writeback_errors: l(&self.writeback_errors),
            read_errors: l(&self.read_errors),
            signalled_faults: l(&self.signalled_faults),
            overruled: l(&self.overruled),
            retried_faults: l(&self.retried_faults),
            refaults_guarded: l(&self.refaults_guarded),
            over_budget: l(&self.over_budget),
            bytes_read: l(&self.bytes_read),
            bytes_written: l(&self.bytes_written),
            shares: l(&self.shares),
            resumes: l(&self.resumes),
            latency: self.latency.summary(),
            read_latency: self.read_latency.summary(),
            ..RegionStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_histogram_quantiles_bound_the_recorded_values() {
        let h = Histogram::default();
        for ns in 1..=1000u64 {
            h.record(ns * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.max_ns, 1_000_000);
        assert!(s.p50_ns >= 500_000 && s.p50_ns <= 500_000 * 5 / 4, "{s:?}");
        assert!(s.p99_ns >= 990_000 && s.p99_ns <= 1_000_000, "{s:?}");
    }

    #[test]
    fn test_bucket_upper_bounds_are_monotonic_and_contain_values() {
        for ns in [0u64, 1, 3, 4, 5, 7, 8, 100, 4095, 4096, 1 << 40] {
            assert!(upper_of(bucket_of(ns)) >= ns, "{ns}");
        }
        for b in 1..BUCKETS - 1 {
            assert!(upper_of(b) < upper_of(b + 1));
        }
    }
}
