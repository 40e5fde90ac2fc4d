//! `pagepilot bench far`: page-ins of a region on far memory. One region,
//! read once (sequentially, or in a random order of its pages) by 1, 2 or 4
//! application threads, each its share of the pages, under a budget that
//! holds it all (every page is paged in exactly once), backed by:
//!
//! - `redis`: a far dataspace on a Redis Cluster ([`pagepilot_far`]), a
//!   window of pages per MGET, pager defaults (no options);
//! - `redis-tuned`: the same with the pager's fault-around and read-ahead
//!   set to the hash-tag window (64 pages) and 512 pages;
//! - `naive`: the same dataspace through a manager doing one GET per page;
//! - `file`: the same bytes in a local file (in the page cache), pager defaults.
//!
//! Reported per row (median of the runs): pages per second, round trips per
//! page-in and the time per page against one PING's round trip measured in
//! the same run.

mod cluster;
mod report;

use crate::error::IoContext;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pagepilot_far::{Batching, RedisConfig, RedisManager};
use pagepilot_pager::dataspace::{Access, DataspaceId, Manager};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

use self::report::{Report, Row};
use super::measure::{median, Format};
use crate::BenchResult;

const PAGE: usize = 4096;

/// Arguments of `pagepilot bench far`.
#[derive(clap::Args)]
pub struct Args {
    /// Seed nodes of a Redis Cluster (host:port,...); default: the
    /// `PAGEPILOT_REDIS_CLUSTER` variable, else a cluster the bench starts
    /// with scripts/redis-cluster and stops.
    #[arg(long)]
    cluster: Option<String>,
    /// The region, MB.
    #[arg(long, default_value_t = 16)]
    mb: usize,
    /// Application threads, a comma-separated list.
    #[arg(long, default_value = "1,2,4", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Rounds; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Connections of each Redis manager's pool.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// What backs a region in one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Redis,
    RedisTuned,
    Naive,
    File,
}

impl Side {
    const ALL: [Side; 4] = [Side::Redis, Side::RedisTuned, Side::Naive, Side::File];

    fn name(self) -> &'static str {
        match self {
            Side::Redis => "redis",
            Side::RedisTuned => "redis-tuned",
            Side::Naive => "naive",
            Side::File => "file",
        }
    }
}

/// Why the arguments were refused.
#[derive(Debug, thiserror::Error)]
pub enum FarArgError {
    #[error("--threads: each must be in 1..=16, got {0}")]
    Threads(usize),
    #[error("--mb: must be in 1..=1024, got {0}")]
    Mb(usize),
    #[error("--runs: must be in 1..=20, got {0}")]
    Runs(usize),
    #[error("--cluster {0:?}: expected host:port[,host:port...]")]
    Cluster(String),
}

