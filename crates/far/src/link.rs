//! The connection to Redis shared by a manager and its stores: where the
//! server is (one server or a cluster's seed nodes), a small pool of
//! connections (the pager reads and writes from several threads at once;
//! each request takes a connection of its own), timeouts on every
//! connection, retries for a bounded time (a failover: the replica of a
//! dead primary promoted), and the round-trip counters.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConnection};
use redis::{ConnectionLike, Pipeline, RedisError, Value};

use crate::error::ConfigError;

/// Where the pages are.
#[derive(Clone, Debug)]
pub enum Target {
    /// One server, by URL (`redis://127.0.0.1:6379`).
    Single(String),
    /// A Redis Cluster, by seed nodes (`127.0.0.1:7100`).
    Cluster(Vec<String>),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Single(url) => write!(f, "redis server {url}"),
            Target::Cluster(seeds) => write!(f, "redis cluster {}", seeds.join(",")),
        }
    }
}

/// Timeouts and retries.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Connecting to a node.
    pub connect: Duration,
    /// Waiting for a reply (and for a request to be sent).
    pub response: Duration,
    /// How long a request is retried (a new connection each time, so the
    /// cluster's slot map is read again) before it fails.
    pub retry_for: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            connect: Duration::from_secs(1),
            response: Duration::from_secs(2),
            retry_for: Duration::from_secs(10),
        }
    }
}

/// Durability of writes: a write counts as done once `replicas` replicas
/// of the node that took it acknowledge it (Redis `WAIT`), so a primary
/// that dies right after loses nothing its promoted replica lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaWait {
    /// Replicas that must acknowledge (at least 1).
    pub replicas: u32,
    /// How long the node waits for them in one attempt; fewer by then and
    /// the write is sent again (the replica may be resyncing after a
    /// failover) until the retry time has passed, then it fails.
    pub timeout: Duration,
}

/// Why one attempt of a request failed.
enum Failure {
    Redis(RedisError),
    /// `WAIT` answered fewer replicas than asked.
    Unreplicated {
        acknowledged: i64,
        asked: u32,
    },
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Redis(e) => retryable(e),
            Failure::Unreplicated { .. } => true,
        }
    }

    fn kind(&self) -> io::ErrorKind {
        match self {
            Failure::Redis(e) if e.is_timeout() => io::ErrorKind::TimedOut,
            Failure::Redis(e) if retryable(e) => io::ErrorKind::ConnectionAborted,
            Failure::Redis(_) => io::ErrorKind::Other,
            Failure::Unreplicated { .. } => io::ErrorKind::TimedOut,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Redis(e) => write!(f, "{e}"),
            Failure::Unreplicated {
                acknowledged,
                asked,
            } => write!(
                f,
                "WAIT: {acknowledged} of {asked} replica(s) acknowledged the write"
            ),
        }
    }
}

/// A connection of either kind.
enum Conn {
    Single(redis::Connection),
    Cluster(ClusterConnection),
}

impl Conn {
    fn send(&mut self, packed: &[u8], count: usize) -> redis::RedisResult<Vec<Value>> {
        let replies = match self {
            Conn::Single(c) => c.req_packed_commands(packed, 0, count)?,
            // Routed by the first command's key: the commands of one
            // request are of one window, one slot.
            Conn::Cluster(c) => c.req_packed_commands(packed, 0, count)?,
        };
        replies.into_iter().map(Value::extract_error).collect()
    }
}

enum Client {
    Single(redis::Client),
    Cluster(ClusterClient),
}

struct Pool {
    idle: Vec<Conn>,
    /// Connections out of the pool or idle in it.
    live: usize,
}

/// The connection pool, timeouts, retries and counters of a manager.
pub struct Link {
    target: Target,
    client: Client,
    timing: Timing,
    max_connections: usize,
    pool: Mutex<Pool>,
    freed: Condvar,
    round_trips: AtomicU64,
    retries: AtomicU64,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("target", &self.target)
            .field("timing", &self.timing)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl Link {
    /// A link to `target` (no connection is made until a request).
    pub fn new(
        target: Target,
        timing: Timing,
        max_connections: usize,
    ) -> Result<Link, ConfigError> {
        if max_connections == 0 {
            return Err(ConfigError::NoConnections);
        }
        let bad = |addr: &str, e: RedisError| ConfigError::BadAddress {
            addr: addr.to_owned(),
            why: e.to_string(),
        };
        let client = match &target {
            Target::Single(url) => {
                Client::Single(redis::Client::open(url.as_str()).map_err(|e| bad(url, e))?)
            }
            Target::Cluster(seeds) => {
                if seeds.is_empty() {
                    return Err(ConfigError::NoSeeds);
                }
                let urls: Vec<String> = seeds
                    .iter()
                    .map(|s| {
                        if s.contains("://") {
                            s.clone()
                        } else {
                            format!("redis://{s}")
                        }
                    })
                    .collect();
                for (s, u) in seeds.iter().zip(&urls) {
                    redis::Client::open(u.as_str()).map_err(|e| bad(s, e))?;
                }
                let c = ClusterClientBuilder::new(urls)
                    .connection_timeout(timing.connect)
                    .response_timeout(timing.response)
                    // Retries are ours (`request`), with a fresh slot map.
                    .retries(0)
                    .build()
                    .map_err(|e| bad(&seeds.join(","), e))?;
                Client::Cluster(c)
            }
        };
        Ok(Link {
            target,
            client,
            timing,
            max_connections,
            pool: Mutex::new(Pool {
                idle: Vec::new(),
                live: 0,
            }),
            freed: Condvar::new(),
            round_trips: AtomicU64::new(0),
            retries: AtomicU64::new(0),
        })
    }

    /// Where the pages are.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Its timeouts and retry time.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Whether the target is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }

    /// Requests sent so far (each one round trip to one node).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Requests that failed and were sent again.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn connect(&self) -> redis::RedisResult<Conn> {
        let t = Some(self.timing.response);
        Ok(match &self.client {
            Client::Single(c) => {
                let conn = c.get_connection_with_timeout(self.timing.connect)?;
                conn.set_read_timeout(t)?;
                conn.set_write_timeout(t)?;
                Conn::Single(conn)
            }
            Client::Cluster(c) => {
                let conn = c.get_connection()?;
                conn.set_read_timeout(t)?;
                conn.set_write_timeout(t)?;
                Conn::Cluster(conn)
            }
        })
    }

