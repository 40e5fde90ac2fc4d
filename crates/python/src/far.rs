//! `pagepilot.FarManager`: far memory, named dataspaces whose pages live in
//! Redis (one server or a Redis Cluster), `pagepilot-far`'s
//! `RedisManager` (`docs/far-memory.md`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pagepilot_far::{RedisConfig, RedisManager};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::dataspace::PyDataspace;
use crate::errors::dataspace_error;
use crate::managers::{Kind, PyManager};

/// Seconds as a duration, or a `ValueError` naming `what`.
fn seconds(s: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what}: {s} is not a duration in seconds")))
}

/// Where the pages are: "redis://host:port" (one server), "host:port,..."
/// or a list of "host:port" (a cluster's seed nodes).
fn config_of(seeds: &Bound<'_, PyAny>) -> PyResult<RedisConfig> {
    if let Ok(s) = seeds.cast::<PyString>() {
        let s = s.to_str()?.trim();
        if s.starts_with("redis://") || s.starts_with("rediss://") {
            return Ok(RedisConfig::single(s));
        }
        let list: Vec<&str> = s
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect();
        return Ok(RedisConfig::cluster(&list));
    }
    let list: Vec<String> = seeds.extract().map_err(|_| {
        PyTypeError::new_err(
            "seeds: expected \"redis://host:port\" (one server), \"host:port,...\" or a list \
             of \"host:port\" (a cluster's seed nodes)",
        )
    })?;
    Ok(RedisConfig::cluster(&list))
}

/// Far memory: named dataspaces whose pages live in Redis, a window of
/// pages (default 64) per round trip. `seeds`: "redis://host:port" (one
/// server), or a Redis Cluster's seed nodes ("host:port,..." or a list).
/// `replica_wait=(replicas, timeout_seconds)`: a write-back counts as done
/// only once that many replicas acknowledged it (Redis `WAIT`; durability
/// at a failover); fewer and it is sent again until `retry_for` seconds
/// passed, then it fails (the pages stay dirty: `FlushError`). The
/// timeout must be below `response_timeout`. No connection is made until
/// the first operation. A bad configuration raises `ValueError`.
#[pyclass(name = "FarManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyFarManager {
    manager: Arc<RedisManager>,
}

#[pymethods]
impl PyFarManager {
    #[new]
    #[pyo3(signature = (seeds, *, window = None, replica_wait = None, connections = None,
        retry_for = None, connect_timeout = None, response_timeout = None))]
    fn new(
        seeds: &Bound<'_, PyAny>,
        window: Option<usize>,
        replica_wait: Option<(u32, f64)>,
        connections: Option<usize>,
        retry_for: Option<f64>,
        connect_timeout: Option<f64>,
        response_timeout: Option<f64>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let mut config = config_of(seeds)?;
        if let Some(w) = window {
            config = config.with_window(w);
        }
        if let Some(n) = connections {
            config = config.with_connections(n);
        }
        if let Some(s) = retry_for {
            config = config.with_retry_for(seconds(s, "retry_for")?);
        }
        if connect_timeout.is_some() || response_timeout.is_some() {
            let connect = seconds(connect_timeout.unwrap_or(1.0), "connect_timeout")?;
            let response = seconds(response_timeout.unwrap_or(2.0), "response_timeout")?;
            config = config.with_timeouts(connect, response);
        }
        if let Some((replicas, timeout)) = replica_wait {
            config = config.with_replica_wait(replicas, seconds(timeout, "replica_wait")?);
        }
        let manager =
            Arc::new(RedisManager::new(config).map_err(|e| PyValueError::new_err(e.to_string()))?);
        Ok(crate::managers::init(
            PyFarManager {
                manager: manager.clone(),
            },
            PyManager::of(Kind::Far(manager)),
        ))
    }

    /// Creates far dataspace `name` (1-128 ASCII letters, digits, `.`, `_`,
    /// `-`) of `size` bytes, zero-filled. `replica_wait=(replicas,
    /// timeout_seconds)` makes the wait a property of the dataspace,
    /// recorded with it: every later opener's write-backs wait for that
    /// many replicas, whatever its manager's own `replica_wait`. Raises
    /// `DataspaceError` (EEXIST if taken; with a replica wait, ETIMEDOUT
    /// when too few replicas acknowledge its metadata), `ValueError` for a
    /// wait of no replicas or a timeout not below the reply timeout.
    #[pyo3(signature = (name, size, *, replica_wait = None))]
    fn create(
        slf: &Bound<'_, Self>,
        name: &str,
        size: &Bound<'_, PyAny>,
        replica_wait: Option<(u32, f64)>,
    ) -> PyResult<PyDataspace> {
        let Some((replicas, timeout)) = replica_wait else {
            return PyManager::create_in(slf.as_super(), Some(PathBuf::from(name)), size);
        };
        let py = slf.py();
        let timeout = seconds(timeout, "replica_wait")?;
        if replicas == 0 {
            return Err(PyValueError::new_err(
                "replica_wait: a replica wait needs at least one replica to wait for",
            ));
        }
        let len = crate::args::size(size, "size")? as u64;
        let far = slf.get().manager.clone();
        let id = py
            .detach(|| far.create_with_replica_wait(name, len, replicas, timeout))
            .map_err(|e| {
                crate::dataspace_errors::refused(
                    py,
                    RedisManager::NAME,
                    &format!("creating redis dataspace {name:?}"),
                    &e,
                )
            })?;
        Ok(PyDataspace::new(slf.as_super().clone().unbind(), id, len))
    }

    /// Requests sent so far by the manager and its dataspaces' stores (one
    /// round trip each).
    #[getter]
    fn round_trips(&self) -> u64 {
        self.manager.round_trips()
    }

    /// Requests that failed and were sent again.
    #[getter]
    fn retries(&self) -> u64 {
        self.manager.retries()
    }

    /// One `PING`'s round trip, seconds. Raises `DataspaceError` if the
    /// server does not answer.
    fn ping(&self, py: Python<'_>) -> PyResult<f64> {
        let m = self.manager.clone();
        py.detach(|| m.ping())
            .map(|d| d.as_secs_f64())
            .map_err(|e| {
                dataspace_error(
                    py,
                    RedisManager::NAME,
                    crate::dataspace_errors::io_errno(&e),
                    format!("ping: {e}"),
                )
            })
    }
}
