//! The Python bindings of pagepilot: the extension module
//! `pagepilot._pagepilot`, which the pure-Python package `pagepilot`
//! (`python/pagepilot/__init__.py`) re-exports with the pandas conversion
//! and the documentation. See `docs/python.md`.
//!
//! Every entry point returns a `PyResult`: pagepilot's typed errors become
//! the exception classes of [`errors`], with the C API's messages; a panic
//! becomes PyO3's `PanicException` (no panic unwinds into Python's C code).
//! Calls that may block (mapping, flushing, simulating) release the GIL.

mod args;
mod array;
mod attach;
mod dataspace;
mod dataspace_errors;
mod errors;
mod evictions;
mod far;
mod managers;
mod map;
mod mapping;
mod multiprogram;
mod pickle;
mod pins;
mod policy;
mod pool;
mod region;
mod simulate;
mod size;

use pyo3::prelude::*;

/// Parses a size: an int, or a string with a unit ("40MB", "1.5GiB"; every
/// unit a power of 1024). `what` names the argument in the error.
#[pyfunction]
#[pyo3(signature = (size, what = "size"))]
fn parse_size(size: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    // `args::size` names the argument with a static string.
    let what: &'static str = match what {
        "budget" => "budget",
        "len" => "len",
        _ => "size",
    };
    args::size(size, what)
}

/// The module `pagepilot._pagepilot`.
#[pymodule]
fn _pagepilot(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<region::PyRegion>()?;
    m.add_class::<pool::PyPool>()?;
    m.add_class::<pool::PyClient>()?;
    m.add_class::<policy::Policy>()?;
    m.add_class::<managers::PyManager>()?;
    m.add_class::<managers::PyPersistentManager>()?;
    m.add_class::<managers::PyCompressedManager>()?;
    m.add_class::<managers::PyLazyCopyManager>()?;
    m.add_class::<managers::PyAnonymousManager>()?;
    m.add_class::<managers::PyFileManager>()?;
    m.add_class::<managers::PyPinnedManager>()?;
    m.add_class::<far::PyFarManager>()?;
    m.add_class::<dataspace::PyDataspace>()?;
    m.add_class::<dataspace::PyAttachment>()?;
    m.add_class::<evictions::PyEviction>()?;
    m.add_function(wrap_pyfunction!(map::map_file, m)?)?;
    m.add_function(wrap_pyfunction!(map::map_anon, m)?)?;
    m.add_function(wrap_pyfunction!(attach::map_dataspaces, m)?)?;
    m.add_function(wrap_pyfunction!(pickle::remap, m)?)?;
    m.add_function(wrap_pyfunction!(pickle::open_shared, m)?)?;
    m.add_function(wrap_pyfunction!(pool::connect, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::curve, m)?)?;
    m.add_function(wrap_pyfunction!(multiprogram::simulate_global, m)?)?;
    m.add_function(wrap_pyfunction!(multiprogram::simulate_pooled, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add("PAGE_SIZE", pagepilot_pager::PAGE_SIZE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
