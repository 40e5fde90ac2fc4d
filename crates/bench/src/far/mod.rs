//! `pagepilot bench far`: page-ins of a region on far memory, at one or
//! more network distances. One region, read once (sequentially, or in a
//! random order of its pages) by 1, 2 or 4 application threads, each its
//! share of the pages, under a budget that holds it all (every page is
//! paged in exactly once), backed by:
//!
//! - `redis`: a far dataspace on a Redis Cluster ([`pagepilot_far`]), a
//!   window of pages per MGET, pager defaults (no options);
//! - `redis-tuned`: the same with the pager's fault-around and read-ahead
//!   set to the hash-tag window (64 pages) and 512 pages;
//! - `naive`: the same dataspace through a manager doing one GET per page;
//! - `file`: the same bytes in a local file (in the page cache), pager defaults;
//! - `write` and `write-waited`: every page written, in order, and the
//!   region unmapped (its pages written back), without and with the
//!   write-backs waiting for a replica (`WAIT`): what durability at
//!   failover costs.
//!
//! Each distance (`--rtt`) gets a cluster of its own, started with
//! scripts/redis-cluster --rtt (a delay-adding proxy before every node).
//! Reported per row (median of the runs): pages per second, round trips per
//! page and the time per page against one PING's round trip measured at
//! that distance.

mod cluster;
mod report;
mod runs;

use crate::error::IoContext;
use std::sync::Arc;
use std::time::Duration;

use pagepilot_far::{Batching, RedisConfig, RedisManager};
use pagepilot_pager::dataspace::{Access, Manager};

use self::report::{Distance, Report, Row};
use self::runs::{Far, Side};
use super::measure::{median, Format};
use crate::BenchResult;

const PAGE: usize = 4096;

/// How long a waited write-back lets the node wait for its replica per
/// attempt (the reply timeout, 2 s, must exceed it).
const REPLICA_WAIT: Duration = Duration::from_millis(500);

/// Arguments of `pagepilot bench far`.
#[derive(clap::Args)]
pub struct Args {
    /// Seed nodes of a Redis Cluster (host:port,...); default: the
    /// `PAGEPILOT_REDIS_CLUSTER` variable, else a cluster the bench starts
    /// with scripts/redis-cluster and stops. Only with `--rtt 0`.
    #[arg(long)]
    cluster: Option<String>,
    /// Round trips added to every node, a comma-separated list (`0`,
    /// `100us`, `1ms`): each distance gets a cluster of the bench's own,
    /// every node behind a proxy adding half of it each way.
    #[arg(long, default_value = "0", value_delimiter = ',', value_parser = parse_rtt)]
    rtt: Vec<Duration>,
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

/// A round trip as `--rtt` takes it: `0`, or a whole number of `ns`, `us`,
/// `ms` or `s`, at most 1 s.
fn parse_rtt(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?}: expected 0 or a whole number of ns, us, ms or s (100us, 1ms)");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let digits = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let n: u64 = s[..digits].parse().map_err(|_| bad())?;
    let d = match &s[digits..] {
        "ns" => Duration::from_nanos(n),
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return Err(bad()),
    };
    if d > Duration::from_secs(1) {
        return Err(format!("{s:?}: at most 1s"));
    }
    Ok(d)
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
    #[error("--rtt other than 0 needs the bench's own cluster (leave out --cluster)")]
    RttWithCluster,
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
    let only_loopback = args.rtt.iter().all(|d| d.is_zero());
    if args.cluster.is_some() && !only_loopback {
        return Err(FarArgError::RttWithCluster.into());
    }
    // A cluster given (or exported) serves the loopback distance only.
    let given = args
        .cluster
        .clone()
        .or_else(|| std::env::var("PAGEPILOT_REDIS_CLUSTER").ok())
        .filter(|_| only_loopback);
    let given = match given {
        Some(list) => {
            let seeds: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
            let ok = seeds.iter().all(|s| {
                s.rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            });
            if !ok {
                return Err(FarArgError::Cluster(list).into());
            }
            Some(seeds)
        }
        None => None,
    };
    let pages = args.mb * (1 << 20) / PAGE;
    let data = random_bytes(pages * PAGE);
    let file =
        std::env::temp_dir().join(format!("pagepilot-bench-{}-far-data", std::process::id()));
    std::fs::write(&file, &data).on("writing", &file)?;
    let mut distances = Vec::new();
    for &rtt in &args.rtt {
        let (seeds, own) = match &given {
            Some(seeds) => (seeds.clone(), None),
            None => {
                let c = cluster::Own::start_with_rtt(rtt)?;
                (c.seeds.clone(), Some(c))
            }
        };
        let at = at_distance(&args, rtt, &seeds, &data, &file, pages);
        drop(own);
        match at {
            Ok(d) => distances.push(d),
            Err(e) => {
                let _ = std::fs::remove_file(&file);
                return Err(e);
            }
        }
    }
    let _ = std::fs::remove_file(&file);
    let report = Report::new(pages, args.runs, distances);
    let mut out = std::io::stdout().lock();
    crate::emit::emit(&mut out, args.format, &report, |out| {
        std::io::Write::write_all(out, report.text().as_bytes())
    })
    .doing("writing the report")?;
    Ok(())
}

