//! `bench far`'s report: a row per backing, access order and thread count.

use serde::Serialize;

/// One row.
#[derive(Serialize)]
pub struct Row {
    /// What backs the region (redis, redis-tuned, naive, file).
    pub side: &'static str,
    /// `seq` or `random`.
    pub order: &'static str,
    /// Application threads.
    pub threads: usize,
    /// Pages paged in per second.
    pub pages_per_s: f64,
    /// Round trips to Redis per page paged in (0 for the file).
    pub round_trips_per_page: f64,
    /// Microseconds per page.
    pub us_per_page: f64,
    /// The time per page over one PING's round trip.
    pub page_vs_ping: f64,
}

impl Row {
    /// The row of a median run of `ns` over `pages` pages with `trips` round trips.
    pub fn new(
        side: &'static str,
        random: bool,
        threads: usize,
        pages: usize,
        ns: u64,
        trips: u64,
        ping_ns: u64,
    ) -> Row {
        let per_page_ns = ns as f64 / pages as f64;
        Row {
            side,
            order: if random { "random" } else { "seq" },
            threads,
            pages_per_s: pages as f64 / (ns as f64 / 1e9),
            round_trips_per_page: trips as f64 / pages as f64,
            us_per_page: per_page_ns / 1e3,
            page_vs_ping: per_page_ns / ping_ns.max(1) as f64,
        }
    }
}

/// The rows at one network distance.
#[derive(Serialize)]
pub struct Distance {
    /// The round trip added to every node (0: loopback), µs.
    pub rtt_us: f64,
    /// One PING's round trip at this distance, µs (median of 200).
    pub ping_us: f64,
    /// The rows.
    pub rows: Vec<Row>,
    /// Per order and thread count: batched (`redis`) pages/s over `naive`'s.
    pub batched_vs_naive: Vec<Ratio>,
    /// Per thread count: what waiting for a replica adds to a page written
    /// and written back.
    pub replica_wait: Vec<WaitCost>,
}

/// A ratio of two rows' pages per second.
#[derive(Serialize)]
pub struct Ratio {
    /// `seq` or `random`.
    pub order: &'static str,
    /// Application threads.
    pub threads: usize,
    /// `redis` over `naive`.
    pub redis_vs_naive: f64,
    /// `redis-tuned` over `naive`.
    pub tuned_vs_naive: f64,
    /// `redis` over `file`.
    pub redis_vs_file: f64,
}

/// The `write-waited` row against the `write` row.
#[derive(Serialize)]
pub struct WaitCost {
    /// Application threads.
    pub threads: usize,
    /// µs per page written and written back, without waiting.
    pub us_per_page: f64,
    /// The same, waiting for a replica.
    pub waited_us_per_page: f64,
    /// The difference, µs per page.
    pub added_us_per_page: f64,
    /// The waited row's pages/s over the other's.
    pub waited_vs_plain: f64,
}

impl Distance {
    /// The distance `rtt`, its PING `ping_ns`, and its rows.
    pub fn new(rtt: std::time::Duration, ping_ns: u64, rows: Vec<Row>) -> Distance {
        let find = |side: &str, order: &str, threads: usize| {
            rows.iter()
                .find(|r| r.side == side && r.order == order && r.threads == threads)
        };
        let pps = |side: &str, order: &str, threads: usize| {
            find(side, order, threads).map_or(f64::NAN, |r| r.pages_per_s)
        };
        let mut ratios = Vec::new();
        for r in rows.iter().filter(|r| r.side == "redis") {
            let naive = pps("naive", r.order, r.threads);
            ratios.push(Ratio {
                order: r.order,
                threads: r.threads,
                redis_vs_naive: r.pages_per_s / naive,
                tuned_vs_naive: pps("redis-tuned", r.order, r.threads) / naive,
                redis_vs_file: r.pages_per_s / pps("file", r.order, r.threads),
            });
        }
        let replica_wait = rows
            .iter()
            .filter(|r| r.side == "write")
            .filter_map(|plain| {
                let waited = find("write-waited", plain.order, plain.threads)?;
                Some(WaitCost {
                    threads: plain.threads,
                    us_per_page: plain.us_per_page,
                    waited_us_per_page: waited.us_per_page,
                    added_us_per_page: waited.us_per_page - plain.us_per_page,
                    waited_vs_plain: waited.pages_per_s / plain.pages_per_s,
                })
            })
            .collect();
        Distance {
            rtt_us: rtt.as_nanos() as f64 / 1e3,
            ping_us: ping_ns as f64 / 1e3,
            rows,
            batched_vs_naive: ratios,
            replica_wait,
        }
    }
}

/// The report.
#[derive(Serialize)]
pub struct Report {
    /// Pages of the region.
    pub pages: usize,
    /// Rounds per row.
    pub runs: usize,
    /// Each distance asked, in order.
    pub distances: Vec<Distance>,
}

impl Report {
    /// The report of `distances`.
    pub fn new(pages: usize, runs: usize, distances: Vec<Distance>) -> Report {
        Report {
            pages,
            runs,
            distances,
        }
    }

    /// The report as tables, one per distance.
    pub fn text(&self) -> String {
        let mut s = format!(
            "bench far: {} pages read once (or written and written back), median of {} runs\n",
            self.pages, self.runs
        );
        for d in &self.distances {
            s += &format!(
                "\nadded round trip {:.0} us; PING round trip {:.1} us\n",
                d.rtt_us, d.ping_us
            );
            s += &format!(
                "{:<12} {:<7} {:>7} {:>12} {:>12} {:>10} {:>10}\n",
                "side", "order", "threads", "pages/s", "trips/page", "us/page", "page/ping"
            );
            for r in &d.rows {
                s += &format!(
                    "{:<12} {:<7} {:>7} {:>12.0} {:>12.4} {:>10.2} {:>10.3}\n",
                    r.side,
                    r.order,
                    r.threads,
                    r.pages_per_s,
                    r.round_trips_per_page,
                    r.us_per_page,
                    r.page_vs_ping
                );
            }
            s += "batched vs naive (pages/s ratios)\n";
            s += &format!(
                "{:<7} {:>7} {:>14} {:>14} {:>14}\n",
                "order", "threads", "redis/naive", "tuned/naive", "redis/file"
            );
            for r in &d.batched_vs_naive {
                s += &format!(
                    "{:<7} {:>7} {:>14.1} {:>14.1} {:>14.2}\n",
                    r.order, r.threads, r.redis_vs_naive, r.tuned_vs_naive, r.redis_vs_file
                );
            }
            s += "waiting for a replica (WAIT) per page written back\n";
            s += &format!(
                "{:>7} {:>12} {:>14} {:>12} {:>14}\n",
                "threads", "us/page", "waited us/pg", "added us", "waited/plain"
            );
            for w in &d.replica_wait {
                s += &format!(
                    "{:>7} {:>12.2} {:>14.2} {:>12.2} {:>14.2}\n",
                    w.threads,
                    w.us_per_page,
                    w.waited_us_per_page,
                    w.added_us_per_page,
                    w.waited_vs_plain
                );
            }
        }
        s
    }
}
