//! `Region.array()`: a numpy array viewing a region's memory without a
//! copy, as `numpy.memmap` views a file: `numpy.frombuffer` over the
//! region's buffer (one export, which keeps the memory mapped while the
//! array lives), reshaped.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// `dtype` items (None: bytes) of `region` (`len` bytes, exporting the
/// buffer protocol) from byte `offset`, in `shape` (an int or a tuple;
/// None: as many items as fit), in `order`.
pub fn view<'py>(
    region: &Bound<'py, PyAny>,
    len: usize,
    dtype: Option<&Bound<'py, PyAny>>,
    shape: Option<&Bound<'py, PyAny>>,
    offset: Option<&Bound<'py, PyAny>>,
    order: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let py = region.py();
    let offset = offset.map_or(Ok(0), |o| crate::args::size(o, "offset"))?;
    let np = py.import("numpy")?;
    let dtype = np.call_method1(
        "dtype",
        (dtype.map_or_else(
            || "uint8".into_pyobject(py).map(Bound::into_any),
            |d| Ok(d.clone()),
        )?,),
    )?;
    let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
    if itemsize == 0 {
        return Err(PyValueError::new_err(
            "dtype: items of zero bytes cannot view a region",
        ));
    }
    if offset > len {
        return Err(PyValueError::new_err(format!(
            "offset: {offset} is beyond the region's {len} bytes"
        )));
    }
    let dims: Vec<usize> = match shape {
        None => vec![(len - offset) / itemsize],
        Some(s) => match s.cast::<PyTuple>() {
            Ok(t) => t
                .iter()
                .map(|d| crate::args::size(&d, "shape"))
                .collect::<PyResult<_>>()?,
            Err(_) => vec![crate::args::size(s, "shape")?],
        },
    };
    let count = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n.checked_mul(itemsize).is_some_and(|b| b <= len - offset))
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "shape {dims:?} of {itemsize}-byte items from offset {offset} needs more than \
                 the region's {len} bytes"
            ))
        })?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", &dtype)?;
    kwargs.set_item("count", count)?;
    kwargs.set_item("offset", offset)?;
    let flat = np.call_method("frombuffer", (region,), Some(&kwargs))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("order", order)?;
    flat.call_method("reshape", (PyTuple::new(py, &dims)?,), Some(&kwargs))
}
