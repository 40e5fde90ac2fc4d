//! Pickling a `pagepilot.Region`, for processes that are not children of
//! the one that mapped it (`multiprocessing`'s spawn and forkserver; a
//! child made by `fork` inherits the region instead, see
//! `crates/pager/src/lifecycle.rs`).
//!
//! - A writable file region is shared (`Region::share_handle`): this
//!   process's view becomes the kernel's `MAP_SHARED` mapping of the file,
//!   its unflushed stores written back first, and the pickle carries the
//!   handle. Unpickled, it is the same file mapped `MAP_SHARED`
//!   (`ShareHandle::open`), holding the region's lease: each process sees
//!   the other's stores at its next load, with no flush or invalidate, as
//!   two `MAP_SHARED` mappings would. The original region is paged again
//!   once every process that unpickled it has closed it (or ended). A
//!   pickle is one lease: load it once (`multiprocessing` does).
//! - A read-only file region is mapped again, paged, in the receiving
//!   process, with the same file, budget, policy and length: neither side
//!   stores through it, so there is nothing to keep coherent, and the
//!   receiver keeps what it was mapped for (a bounded budget and the
//!   policy, reads that bypass the page cache) instead of the kernel's
//!   caching.
//! - An anonymous region cannot be pickled (its memory is this process's),
//!   nor can a region unpickled from another process (its lease is its
//!   own: pickle the original in the process that mapped it).

use pagepilot_pager::{Backing, RegionOptions, ShareHandle};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::args;
use crate::errors::{handle_error, not_paged, share_error};
use crate::region::{Origin, PyRegion, Reopen};

/// `Region.__reduce__`: what rebuilds the region in another process.
pub fn reduce<'py>(region: &PyRegion, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
    let module = py.import("pagepilot._pagepilot")?;
    match region.origin() {
        Origin::Anonymous => Err(PyTypeError::new_err(
            "an anonymous region cannot be pickled: its memory belongs to this process \
             (map a file to share it with other processes)",
        )),
        Origin::Dataspaces(_) => Err(PyTypeError::new_err(
            "a region of attached dataspaces cannot be pickled: its dataspaces are opened by \
             this process's managers (map them again in the other process)",
        )),
        Origin::Shared(_) => Err(PyTypeError::new_err(
            "a region unpickled from another process cannot be pickled again: its lease is \
             this process's (pickle the original region, in the process that mapped it)",
        )),
        Origin::File(r) if !r.writable => {
            region.with_open(py, |_| ())?;
            let args = (
                r.path.clone(),
                r.budget,
                r.policy.clone_ref(py),
                r.writable,
                r.len,
            )
                .into_pyobject(py)?;
            PyTuple::new(py, [module.getattr("_remap")?, args.into_any()])
        }
        Origin::File(_) => {
            let shared = region.with_open(py, |m| m.paged("pickle").map(|r| r.share_handle()))?;
            let handle = shared
                .map_err(|e| not_paged(&e))?
                .map_err(|e| share_error(py, &e))?;
            let args = (
                handle.path,
                handle.len,
                handle.writable,
                handle
                    .lease
                    .as_ref()
                    .and_then(|t| serde_json::to_string(t).ok())
                    .unwrap_or_default(),
                region.policy_spec().to_string(),
            )
                .into_pyobject(py)?;
            PyTuple::new(py, [module.getattr("_open_shared")?, args.into_any()])
        }
    }
}

/// Unpickles a writable file region: maps the file `MAP_SHARED` and claims
/// the lease the sharing process granted (`policy`: the spec that process
/// pages it by, for `repr`). The GIL is released while mapping.
#[pyfunction]
#[pyo3(name = "_open_shared")]
pub fn open_shared(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    len: usize,
    writable: bool,
    lease: String,
    policy: String,
) -> PyResult<PyRegion> {
    // The lease's ticket, as JSON (empty: none).
    let lease = (!lease.is_empty())
        .then(|| serde_json::from_str(&lease))
        .transpose()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("lease: {e}")))?;
    let handle = ShareHandle {
        path: args::path(path, "path")?,
        len,
        writable,
        lease,
    };
    let mapping = py
        .detach(|| handle.open())
        .map_err(|e| handle_error(py, &e))?;
    Ok(PyRegion::shared(mapping, handle, policy))
}

/// Unpickles a read-only file region: maps the file again, paged.
#[pyfunction]
#[pyo3(name = "_remap", signature = (path, budget, policy, writable, len = None))]
pub fn remap<'py>(
    py: Python<'py>,
    path: &Bound<'py, PyAny>,
    budget: &Bound<'py, PyAny>,
    policy: &Bound<'py, PyAny>,
    writable: bool,
    len: Option<&Bound<'py, PyAny>>,
) -> PyResult<PyRegion> {
    let path = args::path(path, "path")?;
    let budget_bytes = args::size(budget, "budget")?;
    let spec = args::policy_spec(policy)?;
    let len = len.map(|l| args::size(l, "len")).transpose()?;
    let backing = Backing::File {
        path: path.clone(),
        writable,
    };
    let mut ro = RegionOptions::new(backing, budget_bytes, &spec);
    if let Some(l) = len.filter(|&l| l != 0) {
        ro = ro.with_len(l);
    }
    let reopen = Reopen {
        path,
        budget: budget_bytes,
        policy: policy.clone().unbind(),
        writable,
        len,
    };
    crate::map::map(py, ro, !writable, Origin::File(reopen))
}
