//! The far manager's own errors: a configuration or a name it refuses
//! (the dataspace operations answer the `pagepilot-dataspace` error enums;
//! page I/O answers `io::Error`s naming the server, keys and dataspace).

use thiserror::Error;

/// A configuration, name or length the far manager refuses.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// No seed nodes were given for a cluster.
    #[error("a Redis Cluster needs at least one seed node (host:port)")]
    NoSeeds,
    /// A seed node or URL the client cannot use.
    #[error("bad Redis address {addr:?}: {why}")]
    BadAddress {
        /// The address given.
        addr: String,
        /// What was wrong.
        why: String,
    },
    /// A dataspace name the manager cannot use.
    #[error("bad far dataspace name {name:?}: {why}")]
    BadName {
        /// The name given.
        name: String,
        /// What was wrong.
        why: &'static str,
    },
    /// A window outside 1..=[`crate::MAX_WINDOW`].
    #[error("window of {0} pages is not in 1..={max}", max = crate::MAX_WINDOW)]
    BadWindow(usize),
    /// A replica wait for no replicas.
    #[error("a replica wait needs at least one replica to wait for")]
    NoReplicasToWaitFor,
    /// A replica wait at least as long as a reply may take.
    #[error("a replica wait of {wait:?} must be shorter than the reply timeout, {response:?}")]
    WaitBeyondResponse {
        /// The wait asked.
        wait: std::time::Duration,
        /// The reply timeout.
        response: std::time::Duration,
    },
    /// A connection pool of no connections.
    #[error("a far manager needs at least one connection")]
    NoConnections,
}
