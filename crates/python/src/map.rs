//! `map_file` and `map_anon`: the C API's `pp_map` with keyword options of
//! the same names (`pp_options`), 0 meaning "the default" for each.

use std::time::Duration;

use pagepilot_pager::{Backing, FaultService, JoinDaemon, Region, RegionOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::args;
use crate::errors::map_error;
use crate::pool::{PyClient, PyPool};
use crate::region::{Origin, PyRegion, Reopen};

/// The tuning options every mapping call takes (`pp_options`' fields).
pub(crate) struct Tuning<'py> {
    pub fault_around_pages: usize,
    pub readahead_max_pages: usize,
    pub handler_threads: usize,
    pub swap_dir: Option<Bound<'py, PyAny>>,
    pub faulting_thread: bool,
    pub zero_around_max_pages: usize,
    pub pool: Option<Bound<'py, PyAny>>,
    pub fault_limit: u64,
    pub fault_period_us: u64,
    pub min_frames: usize,
    pub cpu_reserve: f64,
    pub daemon: Option<Bound<'py, PyAny>>,
}

impl Tuning<'_> {
    /// Applies the options the way `pp_map` does.
    pub(crate) fn apply(&self, mut ro: RegionOptions) -> PyResult<RegionOptions> {
        if self.fault_around_pages != 0 {
            ro = ro.with_fault_around(self.fault_around_pages);
        }
        if self.readahead_max_pages != 0 {
            ro = ro.with_readahead(self.readahead_max_pages);
        }
        if self.handler_threads != 0 {
            ro = ro
                .with_handler_threads(self.handler_threads)
                .with_fault_service(FaultService::HandlerThreads);
        }
        if let Some(dir) = &self.swap_dir {
            ro = ro.with_swap_dir(args::path(dir, "swap_dir")?);
        }
        if self.faulting_thread {
            ro = ro.with_fault_service(FaultService::FaultingThread);
        }
        if self.zero_around_max_pages != 0 {
            ro = ro.with_zero_around(self.zero_around_max_pages);
        }
        if let Some(pool) = &self.pool {
            let pool = pool
                .cast::<PyPool>()
                .map_err(|_| PyTypeError::new_err("pool: expected a pagepilot.Pool"))?;
            ro = ro.with_pool(&pool.get().pool()?);
        }
        if self.min_frames != 0 {
            ro = ro.with_min_frames(self.min_frames);
        }
        if self.cpu_reserve != 0.0 {
            ro = ro.with_reserve(self.cpu_reserve);
        }
        if self.fault_limit != 0 || self.fault_period_us != 0 {
            ro = ro.with_fault_limit(
                self.fault_limit,
                Duration::from_micros(self.fault_period_us),
            );
        }
        match &self.daemon {
            None => {}
            Some(d) if d.is_instance_of::<pyo3::types::PyBool>() => {
                ro.daemon = if d.extract::<bool>()? {
                    JoinDaemon::Process
                } else {
                    JoinDaemon::Never
                };
            }
            Some(d) => {
                let client = d.cast::<PyClient>().map_err(|_| {
                    PyTypeError::new_err(
                        "daemon: expected a pagepilot.Client (from pagepilot.connect), or False",
                    )
                })?;
                ro = ro.with_daemon(client.get().client());
            }
        }
        Ok(ro)
    }
}

/// Maps a region with the GIL released and wraps it.
pub(crate) fn map(
    py: Python<'_>,
    ro: RegionOptions,
    readonly: bool,
    origin: Origin,
) -> PyResult<PyRegion> {
    let policy = ro.policy.clone();
    let region = py
        .detach(|| Region::map(ro))
        .map_err(|e| map_error(py, &e))?;
    Ok(PyRegion::new(region, readonly, policy, origin))
}

/// Maps a file into a region paged under `budget` (bytes: an int or a string
/// such as "40MB") by `policy` (a built-in name such as "mru", "clock",
/// "seq", a policy program path, or a `pagepilot.Policy`). `writable=True`
/// writes dirty pages back to the file. Keyword options as the C API's
/// `pp_options` (0 or None: the default): `len` (bytes to map; default the
/// whole file), `fault_around_pages`, `readahead_max_pages`,
/// `handler_threads`, `swap_dir`, `faulting_thread`, `zero_around_max_pages`,
/// `pool` (a `pagepilot.Pool`), `fault_limit` and `fault_period_us`,
/// `min_frames`, `cpu_reserve`, and `daemon` (a `pagepilot.Client`, or False
/// to stay out of the daemon). The GIL is released while mapping. Raises
/// `MapError` with the C API's message.
#[pyfunction]
#[pyo3(signature = (path, budget, policy = None, writable = false, *, len = None,
    fault_around_pages = 0, readahead_max_pages = 0, handler_threads = 0, swap_dir = None,
    faulting_thread = false, zero_around_max_pages = 0, pool = None, fault_limit = 0,
    fault_period_us = 0, min_frames = 0, cpu_reserve = 0.0, daemon = None))]
