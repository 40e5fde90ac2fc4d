//! The errno of each dataspace operation's error, as the C API gives them
//! (`pp_map_persistent`, `pp_delete_persistent`: ENOENT for no such
//! dataspace, EEXIST, EBUSY for an open one, ENOTSUP for an operation the
//! manager does not offer, EINVAL for a bad name or argument, the system's
//! errno where it said why), and the `DataspaceError` made of one.

use std::io;

use pagepilot_dataspace::{
    CopyError, CreateError, DeleteError, IdentifyError, OpenError, TransferError,
};
use pagepilot_policy::chain;
use pyo3::prelude::*;

use crate::errors::dataspace_error;

/// An error of a dataspace operation, with the errno a C caller gets.
pub trait Errno: std::error::Error {
    /// The errno.
    fn errno(&self) -> i32;
}

/// The system's errno of an I/O error, else the nearest to its kind (the
/// far manager's errors carry no errno: a timeout, a refused connection).
pub fn io_errno(e: &io::Error) -> i32 {
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        io::ErrorKind::TimedOut => libc::ETIMEDOUT,
        io::ErrorKind::ConnectionRefused => libc::ECONNREFUSED,
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset => libc::ECONNABORTED,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        io::ErrorKind::NotFound => libc::ENOENT,
        io::ErrorKind::PermissionDenied => libc::EACCES,
        _ => libc::EIO,
    }
}

impl Errno for IdentifyError {
    fn errno(&self) -> i32 {
        match self {
            IdentifyError::Unsupported(_) => libc::ENOTSUP,
            IdentifyError::NoSuch(_) => libc::ENOENT,
            IdentifyError::Io { source, .. } => io_errno(source),
            IdentifyError::Corrupt(_) => libc::EIO,
            _ => libc::EINVAL,
        }
    }
}

impl Errno for OpenError {
    fn errno(&self) -> i32 {
        match self {
            OpenError::Unsupported(_) => libc::ENOTSUP,
            OpenError::NoSuch(_) => libc::ENOENT,
            OpenError::Busy(_) => libc::EBUSY,
            OpenError::ReadOnly(_) => libc::EACCES,
            OpenError::Io { source, .. } => io_errno(source),
            OpenError::Corrupt(_) => libc::EIO,
            _ => libc::EINVAL,
        }
    }
}

impl Errno for CreateError {
    fn errno(&self) -> i32 {
        match self {
            CreateError::Unsupported(_) => libc::ENOTSUP,
            CreateError::Exists(_) => libc::EEXIST,
            CreateError::Io { source, .. } => io_errno(source),
            _ => libc::EINVAL,
        }
    }
}

impl Errno for DeleteError {
    fn errno(&self) -> i32 {
        match self {
            DeleteError::Unsupported(_) => libc::ENOTSUP,
            DeleteError::NoSuch(_) => libc::ENOENT,
            DeleteError::Open(_) => libc::EBUSY,
            DeleteError::Io { source, .. } => io_errno(source),
            _ => libc::EINVAL,
        }
    }
}

impl Errno for CopyError {
    fn errno(&self) -> i32 {
        match self {
            CopyError::Unsupported(_) => libc::ENOTSUP,
            CopyError::NoSuch(_) => libc::ENOENT,
            CopyError::Create(c) => c.errno(),
            CopyError::Open { source, .. } => source.errno(),
            CopyError::Busy { .. } => libc::EBUSY,
            CopyError::TooDeep { .. } => libc::ELOOP,
            CopyError::Io { source, .. } => io_errno(source),
            CopyError::Corrupt(_) => libc::EIO,
            _ => libc::EINVAL,
        }
    }
}

impl Errno for TransferError {
    fn errno(&self) -> i32 {
        match self {
            TransferError::Unsupported(_) => libc::ENOTSUP,
            TransferError::NoSuch(_) => libc::ENOENT,
            TransferError::Cycle { .. } | TransferError::TooDeep { .. } => libc::ELOOP,
            TransferError::Open { source, .. } => source.errno(),
            TransferError::Io { source, .. } => io_errno(source),
            TransferError::Quota { .. } => libc::EDQUOT,
            _ => libc::EINVAL,
        }
    }
}

/// The `DataspaceError` of `manager`'s refusal `e` of operation `op` (its
/// message: "`op`: the manager's message: its causes").
pub fn refused<E: Errno>(py: Python<'_>, manager: &str, op: &str, e: &E) -> PyErr {
    dataspace_error(py, manager, e.errno(), format!("{op}: {}", chain(e)))
}
