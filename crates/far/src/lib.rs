//! Far memory for pagepilot (issue 16, item 5): [`RedisManager`], a
//! dataspace manager whose named dataspaces keep their pages in Redis, on
//! one server or on a Redis Cluster. One key per page; the pages of an
//! aligned window (64 by default) share a hash tag, so they live on one
//! node and a window is read with one `MGET` and written with one `MSET`:
//! one round trip. Requests that fail while a cluster fails over are
//! retried on fresh connections for a bounded time; then the page I/O
//! fails with an `io::Error` naming the server, the keys and the dataspace
//! (the pager poisons a page it cannot read, and keeps a page it cannot
//! write back dirty). See `docs/far-memory.md`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use pagepilot_dataspace::{Access, Manager};
//! use pagepilot_far::{RedisConfig, RedisManager};
//! let far = RedisManager::new(RedisConfig::cluster(&["127.0.0.1:7100"])).unwrap();
//! let id = far.create(Some("matrix".as_ref()), 1 << 20).unwrap();
//! let store = far.open(&id, Access::ReadWrite, None).unwrap();
//! assert_eq!(store.size(), 1 << 20);
//! far.close(&id, store).unwrap();
//! far.delete(&id).unwrap();
//! ```

mod config;
mod error;
mod keys;
mod link;
mod manager;
mod store;
mod written;

pub use config::RedisConfig;
pub use error::ConfigError;
pub use keys::{check_name, meta_key, page_key, DEFAULT_WINDOW, MAX_LEN, MAX_NAME, MAX_WINDOW};
pub use link::{ReplicaWait, Target, Timing};
pub use manager::RedisManager;
pub use store::{Batching, RedisStore};