#[allow(clippy::too_many_arguments)]
pub fn map_file<'py>(
    py: Python<'py>,
    path: &Bound<'py, PyAny>,
    budget: &Bound<'py, PyAny>,
    policy: Option<&Bound<'py, PyAny>>,
    writable: bool,
    len: Option<&Bound<'py, PyAny>>,
    fault_around_pages: usize,
    readahead_max_pages: usize,
    handler_threads: usize,
    swap_dir: Option<Bound<'py, PyAny>>,
    faulting_thread: bool,
    zero_around_max_pages: usize,
    pool: Option<Bound<'py, PyAny>>,
    fault_limit: u64,
    fault_period_us: u64,
    min_frames: usize,
    cpu_reserve: f64,
    daemon: Option<Bound<'py, PyAny>>,
) -> PyResult<PyRegion> {
    let path = args::path(path, "path")?;
    let budget_bytes = args::size(budget, "budget")?;
    let policy_obj = match policy {
        Some(p) => p.clone(),
        None => "clock".into_pyobject(py)?.into_any(),
    };
    let spec = args::policy_spec(&policy_obj)?;
    let len = len.map(|l| args::size(l, "len")).transpose()?;
    let tuning = Tuning {
        fault_around_pages,
        readahead_max_pages,
        handler_threads,
        swap_dir,
        faulting_thread,
        zero_around_max_pages,
        pool,
        fault_limit,
        fault_period_us,
        min_frames,
        cpu_reserve,
        daemon,
    };
    let backing = Backing::File {
        path: path.clone(),
        writable,
    };
    let mut ro = tuning.apply(RegionOptions::new(backing, budget_bytes, &spec))?;
    if let Some(l) = len.filter(|&l| l != 0) {
        ro = ro.with_len(l);
    }
    let reopen = Reopen {
        path,
        budget: budget_bytes,
        policy: policy_obj.unbind(),
        writable,
        len,
    };
    map(py, ro, !writable, Origin::File(reopen))
}

/// Maps `size` bytes of zero-filled anonymous memory (spilled to a swap
/// file beyond the budget) paged under `budget` by `policy`; sizes are ints
/// or strings with units. Keyword options as `map_file`'s (without `len`).
#[pyfunction]
#[pyo3(signature = (size, budget, policy = None, *,
    fault_around_pages = 0, readahead_max_pages = 0, handler_threads = 0, swap_dir = None,
    faulting_thread = false, zero_around_max_pages = 0, pool = None, fault_limit = 0,
    fault_period_us = 0, min_frames = 0, cpu_reserve = 0.0, daemon = None))]
#[allow(clippy::too_many_arguments)]
pub fn map_anon<'py>(
    py: Python<'py>,
    size: &Bound<'py, PyAny>,
    budget: &Bound<'py, PyAny>,
    policy: Option<&Bound<'py, PyAny>>,
    fault_around_pages: usize,
    readahead_max_pages: usize,
    handler_threads: usize,
    swap_dir: Option<Bound<'py, PyAny>>,
    faulting_thread: bool,
    zero_around_max_pages: usize,
    pool: Option<Bound<'py, PyAny>>,
    fault_limit: u64,
    fault_period_us: u64,
    min_frames: usize,
    cpu_reserve: f64,
    daemon: Option<Bound<'py, PyAny>>,
) -> PyResult<PyRegion> {
    let len = args::size(size, "size")?;
    let budget_bytes = args::size(budget, "budget")?;
    let spec = match policy {
        Some(p) => args::policy_spec(p)?,
        None => "clock".to_string(),
    };
    let tuning = Tuning {
        fault_around_pages,
        readahead_max_pages,
        handler_threads,
        swap_dir,
        faulting_thread,
        zero_around_max_pages,
        pool,
        fault_limit,
        fault_period_us,
        min_frames,
        cpu_reserve,
        daemon,
    };
    let ro = tuning.apply(RegionOptions::new(
        Backing::Anonymous { len },
        budget_bytes,
        &spec,
    ))?;
    map(py, ro, false, Origin::Anonymous)
}
