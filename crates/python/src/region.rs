//! `pagepilot.Region`: a mapped region as a Python object exporting its
//! memory through the buffer protocol.
//!
//! Lifetime rule (the invariant every exported view relies on): the
//! region's memory stays mapped while any buffer view of it exists.
//! `close()` writes the dirty pages back and marks the object closed at
//! once (every method, and every new view, then raises `ClosedError`), but
//! the unmapping waits for the last view to be released: views taken
//! before `close()` (numpy arrays) keep working, and their pages keep being
//! served, until they go. Each view holds a reference to the object
//! (`Py_buffer.obj`), so the object itself outlives its views. The rule
//! is the same whatever the object maps (`mapping`): a region paged here,
//! or another process's region unpickled here (`pickle`).

use std::ffi::{c_int, c_void, CString};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use pagepilot_pager::{Region, ShareHandle, SharedMapping};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::{closed, flush_error, not_paged};
use crate::mapping::Mapping;

/// What changes over the object's life, under one lock.
struct State {
    /// The memory; `None` once unmapped.
    region: Option<Mapping>,
    /// Buffer views exported and not released yet.
    exports: usize,
    /// Whether `close()` was called.
    closed: bool,
}

/// Where the object's memory comes from.
pub enum Origin {
    /// Anonymous memory mapped here.
    Anonymous,
    /// A file mapped here (`map_file`, or a read-only region unpickled).
    File(Reopen),
    /// Another process's writable file region, unpickled here: the kernel's
    /// mapping of its file, opened from the handle that process gave.
    Shared(ShareHandle),
    /// Dataspaces attached (`map_dataspaces`): what `repr` says of them.
    Dataspaces(String),
}

/// How to map a file region again in another process (pickling a
/// read-only region: see `pickle`).
pub struct Reopen {
    /// The backing file.
    pub path: PathBuf,
    /// The budget in bytes.
    pub budget: usize,
    /// The policy as given (a string or a `Policy`).
    pub policy: Py<PyAny>,
    /// Whether the mapping is writable.
    pub writable: bool,
    /// The length mapped, if not the whole file.
    pub len: Option<usize>,
}

/// A mapped region: `len(region)` bytes paged under a frame budget by the
/// policy of the caller's choice. It supports the buffer protocol
/// (`memoryview(region)`, `numpy.frombuffer(region, dtype)`, zero copy),
/// `region.array(dtype, shape, offset)`, `flush()`, `stats()`, `close()`
/// and `with` (which closes it). A read-only file region exports read-only
/// buffers. Made by `pagepilot.map_file` and `pagepilot.map_anon`. A file
/// region pickles (for `multiprocessing`'s spawn and forkserver): a
/// writable one unpickles as the kernel's `MAP_SHARED` mapping of the file,
/// coherent with the original both ways while it lives (`stats()` then says
/// `shared`); see `__reduce__`.
#[pyclass(name = "Region", module = "pagepilot", frozen)]
pub struct PyRegion {
    state: Mutex<State>,
    /// The first byte (fixed for the region's life).
    addr: usize,
    /// Bytes mapped.
    len: usize,
    /// Whether buffers are exported read-only.
    readonly: bool,
    /// Where the memory comes from, for `path`, `repr` and pickling.
    origin: Origin,
    /// The policy spec, for `repr`.
    policy: String,
}

impl PyRegion {
    /// Wraps a region just mapped (`origin` is not `Shared`).
    pub fn new(region: Region, readonly: bool, policy: String, origin: Origin) -> Self {
        Self::wrap(Mapping::Paged(region), readonly, policy, origin)
    }

    /// Wraps another process's region opened from its `handle`; `policy`
    /// is the spec it is paged by there.
    pub fn shared(mapping: SharedMapping, handle: ShareHandle, policy: String) -> Self {
        let readonly = !mapping.writable();
        Self::wrap(
            Mapping::Shared(mapping),
            readonly,
            policy,
            Origin::Shared(handle),
        )
    }

