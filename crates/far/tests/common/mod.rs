//! Helpers of the far-memory tests: real Redis servers and clusters
//! (`pagepilot_testkit::redis`, shared with the C API's tests), a manager
//! on them, and the hammer/shadow harness of the pager's integrity tests
//! (crates/pager/tests/common), copied.
#![allow(dead_code, unused_imports)] // each test binary uses a part

pub mod hammer;

use std::time::Duration;

use pagepilot_far::{RedisConfig, RedisManager};
pub use pagepilot_testkit::redis::{free_ports, shared_cluster, unique, Cluster, Server};

/// A manager on the shared cluster.
pub fn cluster_manager() -> RedisManager {
    RedisManager::new(RedisConfig::cluster(&shared_cluster())).unwrap()
}

/// Far managers and plain connections on a test's own server.
pub trait ServerExt {
    /// A manager on it that retries for `retry_for`.
    fn manager(&self, retry_for: Duration) -> RedisManager;
    /// A plain connection, to look at the keys.
    fn raw(&self) -> redis::Connection;
}

impl ServerExt for Server {
    fn manager(&self, retry_for: Duration) -> RedisManager {
        RedisManager::new(RedisConfig::single(self.url()).with_retry_for(retry_for)).unwrap()
    }

    fn raw(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

/// `n` pages of pseudo-random bytes.
pub fn random_pages(n: usize, seed: u64) -> Vec<u8> {
    let mut r = hammer::Rng(seed | 1);
    (0..n * 4096).map(|_| r.next() as u8).collect()
}

/// A page-aligned buffer of `n` pages.
pub struct Pages {
    ptr: *mut u8,
    len: usize,
}

impl Pages {
    pub fn new(n: usize) -> Pages {
        let len = n.max(1) * 4096;
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Pages { ptr, len }
    }
    pub fn from(data: &[u8]) -> Pages {
        let p = Pages::new(data.len().div_ceil(4096));
        // SAFETY: `p` holds at least `data.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.ptr, data.len()) };
        p
    }
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: allocated for `len` bytes, zeroed or written since.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, 4096).unwrap();
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

/// Reads pages `first..first+n` of `store` into a fresh buffer.
pub fn read(
    store: &dyn pagepilot_dataspace::PageStore,
    first: usize,
    n: usize,
) -> std::io::Result<Vec<u8>> {
    let buf = Pages::new(n);
    // SAFETY: `buf` is page aligned and holds `n` pages.
    let got = unsafe { store.read(first, n, buf.ptr()) }?;
    Ok(buf.bytes()[..got * 4096].to_vec())
}

/// Writes `data` (whole pages) as pages from `first` of `store`.
pub fn write(
    store: &dyn pagepilot_dataspace::PageStore,
    first: usize,
    data: &[u8],
) -> std::io::Result<()> {
    let buf = Pages::from(data);
    // SAFETY: `buf` is page aligned and holds the pages.
    unsafe { store.write(first, data.len() / 4096, buf.ptr()) }
}
