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

/// The report.
#[derive(Serialize)]
pub struct Report {
    /// Pages of the region.
    pub pages: usize,
    /// One PING's round trip, µs (median of 200).
    pub ping_us: f64,
    /// Rounds per row.
    pub runs: usize,
    /// The rows.
    pub rows: Vec<Row>,
    /// Per order and thread count: batched (`redis`) pages/s over `naive`'s.
    pub batched_vs_naive: Vec<Ratio>,
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

impl Report {
    /// The report of `rows`.
    pub fn new(pages: usize, ping_ns: u64, runs: usize, rows: Vec<Row>) -> Report {
        let mut ratios = Vec::new();
        let pps = |side: &str, order: &str, threads: usize| {
            rows.iter()
                .find(|r| r.side == side && r.order == order && r.threads == threads)
                .map_or(f64::NAN, |r| r.pages_per_s)
        };
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
        Report {
            pages,
            ping_us: ping_ns as f64 / 1e3,
            runs,
            rows,
            batched_vs_naive: ratios,
        }
    }

    /// The report as a table.
    pub fn text(&self) -> String {
        let mut s = format!(
            "bench far: {} pages read once, median of {} runs; PING round trip {:.1} us\n",
            self.pages, self.runs, self.ping_us
        );
        s += &format!(
            "{:<12} {:<7} {:>7} {:>12} {:>12} {:>10} {:>10}\n",
            "side", "order", "threads", "pages/s", "trips/page", "us/page", "page/ping"
        );
        for r in &self.rows {
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
        s += "\nbatched vs naive (pages/s ratios)\n";
        s += &format!(
            "{:<7} {:>7} {:>14} {:>14} {:>14}\n",
            "order", "threads", "redis/naive", "tuned/naive", "redis/file"
        );
        for r in &self.batched_vs_naive {
            s += &format!(
                "{:<7} {:>7} {:>14.1} {:>14.1} {:>14.2}\n",
                r.order, r.threads, r.redis_vs_naive, r.tuned_vs_naive, r.redis_vs_file
            );
        }
        s
    }
}
