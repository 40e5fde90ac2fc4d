//! The Python exception classes and how Rust errors become them. Messages
//! are the pager's own with their causes ([`chain`]), the ones the C API
//! writes into its `err` buffer; `errno` is the pager's errors' own
//! (`errno()`), the one the C API sets.

use pagepilot_policy::chain;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::size::SizeError;

pyo3::create_exception!(
    pagepilot,
    PagepilotError,
    PyException,
    "Base class of every error pagepilot raises."
);
pyo3::create_exception!(
    pagepilot,
    MapError,
    PagepilotError,
    "A region could not be mapped (missing file, unknown policy, budget below a page, \
     a bad option, no userfaultfd); nothing was mapped. `errno` as the C API's `pp_map*` set: \
     the system's when it said why, EINVAL for a bad argument."
);
pyo3::create_exception!(
    pagepilot,
    FlushError,
    PagepilotError,
    "Dirty pages could not be written back; they stay in memory and dirty. \
     `pages` lists (page, errno) of the pages that failed."
);
pyo3::create_exception!(
    pagepilot,
    ClosedError,
    PagepilotError,
    "The region (or pool) was closed: it cannot be used any more."
);
pyo3::create_exception!(
    pagepilot,
    PolicyError,
    PagepilotError,
    "A policy program that does not compile or that the checker rejects; \
     `line` and `column` locate a syntax error (None for the checker's)."
);
pyo3::create_exception!(
    pagepilot,
    PoolError,
    PagepilotError,
    "A frame pool could not be made."
);
pyo3::create_exception!(
    pagepilot,
    DaemonError,
    PagepilotError,
    "The pagepilot daemon could not be reached or refused; `errno` as the C API's `pp_connect`."
);
pyo3::create_exception!(
    pagepilot,
    TraceError,
    PagepilotError,
    "A trace could not be read (missing, undetected format, malformed at a line)."
);
pyo3::create_exception!(
    pagepilot,
    SimulationError,
    PagepilotError,
    "The simulator refused its arguments (unknown policy, no frames)."
);

pyo3::create_exception!(
    pagepilot,
    DataspaceError,
    PagepilotError,
    "A dataspace manager refused an operation (create, delete, open, transfer, copy) or \
     could not reach its store; nothing changed. `errno` as the C API's \
     `pp_delete_persistent` answers (ENOENT: no such dataspace, EEXIST, EBUSY: open or \
     mapped, ENOTSUP: not offered by the manager, EINVAL: a bad name or argument, the \
     system's otherwise); `manager` names the manager."
);
pyo3::create_exception!(
    pagepilot,
    PinError,
    PagepilotError,
    "Pages could not be pinned or unpinned; nothing changed. `errno` as the C API's \
     `pp_pin`/`pp_unpin` return it negated (EINVAL: outside the region or not pinned, \
     ENOMEM: past the budget less one frame, EIO: unreadable, EDQUOT: the daemon's quota)."
);

/// A `ValueError` naming the bad size.
pub fn size_error(e: SizeError) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(e.to_string())
}

/// A `MapError` from the pager's, with the errno `pp_map*` sets.
pub fn map_error(py: Python<'_>, e: &pagepilot_pager::MapError) -> PyErr {
    let err = MapError::new_err(chain(e).to_string());
    set_attr(py, &err, "errno", e.errno());
    err
}

/// A `MapError` for a refusal found before the pager was asked: a bad
/// argument, so `errno` is EINVAL (as `pp_map*` sets it).
pub fn map_refused(py: Python<'_>, message: impl Into<String>) -> PyErr {
    /// EINVAL on Linux.
    const EINVAL: i32 = 22;
    let err = MapError::new_err(message.into());
    set_attr(py, &err, "errno", EINVAL);
    err
}

/// A `FlushError` from the pager's, listing the failed pages.
pub fn flush_error(py: Python<'_>, e: &pagepilot_pager::FlushError) -> PyErr {
    let err = FlushError::new_err(chain(e).to_string());
    let pages: Vec<(u32, i32)> = match e {
        pagepilot_pager::FlushError::WriteBack { pages } => {
            pages.iter().map(|p| (p.page, p.errno)).collect()
        }
        pagepilot_pager::FlushError::Sync(_) => Vec::new(),
    };
    set_attr(py, &err, "pages", pages);
    set_attr(py, &err, "errno", e.errno());
    err
}

/// A `DaemonError` with the errno the C API's `pp_connect` returns.
pub fn daemon_error(py: Python<'_>, e: &pagepilot_pager::DaemonError) -> PyErr {
    let err = DaemonError::new_err(chain(e).to_string());
    set_attr(py, &err, "errno", e.errno());
    err
}

/// A `DataspaceError` of manager `manager` with `errno` and `message`.
pub fn dataspace_error(py: Python<'_>, manager: &str, errno: i32, message: String) -> PyErr {
    let err = DataspaceError::new_err(message);
    set_attr(py, &err, "errno", errno);
    set_attr(py, &err, "manager", manager);
    err
}

/// A `PinError` from the pager's, with the errno `pp_pin` returns.
pub fn pin_error(py: Python<'_>, e: &pagepilot_pager::PinError) -> PyErr {
    let err = PinError::new_err(chain(e).to_string());
    set_attr(py, &err, "errno", e.errno());
    err
}

/// A `PolicyError` at a source position (or none, for the checker's).
pub fn policy_error(py: Python<'_>, message: String, at: Option<(u32, u32)>) -> PyErr {
    let err = PolicyError::new_err(message);
    set_attr(py, &err, "line", at.map(|a| a.0));
    set_attr(py, &err, "column", at.map(|a| a.1));
    err
}

/// Why a region could not be shared with another process (pickling): a
/// write-back that failed is a `FlushError`, anything else a
/// `PagepilotError` with the pager's reason.
pub fn share_error(py: Python<'_>, e: &pagepilot_pager::ShareError) -> PyErr {
    match e {
        pagepilot_pager::ShareError::WriteBack(f) => flush_error(py, f),
        other => PagepilotError::new_err(format!(
            "the region cannot be shared with another process: {}",
            chain(other)
        )),
    }
}

/// A `MapError` for another process's region that could not be mapped
/// here (unpickling), with `errno`.
pub fn handle_error(py: Python<'_>, e: &pagepilot_pager::HandleError) -> PyErr {
    let err = MapError::new_err(chain(e).to_string());
    set_attr(py, &err, "errno", e.errno());
    err
}

/// The `PagepilotError` of an operation a region unpickled from another
/// process does not have.
pub fn not_paged(e: &crate::mapping::NotPaged) -> PyErr {
    PagepilotError::new_err(e.to_string())
}

/// The `ClosedError` of an object used after `close()`.
pub fn closed(what: &str) -> PyErr {
    ClosedError::new_err(format!("{what} is closed"))
}

/// Sets an attribute of the exception instance (best effort: an exception
/// that cannot take it still carries its message).
fn set_attr<'py, T: IntoPyObject<'py>>(py: Python<'py>, err: &PyErr, name: &str, value: T) {
    let _ = err.value(py).setattr(name, value);
}

/// The exception classes, to add to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PagepilotError", py.get_type::<PagepilotError>())?;
    m.add("MapError", py.get_type::<MapError>())?;
    m.add("FlushError", py.get_type::<FlushError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("PoolError", py.get_type::<PoolError>())?;
    m.add("DaemonError", py.get_type::<DaemonError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    m.add("DataspaceError", py.get_type::<DataspaceError>())?;
    m.add("PinError", py.get_type::<PinError>())?;
    Ok(())
}
