//! Converting Python arguments: sizes, paths and policies.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

use crate::errors::size_error;
use crate::policy::Policy;
use crate::size::parse_size;

/// A size argument: a non-negative int, or a string with a unit (`"40MB"`).
pub fn size(obj: &Bound<'_, PyAny>, what: &'static str) -> PyResult<usize> {
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected a size (int or a string such as \"40MB\"), got a bool"
        )));
    }
    if obj.is_instance_of::<PyInt>() {
        let n: i128 = obj.extract()?;
        return usize::try_from(n)
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{what}: {n} is not a size (negative, or beyond the address space)"
                ))
            });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return parse_size(s.to_str()?, what).map_err(size_error);
    }
    // numpy integers and anything else with __index__.
    if obj.hasattr("__index__")? {
        let n = obj.call_method0("__index__")?;
        return size(&n, what);
    }
    Err(PyTypeError::new_err(format!(
        "{what}: expected a size (int or a string such as \"40MB\"), got {}",
        obj.get_type().name()?
    )))
}

/// A path argument: `str`, `bytes` or `os.PathLike`.
pub fn path(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PathBuf> {
    let fspath = obj
        .py()
        .import("os")?
        .call_method1("fspath", (obj,))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}: expected a path (str, bytes or os.PathLike), got {}",
                obj.get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |n| n.to_string())
            ))
        })?;
    if let Ok(s) = fspath.cast::<PyString>() {
        return Ok(PathBuf::from(s.to_str()?));
    }
    let bytes: Vec<u8> = fspath.extract()?;
    Ok(PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&bytes),
    ))
}

/// A policy argument: a spec string (`"mru"`, `"seq:L=20"`, a program
/// path) or a compiled [`Policy`]. Returns the spec the pager and the
/// simulator accept.
pub fn policy_spec(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(p) = obj.cast::<Policy>() {
        return Ok(p.get().spec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    if obj.hasattr("__fspath__")? {
        return Ok(path(obj, "policy")?.display().to_string());
    }
    Err(PyTypeError::new_err(format!(
        "policy: expected a policy name such as \"mru\", a program path or a pagepilot.Policy, got {}",
        obj.get_type().name()?
    )))
}
