//! `Region.pin` and `Region.unpin`: the pager's pinned pages (the Cache
//! Kernel's locked mappings), as the C API's `pp_pin` and `pp_unpin`.

use pyo3::prelude::*;

use crate::args;
use crate::errors::{not_paged, pin_error};
use crate::region::PyRegion;

/// Pins (`pin` true) or unpins every page `[offset, offset + length)`
/// touches of `region`, the GIL released (pinning reads pages in). Raises
/// `PinError` with the errno `pp_pin` returns, `ClosedError`, or (a region
/// unpickled from another process) `PagepilotError`.
pub fn pin(
    region: &PyRegion,
    py: Python<'_>,
    offset: &Bound<'_, PyAny>,
    length: &Bound<'_, PyAny>,
    pin: bool,
) -> PyResult<()> {
    let offset = args::size(offset, "offset")?;
    let length = args::size(length, "length")?;
    let op = if pin { "pin" } else { "unpin" };
    let done = region.with_open(py, |m| {
        m.paged(op).map(|r| {
            if pin {
                r.pin(offset, length)
            } else {
                r.unpin(offset, length)
            }
        })
    })?;
    match done {
        Ok(result) => result.map_err(|e| pin_error(py, &e)),
        Err(e) => Err(not_paged(&e)),
    }
}