/// `len` pseudo-random bytes, the same in every run.
fn random_bytes(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every row at one distance, on the cluster of `seeds`: `data` written to
/// a far dataspace of its own (deleted after).
fn at_distance(
    args: &Args,
    rtt: Duration,
    seeds: &[String],
    data: &[u8],
    file: &std::path::Path,
    pages: usize,
) -> Result<Distance, crate::BenchError> {
    let config = |b| {
        RedisConfig::cluster(seeds)
            .with_connections(args.connections)
            .with_batching(b)
    };
    let batched = Arc::new(RedisManager::new(config(Batching::Windows))?);
    let naive = Arc::new(RedisManager::new(config(Batching::PerPage))?);
    let waited = Arc::new(RedisManager::new(
        config(Batching::Windows).with_replica_wait(1, REPLICA_WAIT),
    )?);
    let name = format!("bench-far-{}-{}", std::process::id(), rtt.as_nanos());
    let id = batched.create(Some(name.as_ref()), data.len() as u64)?;
    let result = (|| {
        let store = batched.open(&id, Access::ReadWrite, None)?;
        // SAFETY: `data` holds `pages` whole pages (a Vec<u8> is not page
        // aligned, which the store does not need: it copies).
        unsafe { store.write(0, pages, data.as_ptr()) }.doing("writing the data to far memory")?;
        batched.close(&id, store)?;
        let far = Far {
            batched: &batched,
            naive: &naive,
            waited: &waited,
            id: &id,
            file,
            pages,
        };
        measure(args, rtt, &far)
    })();
    batched.delete(&id)?;
    result
}

/// Every row at one distance, each the median of `runs` rounds.
fn measure(args: &Args, rtt: Duration, far: &Far<'_>) -> Result<Distance, crate::BenchError> {
    let mut pings = Vec::new();
    for _ in 0..200 {
        let ping = far.batched.ping().doing("pinging the Redis Cluster")?;
        pings.push(ping.as_nanos() as u64);
    }
    let ping_ns = median(pings);
    let mut rows = Vec::new();
    let cases = [false, true]
        .into_iter()
        .flat_map(|random| Side::READS.map(|side| (side, random)))
        .chain(Side::WRITES.map(|side| (side, false)));
    for (side, random) in cases {
        for &threads in &args.threads {
            let manager = far.manager(side);
            let mut times = Vec::new();
            let mut trips = Vec::new();
            for _ in 0..args.runs {
                let before = manager.round_trips();
                let t = far.run(side, threads, random)?;
                times.push(t.as_nanos() as u64);
                trips.push(manager.round_trips() - before);
            }
            let trips = if side == Side::File { 0 } else { median(trips) };
            rows.push(Row::new(
                side.name(),
                random,
                threads,
                far.pages,
                median(times),
                trips,
                ping_ns,
            ));
        }
    }
    Ok(Distance::new(rtt, ping_ns, rows))
}

#[cfg(test)]
mod tests {
    use super::parse_rtt;
    use std::time::Duration;

    #[test]
    fn test_rtt_takes_zero_and_whole_numbers_with_a_unit_and_refuses_the_rest() {
        assert_eq!(parse_rtt("0"), Ok(Duration::ZERO));
        assert_eq!(parse_rtt("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_rtt("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse_rtt("750ns"), Ok(Duration::from_nanos(750)));
        for bad in ["", "100", "us", "1.5ms", "-1us", "10 us", "2s"] {
            assert!(parse_rtt(bad).is_err(), "{bad:?}");
        }
    }
}
