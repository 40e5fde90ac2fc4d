//! A Redis Cluster of the bench's own, started with scripts/redis-cluster
//! when none is given, and stopped when dropped.

use crate::error::IoContext;
use crate::BenchError;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The repository's cluster script.
fn script() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/redis-cluster"
    ))
}

/// A cluster started by the bench.
pub struct Own {
    dir: PathBuf,
    /// Its seed nodes.
    pub seeds: Vec<String>,
}

impl Own {
    /// Three primaries with a replica each on free loopback ports, every
    /// node `rtt` away: scripts/redis-cluster
    /// --rtt puts a proxy adding `rtt / 2` each way in front of each node
    /// (and the nodes announce it, so redirects and replication pass it
    /// too); `Duration::ZERO` is no proxy. The proxy's own hop adds some
    /// microseconds more (docs/far-memory.md).
    pub fn start_with_rtt(rtt: Duration) -> Result<Own, crate::BenchError> {
        let dir =
            std::env::temp_dir().join(format!("pagepilot-bench-{}-redis", std::process::id()));
        let base = free_base(6).ok_or_else(|| BenchError::Measurement {
            bench: "far",
            what: "no 6 free loopback ports for a Redis Cluster".into(),
        })?;
        let out = Command::new(script())
            .args(["start", "--port", &base.to_string()])
            .args(["--rtt", &format!("{}ns", rtt.as_nanos())])
            .arg(&dir)
            .output()
            .on("running", script())?;
        let own = Own {
            dir,
            seeds: String::from_utf8_lossy(&out.stdout)
                .trim()
                .split(',')
                .map(String::from)
                .collect(),
        };
        if !out.status.success() {
            return Err(BenchError::Measurement {
                bench: "far",
                what: format!(
                    "starting a Redis Cluster failed (pass --cluster host:port,...): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Ok(own)
    }
}

impl Drop for Own {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).status();
    }
}

/// The first of `n` consecutive free loopback ports whose bus ports
/// (+10000) are free too.
fn free_base(n: u16) -> Option<u16> {
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    let start = 30000 + (std::process::id() % 200) as u16 * 50;
    (0..100u16)
        .map(|i| start.wrapping_add(i * 10) % 20000 + 30000)
        .find(|&b| (b..b + n).all(|p| free(p) && free(p + 10000)))
}