/// Runs the benchmark.
pub fn run(args: Args) -> BenchResult {
    if args.threads.is_empty() {
        return Err(FarArgError::Threads(0).into());
    }
    if let Some(&t) = args.threads.iter().find(|&&t| t == 0 || t > 16) {
        return Err(FarArgError::Threads(t).into());
    }
    if args.mb == 0 || args.mb > 1024 {
        return Err(FarArgError::Mb(args.mb).into());
    }
    if args.runs == 0 || args.runs > 20 {
        return Err(FarArgError::Runs(args.runs).into());
    }
    let given = args
        .cluster
        .clone()
        .or_else(|| std::env::var("PAGEPILOT_REDIS_CLUSTER").ok());
    let (seeds, _own) = match given {
        Some(list) => {
            let seeds: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
            let ok = seeds.iter().all(|s| {
                s.rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            });
            if !ok {
                return Err(FarArgError::Cluster(list).into());
            }
            (seeds, None)
        }
        None => {
            let c = cluster::Own::start()?;
            (c.seeds.clone(), Some(c))
        }
    };
    let config = |b| {
        RedisConfig::cluster(&seeds)
            .with_connections(args.connections)
            .with_batching(b)
    };
    let batched = Arc::new(RedisManager::new(config(Batching::Windows))?);
    let naive = Arc::new(RedisManager::new(config(Batching::PerPage))?);
    let pages = args.mb * (1 << 20) / PAGE;
    let len = pages * PAGE;

    // The same random bytes in a far dataspace and a local file.
    let name = format!("bench-far-{}", std::process::id());
    let id = batched.create(Some(name.as_ref()), len as u64)?;
    let result = (|| {
        let data: Vec<u8> = {
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        let store = batched.open(&id, Access::ReadWrite, None)?;
        // SAFETY: `data` holds `pages` whole pages (a Vec<u8> is not page
        // aligned, which the store does not need: it copies).
        unsafe { store.write(0, pages, data.as_ptr()) }.doing("writing the data to far memory")?;
        batched.close(&id, store)?;
        let file =
            std::env::temp_dir().join(format!("pagepilot-bench-{}-far-data", std::process::id()));
        std::fs::write(&file, &data).on("writing", &file)?;
        let out = measure(&args, &batched, &naive, &id, &file, pages);
        let _ = std::fs::remove_file(&file);
        out
    })();
    batched.delete(&id)?;
    let report = result?;
    let mut out = std::io::stdout().lock();
    crate::emit::emit(&mut out, args.format, &report, |out| {
        std::io::Write::write_all(out, report.text().as_bytes())
    })
    .doing("writing the report")?;
    Ok(())
}

/// Every row, the median of `runs` rounds.
fn measure(
    args: &Args,
    batched: &Arc<RedisManager>,
    naive: &Arc<RedisManager>,
    id: &DataspaceId,
    file: &std::path::Path,
    pages: usize,
) -> Result<Report, crate::BenchError> {
    let mut pings = Vec::new();
    for _ in 0..200 {
        pings.push(
            batched
                .ping()
                .doing("pinging the Redis Cluster")?
                .as_nanos() as u64,
        );
    }
    let ping_ns = median(pings);
    let mut rows = Vec::new();
    for random in [false, true] {
        for &threads in &args.threads {
            for side in Side::ALL {
                let manager = if side == Side::Naive { naive } else { batched };
                let mut times = Vec::new();
                let mut trips = Vec::new();
                for _ in 0..args.runs {
                    let before = manager.round_trips();
                    let t = one_run(side, manager, id, file, pages, threads, random)?;
                    times.push(t.as_nanos() as u64);
                    trips.push(manager.round_trips() - before);
                }
                let ns = median(times);
                let trips = if side == Side::File { 0 } else { median(trips) };
                rows.push(Row::new(
                    side.name(),
                    random,
                    threads,
                    pages,
                    ns,
                    trips,
                    ping_ns,
                ));
            }
        }
    }
    Ok(Report::new(pages, ping_ns, args.runs, rows))
}

/// Maps a fresh region of the side's backing, reads every page once with
/// `threads` threads, unmaps: the time the threads took.
fn one_run(
    side: Side,
    manager: &Arc<RedisManager>,
    id: &DataspaceId,
    file: &std::path::Path,
    pages: usize,
    threads: usize,
    random: bool,
) -> Result<Duration, crate::BenchError> {
    let len = pages * PAGE;
    let backing = match side {
        Side::File => Backing::File {
            path: PathBuf::from(file),
            writable: false,
        },
        _ => {
            let m: Arc<dyn Manager> = manager.clone();
            Backing::Dataspaces(vec![Attachment::whole(m, id.clone()).read_only()])
        }
    };
    let mut opts = RegionOptions::new(backing, len, "clock");
    if side == Side::RedisTuned {
        opts = opts.with_fault_around(64).with_readahead(512);
    }
    let region = Region::map(opts)?;
    let base = region.as_ptr() as usize;
    let share = pages.div_ceil(threads);
    let start = Instant::now();
    let sum = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let first = (t * share).min(pages);
                    let end = ((t + 1) * share).min(pages);
                    let mut order: Vec<usize> = (first..end).collect();
                    if random {
                        let mut x = 0x2545_F491_4F6C_DD1Du64 ^ t as u64;
                        for i in (1..order.len()).rev() {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            order.swap(i, (x % (i as u64 + 1)) as usize);
                        }
                    }
                    let mut sum = 0u64;
                    for p in order {
                        // SAFETY: page `p < pages` of the mapped region.
                        sum += unsafe { ((base + p * PAGE) as *const u8).read_volatile() } as u64;
                    }
                    sum
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(0))
            .sum::<u64>()
    });
    let elapsed = start.elapsed();
    std::hint::black_box(sum);
    region.unmap()?;
    Ok(elapsed)
}