    fn wrap(mapping: Mapping, readonly: bool, policy: String, origin: Origin) -> Self {
        PyRegion {
            addr: mapping.addr(),
            len: mapping.len(),
            readonly,
            state: Mutex::new(State {
                region: Some(mapping),
                exports: 0,
                closed: false,
            }),
            origin,
            policy,
        }
    }

    /// Where the memory comes from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The policy spec (as `repr` shows it).
    pub fn policy_spec(&self) -> &str {
        &self.policy
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the open region without the GIL (it may block on I/O),
    /// or raises `ClosedError`.
    pub fn with_open<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Mapping) -> T + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut g = self.lock();
            if g.closed {
                return None;
            }
            g.region.as_mut().map(f)
        })
        .ok_or_else(|| closed("the region"))
    }

    /// Raises `ClosedError` once closed.
    fn check_open(&self) -> PyResult<()> {
        if self.lock().closed {
            Err(closed("the region"))
        } else {
            Ok(())
        }
    }
}

#[pymethods]
impl PyRegion {
    /// The region's length in bytes.
    fn __len__(&self) -> PyResult<usize> {
        self.check_open()?;
        Ok(self.len)
    }

    /// The address of the region's first byte (for ctypes and C code).
    #[getter]
    fn address(&self) -> PyResult<usize> {
        self.check_open()?;
        Ok(self.addr)
    }

    /// Whether the region can be written through its buffers.
    #[getter]
    fn writable(&self) -> bool {
        !self.readonly
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().closed
    }

