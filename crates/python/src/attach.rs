//! `map_dataspaces`: a region of dataspaces attached at offsets
//! (`Backing::Dataspaces`, SawMill's region map), with `map_anon`'s
//! keyword options.

use pagepilot_pager::{Backing, RegionOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::args;
use crate::dataspace::{whole, PyAttachment, PyDataspace};
use crate::errors::map_refused;
use crate::map::{map, Tuning};
use crate::region::{Origin, PyRegion};

/// The pager's attachment of one item: a `Dataspace` (all of it, at the
/// region's start) or an `Attachment`.
fn attachment(item: &Bound<'_, PyAny>) -> PyResult<(pagepilot_pager::Attachment, String)> {
    if let Ok(ds) = item.cast::<PyDataspace>() {
        return Ok((whole(ds.get()), ds.get().describe()));
    }
    if let Ok(a) = item.cast::<PyAttachment>() {
        let ds: Bound<'_, PyDataspace> = a.getattr("dataspace")?.cast_into()?;
        return Ok((a.get().attachment(), ds.get().describe()));
    }
    Err(PyTypeError::new_err(format!(
        "attachments: expected pagepilot.Dataspace or pagepilot.Attachment items, got {}",
        item.get_type().name()?
    )))
}

/// Maps a region of dataspaces (SawMill's region map): each item of
/// `attachments` is a `Dataspace` (all of it, at the region's start) or a
/// `Dataspace.attach(at=..., offset=..., len=..., read_only=...)`. Each
/// dataspace is opened from its manager now and closed back to it when the
/// region is closed (what the region wrote is written back first: an
/// attached dataspace outlives the region); a fault is served by the
/// dataspace attached where it falls, pages between attachments read as
/// zero. The region ends with its last attachment and is writable unless
/// its attachments are read-only. `budget`, `policy` and the keyword
/// options as `map_anon`'s. Raises `MapError` (errno EBUSY for a
/// dataspace mapped already, here or in another process; EINVAL for
/// overlapping attachments or ones beyond their dataspace).
#[pyfunction]
#[pyo3(signature = (attachments, budget, policy = None, *,
    fault_around_pages = 0, readahead_max_pages = 0, handler_threads = 0, swap_dir = None,
    faulting_thread = false, zero_around_max_pages = 0, pool = None, fault_limit = 0,
    fault_period_us = 0, min_frames = 0, cpu_reserve = 0.0, daemon = None))]
#[allow(clippy::too_many_arguments)]
pub fn map_dataspaces<'py>(
    py: Python<'py>,
    attachments: &Bound<'py, PyAny>,
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
    let mut list = Vec::new();
    let mut names = Vec::new();
    for item in attachments.try_iter()? {
        let (a, name) = attachment(&item?)?;
        list.push(a);
        names.push(name);
    }
    if list.is_empty() {
        return Err(map_refused(py, "attachments: no dataspace to map"));
    }
    let readonly = list
        .iter()
        .all(|a| a.access == pagepilot_dataspace::Access::ReadOnly);
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
        Backing::Dataspaces(list),
        budget_bytes,
        &spec,
    ))?;
    map(py, ro, readonly, Origin::Dataspaces(names.join(" + ")))
}
