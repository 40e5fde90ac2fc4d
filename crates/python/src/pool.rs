//! `pagepilot.Pool` (frames shared by regions) and `pagepilot.connect`
//! (joining the daemon), as the C API's `pp_pool_create` and `pp_connect`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use pagepilot_pager::{Client, Pool};
use pagepilot_policy::chain;
use pyo3::prelude::*;

use crate::args;
use crate::errors::{closed, daemon_error, PoolError};

/// A frame pool: regions mapped with `pool=` draw their frames from its
/// `budget` (HiPEC's global frame manager: each region is guaranteed its
/// `min_frames`, the frames above are granted while free and reclaimed
/// first-allocated-first-reclaimed past `partition_burst`).
/// `Pool(budget, partition_burst=None, deadline_ms=None)`; sizes are ints or
/// strings with units. Regions keep drawing from a pool after `close()`.
#[pyclass(name = "Pool", module = "pagepilot", frozen)]
pub struct PyPool {
    pool: Mutex<Option<Pool>>,
}

impl PyPool {
    /// The pool, unless closed.
    pub fn pool(&self) -> PyResult<Pool> {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| closed("the pool"))
    }
}

#[pymethods]
impl PyPool {
    #[new]
    #[pyo3(signature = (budget, partition_burst = None, deadline_ms = None))]
    fn new(
        py: Python<'_>,
        budget: &Bound<'_, PyAny>,
        partition_burst: Option<&Bound<'_, PyAny>>,
        deadline_ms: Option<f64>,
    ) -> PyResult<Self> {
        let budget = args::size(budget, "budget")?;
        let burst = partition_burst
            .map(|b| args::size(b, "partition_burst"))
            .transpose()?;
        let mut pool = py
            .detach(|| Pool::new(budget))
            .map_err(|e| PoolError::new_err(chain(&e).to_string()))?;
        if let Some(b) = burst {
            pool = pool.with_partition_burst(b);
        }
        if let Some(ms) = deadline_ms {
            if !(ms.is_finite() && ms >= 0.0) {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "deadline_ms: {ms} is not a duration"
                )));
            }
            pool = pool.with_deadline(Duration::from_secs_f64(ms / 1000.0));
        }
        Ok(PyPool {
            pool: Mutex::new(Some(pool)),
        })
    }

    /// The pool's frames, free frames and each region's part, as a dict
    /// (`pp_pool_stats_json`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = self.pool()?.stats_json();
        py.import("json")?.call_method1("loads", (json,))
    }

    /// Frees the handle (`pp_pool_destroy`); regions mapped into the pool
    /// keep drawing from it until they are unmapped.
    fn close(&self) {
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        match self.pool() {
            Ok(p) => {
                let s = p.stats();
                format!(
                    "<pagepilot.Pool {} frames, {} free, {} regions>",
                    s.total_frames,
                    s.free_frames,
                    s.holders.len()
                )
            }
            Err(_) => "<pagepilot.Pool closed>".into(),
        }
    }
}

/// A connection to the pagepilot daemon (from `pagepilot.connect`).
#[pyclass(name = "Client", module = "pagepilot", frozen)]
pub struct PyClient {
    client: Client,
}

impl PyClient {
    /// The connection.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

#[pymethods]
impl PyClient {
    /// The daemon's socket.
    #[getter]
    fn path(&self) -> PathBuf {
        self.client.path().to_path_buf()
    }

    /// Whether the connection still stands (the daemon may have stopped).
    #[getter]
    fn connected(&self) -> bool {
        self.client.is_connected()
    }

    /// Messages sent to the daemon so far (faults send none).
    #[getter]
    fn messages_sent(&self) -> u64 {
        self.client.messages_sent()
    }

    fn __repr__(&self) -> String {
        format!(
            "<pagepilot.Client {:?} id {:?}{}>",
            self.client.path().display().to_string(),
            self.client.id(),
            if self.client.is_connected() {
                ""
            } else {
                " disconnected"
            }
        )
    }
}

/// Connects to the daemon listening at `path` and joins it (`pp_connect`):
/// the regions this process maps from now on (outside a pool) draw their
/// frames from the daemon. Returns the `Client`; raises `DaemonError` (with
/// `errno`: ENOENT or ECONNREFUSED when no daemon listens there).
#[pyfunction]
pub fn connect(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<PyClient> {
    let path = args::path(path, "path")?;
    let client = py
        .detach(|| Client::connect(&path))
        .map_err(|e| daemon_error(py, &e))?;
    Ok(PyClient { client })
}