    /// The backing file (None for anonymous memory).
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        match &self.origin {
            Origin::Anonymous | Origin::Dataspaces(_) => None,
            Origin::File(r) => Some(r.path.clone()),
            Origin::Shared(h) => Some(h.path.clone()),
        }
    }

    /// The policy spec the region runs.
    #[getter]
    fn policy(&self) -> String {
        self.policy.clone()
    }

    /// Buffer views of the region not released yet.
    #[getter]
    fn exports(&self) -> usize {
        self.lock().exports
    }

    /// Writes back every dirty page, then syncs the backing file (msync; a
    /// region unpickled from another process: msync of its mapping).
    /// Releases the GIL while it runs. Raises `FlushError` (the pages stay
    /// in memory and dirty) or `ClosedError`.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with_open(py, |r| r.flush())?
            .map_err(|e| flush_error(py, &e))
    }

    /// Writes back every dirty page, then drops every clean page from memory
    /// (msync's MS_INVALIDATE): the next access reads the file again and sees
    /// what other processes wrote to it. (A region unpickled from another
    /// process is the page cache's own mapping: it sees every store already.)
    fn invalidate(&self, py: Python<'_>) -> PyResult<()> {
        self.with_open(py, |r| r.invalidate())?
            .map_err(|e| flush_error(py, &e))
    }

    /// Maps `[offset, offset + length)` now (writable with `write=True`),
    /// so that system calls find it mapped. A region unpickled from another
    /// process has nothing to prefault (the kernel's mapping of the file):
    /// the range is checked, nothing else done.
    #[pyo3(signature = (offset, length, write = false))]
    fn prefault(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
        write: bool,
    ) -> PyResult<()> {
        let offset = crate::args::size(offset, "offset")?;
        let length = crate::args::size(length, "length")?;
        let len = self.len;
        self.with_open(py, |m| match m {
            Mapping::Paged(r) => r.prefault(offset, length, write).map_err(|e| e.to_string()),
            Mapping::Shared(_) => match offset.checked_add(length) {
                Some(end) if end <= len => Ok(()),
                _ => Err(format!(
                    "prefault: {length} bytes from offset {offset} exceed the region's {len} bytes"
                )),
            },
        })?
        .map_err(PyValueError::new_err)
    }

    /// Changes the frame budget (int or string with a unit, at least one
    /// page): a smaller one reclaims frames at once, writing back dirty pages.
    /// A region unpickled from another process has no budget here: raises
    /// `PagepilotError`.
    fn set_budget(&self, py: Python<'_>, budget: &Bound<'_, PyAny>) -> PyResult<()> {
        let budget = crate::args::size(budget, "budget")?;
        if budget < pagepilot_pager::PAGE_SIZE {
            return Err(crate::errors::map_refused(
                py,
                format!(
                    "budget of {budget} bytes is smaller than one page ({} bytes)",
                    pagepilot_pager::PAGE_SIZE
                ),
            ));
        }
        match self.with_open(py, |m| m.paged("set_budget").map(|r| r.set_budget(budget)))? {
            Ok(set) => set.map_err(|e| flush_error(py, &e)),
            Err(e) => Err(not_paged(&e)),
        }
    }

    /// The region's statistics as a dict (what the C API's `pp_stats_json`
    /// reports: faults, evictions, pages read and written, latencies, ...).
    /// A region unpickled from another process reports `shared` (True),
    /// `len` and `writable` only: it is paged by that process.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = self.with_open(py, |r| r.stats_json())?;
        py.import("json")?.call_method1("loads", (json,))
    }

    /// Pins every page `[offset, offset + length)` touches: brought in now
    /// (the GIL released), never evicted until `unpin` (pins do not nest).
    /// Nothing is pinned on failure: `PinError` with errno EINVAL (outside
    /// the region), ENOMEM (the pins would pass the budget less one frame)
    /// or EIO (a page cannot be read).
    fn pin(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        crate::pins::pin(self, py, offset, length, true)
    }

    /// Unpins every page `[offset, offset + length)` touches: the policy
    /// may evict them again. `PinError` (EINVAL) for a range outside the
    /// region or a page in it not pinned; then nothing is unpinned.
    fn unpin(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        crate::pins::pin(self, py, offset, length, false)
    }

    /// Turns eviction notifications on: every page the region evicts from
    /// now on is queued as an `Eviction` for `drain_evictions`. At most
    /// `capacity` are kept: beyond, the oldest are dropped and counted
    /// (`stats()["evictions_lost"]`); 0 turns notifications off.
    #[pyo3(signature = (capacity = 4096))]
    fn subscribe_evictions(&self, py: Python<'_>, capacity: usize) -> PyResult<()> {
        crate::evictions::subscribe(self, py, capacity)
    }

    /// Takes the queued evictions, oldest first (at most `max`; None: all).
    #[pyo3(signature = (max = None))]
    fn drain_evictions(
        &self,
        py: Python<'_>,
        max: Option<usize>,
    ) -> PyResult<Vec<crate::evictions::PyEviction>> {
        crate::evictions::drain(self, py, max)
    }

    /// A numpy array viewing the region (no copy), like `numpy.memmap`:
    /// `dtype` items from byte `offset`, in `shape` (an int or a tuple; None:
    /// as many items as fit). Read-only for a read-only region.
    #[pyo3(signature = (dtype = None, shape = None, offset = None, order = "C"))]
    fn array<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        shape: Option<&Bound<'py, PyAny>>,
        offset: Option<&Bound<'py, PyAny>>,
        order: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.get().check_open()?;
        crate::array::view(slf.as_any(), slf.get().len, dtype, shape, offset, order)
    }

    /// Writes back every dirty page and unmaps the region. Views exported
    /// before (numpy arrays, memoryviews) keep the memory mapped until they
    /// are released; the region object itself raises `ClosedError` from
    /// now on. A second `close()` does nothing. If the write-back fails the
    /// region stays open and mapped with its dirty data (as `pp_unmap`), and
    /// `FlushError` is raised.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let outcome = py.detach(|| {
            let mut g = self.lock();
            if g.closed {
                return Ok(());
            }
            if let Some(r) = g.region.as_ref() {
                r.flush()?;
            }
            g.closed = true;
            if g.exports == 0 {
                if let Some(region) = g.region.take() {
                    drop(g);
                    return region.unmap();
                }
            }
            Ok(())
        });
        outcome.map_err(|e| flush_error(py, &e))
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().check_open()?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.lock().closed { "closed " } else { "" };
        let what = match &self.origin {
            Origin::File(r) => format!("file {:?}", r.path.display().to_string()),
            Origin::Shared(h) => format!(
                "file {:?} shared by another process",
                h.path.display().to_string()
            ),
            Origin::Anonymous => "anonymous".into(),
            Origin::Dataspaces(what) => what.clone(),
        };
        format!(
            "<pagepilot.Region {state}{what}, {} bytes at {:#x}, policy {:?}{}>",
            self.len,
            self.addr,
            self.policy,
            if self.readonly { ", read-only" } else { "" }
        )
    }

    /// Pickling (`multiprocessing`'s spawn and forkserver). A writable file
    /// region is shared now (its dirty pages written back, its view made the
    /// kernel's `MAP_SHARED` mapping of the file) and unpickles as that file
    /// mapped `MAP_SHARED`: each process sees the other's stores, with no
    /// flush, until the unpickled region is closed (or its process ends);
    /// then this one is paged again. Load a pickle once. A read-only region
    /// unpickles as the file mapped again, paged under the same budget and
    /// policy: neither side stores through it, so there is nothing to keep
    /// coherent, and the worker keeps its budget and policy. An anonymous
    /// region, or one unpickled from another process, raises `TypeError`.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        crate::pickle::reduce(self, py)
    }

    /// Exports the region's memory (the buffer protocol).
    ///
    /// # Safety
    /// Called by Python with a `Py_buffer` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("the buffer view is NULL"));
        }
        let owner = slf.clone().into_any();
        let me = slf.get();
        if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE && me.readonly {
            return Err(PyBufferError::new_err(
                "the region is read-only (map the file with writable=True to write it)",
            ));
        }
        {
            let mut g = me.lock();
            if g.closed || g.region.is_none() {
                return Err(closed("the region"));
            }
            g.exports += 1;
        }
        let format = if (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT {
            CString::from(c"B").into_raw()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `view` is non-NULL and Python hands it to be filled. The
        // memory at `addr` stays mapped for `len` bytes while the view
        // lives: the export counted above defers the unmapping (`close`,
        // `__releasebuffer__`), and `obj` holds a reference that keeps this
        // object (and its region) alive until the view is released. `shape`
        // and `strides` point into the view itself, which outlives their use.
        unsafe {
            (*view).obj = owner.into_ptr();
            (*view).buf = me.addr as *mut c_void;
            (*view).len = me.len as isize;
            (*view).readonly = c_int::from(me.readonly);
            (*view).itemsize = 1;
            (*view).format = format;
            (*view).ndim = 1;
            (*view).shape = if (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    /// Releases an exported view; the last one of a closed region unmaps it.
    ///
    /// # Safety
    /// Called by Python with a view `__getbuffer__` filled.
    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: a view this object filled: `format` is NULL or came from
        // `CString::into_raw` above, and is freed once here.
        unsafe {
            if !view.is_null() && !(*view).format.is_null() {
                drop(CString::from_raw((*view).format));
                (*view).format = std::ptr::null_mut();
            }
        }
        let mut g = self.lock();
        g.exports = g.exports.saturating_sub(1);
        if g.closed && g.exports == 0 {
            if let Some(region) = g.region.take() {
                drop(g);
                // Written back by close(); what lingering views wrote since
                // is written back here, an error printed (nowhere to raise).
                if let Err(e) = region.unmap() {
                    eprintln!(
                        "pagepilot: region unmapped after its last view with unwritten pages: {e}"
                    );
                }
            }
        }
    }
}
