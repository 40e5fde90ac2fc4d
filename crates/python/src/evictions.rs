//! Eviction notifications: `Region.subscribe_evictions` and
//! `Region.drain_evictions` (the C API's `pp_subscribe_evictions` and
//! `pp_drain_evictions`), and `pagepilot.Eviction`, one page evicted.

use pagepilot_pager::Eviction;
use pyo3::prelude::*;

use crate::errors::not_paged;
use crate::region::PyRegion;

/// One page a region evicted: its byte `offset` in the region, whether it
/// was `referenced` (accessed since the policy last cleared its bit) and
/// `modified` (written back before its frame was freed).
#[pyclass(name = "Eviction", module = "pagepilot", frozen)]
pub struct PyEviction {
    event: Eviction,
}

#[pymethods]
impl PyEviction {
    /// The page's byte offset in the region.
    #[getter]
    fn offset(&self) -> u64 {
        self.event.offset
    }

    /// Whether the page was referenced since its bit was last cleared.
    #[getter]
    fn referenced(&self) -> bool {
        self.event.referenced
    }

    /// Whether it was modified: written back before its frame was freed.
    #[getter]
    fn modified(&self) -> bool {
        self.event.modified
    }

    fn __repr__(&self) -> String {
        format!(
            "<pagepilot.Eviction offset {}{}{}>",
            self.event.offset,
            if self.event.referenced {
                ", referenced"
            } else {
                ""
            },
            if self.event.modified {
                ", modified"
            } else {
                ""
            }
        )
    }
}

/// Turns notifications on with a queue of `capacity` events (0: off).
pub fn subscribe(region: &PyRegion, py: Python<'_>, capacity: usize) -> PyResult<()> {
    region
        .with_open(py, |m| {
            m.paged("subscribe_evictions")
                .map(|r| r.subscribe_evictions(capacity))
        })?
        .map_err(|e| not_paged(&e))
}

/// Moves up to `max` (None: all) queued events, oldest first, out of the
/// queue.
pub fn drain(region: &PyRegion, py: Python<'_>, max: Option<usize>) -> PyResult<Vec<PyEviction>> {
    let events = region
        .with_open(py, |m| {
            m.paged("drain_evictions").map(|r| {
                let mut out = Vec::new();
                r.drain_evictions_up_to(&mut out, max.unwrap_or(usize::MAX));
                out
            })
        })?
        .map_err(|e| not_paged(&e))?;
    Ok(events
        .into_iter()
        .map(|event| PyEviction { event })
        .collect())
}
