//! How a far-memory manager connects: a server or a cluster's seeds,
//! timeouts and retries, its connection pool, the window of pages per hash
//! tag, the batching, and the replica wait of every dataspace it creates.

use std::time::Duration;

use crate::keys::DEFAULT_WINDOW;
use crate::link::{ReplicaWait, Target, Timing};
use crate::store::Batching;

/// How a [`RedisManager`](crate::RedisManager) connects; build with [`RedisConfig::single`] or
/// [`RedisConfig::cluster`] and the `with_*` methods.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    pub(crate) target: Target,
    pub(crate) timing: Timing,
    pub(crate) connections: usize,
    pub(crate) window: usize,
    pub(crate) batching: Batching,
    pub(crate) wait: Option<ReplicaWait>,
}

impl RedisConfig {
    /// One server, by URL (`redis://127.0.0.1:6379`).
    pub fn single(url: impl Into<String>) -> Self {
        Self::new(Target::Single(url.into()))
    }

    /// A Redis Cluster, by seed nodes (`host:port`).
    pub fn cluster<S: AsRef<str>>(seeds: &[S]) -> Self {
        Self::new(Target::Cluster(
            seeds.iter().map(|s| s.as_ref().to_owned()).collect(),
        ))
    }

    fn new(target: Target) -> Self {
        RedisConfig {
            target,
            timing: Timing::default(),
            connections: 8,
            window: DEFAULT_WINDOW,
            batching: Batching::Windows,
            wait: None,
        }
    }

    /// Connect and reply timeouts (default 1 s and 2 s).
    pub fn with_timeouts(mut self, connect: Duration, response: Duration) -> Self {
        self.timing.connect = connect;
        self.timing.response = response;
        self
    }

    /// How long a failing request is retried before it fails (default 10 s:
    /// a failover of a cluster with a node timeout of 1 s takes 2-3 s).
    pub fn with_retry_for(mut self, d: Duration) -> Self {
        self.timing.retry_for = d;
        self
    }

    /// The most connections open at once (default 8): requests beyond wait.
    pub fn with_connections(mut self, n: usize) -> Self {
        self.connections = n;
        self
    }

    /// Pages per hash tag of the dataspaces this manager creates (default 64).
    pub fn with_window(mut self, pages: usize) -> Self {
        self.window = pages;
        self
    }

    /// How pages travel (default [`Batching::Windows`]).
    pub fn with_batching(mut self, b: Batching) -> Self {
        self.batching = b;
        self
    }

    /// Write-backs (and a created dataspace's metadata) count as done only
    /// once `replicas` replicas of the node acknowledge them (`WAIT`,
    /// waiting up to `timeout` per attempt; fewer and the write is sent
    /// again until the retry time passes, then it fails and the pager
    /// keeps the pages dirty). Default: done when the primary has them,
    /// which a failover right after may lose.
    pub fn with_replica_wait(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait = Some(ReplicaWait { replicas, timeout });
        self
    }
}