    /// A connection: an idle one, a new one while fewer than the most are
    /// live, else the next one given back.
    fn take(&self) -> redis::RedisResult<Conn> {
        let mut pool = self.pool();
        loop {
            if let Some(c) = pool.idle.pop() {
                return Ok(c);
            }
            if pool.live < self.max_connections {
                pool.live += 1;
                drop(pool);
                return self.connect().inspect_err(|_| self.discard());
            }
            pool = self.freed.wait(pool).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give_back(&self, c: Conn) {
        self.pool().idle.push(c);
        self.freed.notify_one();
    }

    /// Forgets a connection that failed (or was never made).
    fn discard(&self) {
        self.pool().live -= 1;
        self.freed.notify_one();
    }

    /// Sends the `count` commands of `pipe` as one request (one round trip
    /// to the node of the first command's key) and returns their replies,
    /// none of them an error. With `wait`, a `WAIT` follows the commands on
    /// the same connection, and the request counts as done only once the
    /// replicas it asks for acknowledged it (its reply is not returned). A
    /// request that fails in a way a retry may mend (a connection refused
    /// or dropped, a timeout, MOVED, CLUSTERDOWN, TRYAGAIN, a replica not
    /// yet promoted, too few replicas acknowledging) is sent again on a new
    /// connection after a pause (20 ms, doubling to 500 ms) until
    /// `retry_for` has passed; then, or on any other error, it fails
    /// naming the target and `what` (the keys and dataspace).
    pub fn request(
        &self,
        pipe: &Pipeline,
        count: usize,
        wait: Option<ReplicaWait>,
        what: &dyn Fn() -> String,
    ) -> io::Result<Vec<Value>> {
        let mut packed = pipe.get_packed_pipeline();
        let sent_count = match wait {
            Some(w) => {
                packed.extend(
                    redis::cmd("WAIT")
                        .arg(w.replicas)
                        .arg(w.timeout.as_millis() as u64)
                        .get_packed_command(),
                );
                count + 1
            }
            None => count,
        };
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let sent = self.take().and_then(|mut c| {
                self.round_trips.fetch_add(1, Ordering::Relaxed);
                match c.send(&packed, sent_count) {
                    Ok(v) => {
                        self.give_back(c);
                        Ok(v)
                    }
                    Err(e) => {
                        drop(c);
                        self.discard();
                        Err(e)
                    }
                }
            });
            let failure = match sent {
                Ok(mut v) if v.len() == sent_count => match wait {
                    None => return Ok(v),
                    Some(w) => match v.pop() {
                        Some(Value::Int(n)) if n >= i64::from(w.replicas) => return Ok(v),
                        Some(Value::Int(n)) => Failure::Unreplicated {
                            acknowledged: n,
                            asked: w.replicas,
                        },
                        other => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("{}: {}: WAIT answered {other:?}", self.target, what()),
                            ))
                        }
                    },
                },
                Ok(v) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: {}: {} replies to {sent_count} commands",
                            self.target,
                            what(),
                            v.len()
                        ),
                    ))
                }
                Err(e) => Failure::Redis(e),
            };
            let spent = start.elapsed();
            if !failure.retryable() || spent + pause > self.timing.retry_for {
                return Err(io::Error::new(
                    failure.kind(),
                    format!(
                        "{}: {}: failed after {attempts} attempt(s) in {:.1} s: {failure}",
                        self.target,
                        what(),
                        spent.as_secs_f64()
                    ),
                ));
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}

/// Whether a retry (on a new connection, with a new slot map) may mend `e`.
fn retryable(e: &RedisError) -> bool {
    use redis::{ErrorKind, RetryMethod};
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_cluster_error()
        // A primary that came back as its promoted replica's replica.
        || e.kind() == ErrorKind::ReadOnly
        || !matches!(e.retry_method(), RetryMethod::NoRetry)
}
