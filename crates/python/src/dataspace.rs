//! `pagepilot.Dataspace` (a handle on one dataspace of a manager) and
//! `pagepilot.Attachment` (where a region attaches it), as the pager's
//! `Attachment` (`docs/dataspaces.md`, "The region map").

use std::sync::Arc;

use pagepilot_dataspace::{DataspaceId, Manager, ManagerKey};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args;
use crate::dataspace_errors::refused;
use crate::managers::{Kind, PyManager};

/// A dataspace of a manager: what `create`, `dataspace`, `copy` and
/// `transfer` return. `manager`, `id` (a name, path or number) and `size`
/// (bytes, when the handle was made); attach it to a region with
/// `map_dataspaces([dataspace, ...])` (all of it at the region's start) or
/// `map_dataspaces([dataspace.attach(at=..., offset=..., len=...), ...])`.
/// A handle does not keep the dataspace open: after `transfer` or
/// `delete` its manager no longer knows it.
#[pyclass(name = "Dataspace", module = "pagepilot", frozen)]
pub struct PyDataspace {
    manager: Py<PyManager>,
    arc: Arc<dyn Manager>,
    id: DataspaceId,
    len: u64,
}

impl PyDataspace {
    /// The handle of dataspace `id` (`len` bytes) of `manager`.
    pub fn new(manager: Py<PyManager>, id: DataspaceId, len: u64) -> Self {
        let arc = manager.get().manager();
        PyDataspace {
            manager,
            arc,
            id,
            len,
        }
    }

    /// Its id.
    pub fn dataspace_id(&self) -> &DataspaceId {
        &self.id
    }

    /// Its manager's key.
    pub fn manager_key(&self) -> ManagerKey {
        self.arc.key()
    }

    /// Its manager, as the pager attaches it.
    pub fn manager_arc(&self, _py: Python<'_>) -> Arc<dyn Manager> {
        self.arc.clone()
    }

    /// "dataspace ID of the NAME manager", for messages.
    pub fn describe(&self) -> String {
        format!("{} of the {} manager", self.id, self.arc.name())
    }

    fn kind(&self) -> &Kind {
        self.manager.get().kind()
    }
}

#[pymethods]
impl PyDataspace {
    /// Its manager.
    #[getter]
    fn manager(&self, py: Python<'_>) -> Py<PyManager> {
        self.manager.clone_ref(py)
    }

    /// Its id: a name (persistent, far), a path (file) or a number.
    #[getter]
    fn id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match &self.id {
            DataspaceId::Name(n) => n.clone().into_pyobject(py)?.into_any(),
            DataspaceId::Path(p) => p.clone().into_pyobject(py)?.into_any(),
            DataspaceId::Anonymous(n) => n.into_pyobject(py)?.into_any(),
        })
    }

    /// Its length in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.len
    }

    /// The managers it is served through, bottom first (e.g. `["persistent
    /// manager #3", "compressed manager #4"]`); empty once its manager no
    /// longer knows it.
    #[getter]
    fn stack(&self) -> Vec<String> {
        self.arc
            .stack(&self.id)
            .unwrap_or_default()
            .iter()
            .map(|k| k.to_string())
            .collect()
    }

    /// Hands the dataspace to manager `to`, which serves it from now on
    /// over this one (SawMill's stacking: a persistent dataspace under a
    /// compressed tier, a file under a lazy copy, anonymous memory under a
    /// pinned manager). Returns its handle under `to`; this handle's
    /// manager no longer serves it. Raises `DataspaceError` (ENOTSUP: `to`
    /// takes no dataspaces; ELOOP: a cycle or a stack too deep; EBUSY: it
    /// is open; EDQUOT: past a pinned manager's quota).
    fn transfer(&self, to: &Bound<'_, PyManager>) -> PyResult<PyDataspace> {
        let py = to.py();
        let target = to.get().manager();
        let (from, id) = (self.arc.clone(), self.id.clone());
        let new = py
            .detach(|| from.transfer(&id, target.as_ref()))
            .map_err(|e| {
                let op = format!("transferring {} to the {}", self.describe(), target.key());
                refused(py, from.name(), &op, &e)
            })?;
        PyManager::handle(to, new)
    }

    /// Deletes the dataspace (as `manager.delete(dataspace)`).
    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        let (m, id) = (self.arc.clone(), self.id.clone());
        py.detach(|| m.delete(&id))
            .map_err(|e| refused(py, m.name(), &format!("deleting {}", self.describe()), &e))
    }

    /// Counters of the dataspace as its manager reports them, in a dict
    /// with `size`: a compressed dataspace's `pages`, `zero_pages`,
    /// `dirty_pages`, `compressed_bytes`, `budget_bytes`, `pool_bytes`,
    /// `reads_kept`, `pages_written`, `evictions_to_lower`,
    /// `synced_to_lower`, `reads_from_tier`, `reads_from_lower`; a lazy
    /// copy's `reads_own`, `reads_source`, `pages_written`, `depth`; a far
    /// dataspace's manager's `round_trips` and `retries`; a pinned one's
    /// manager's `quota` and `pinned_bytes`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("size", self.len)?;
        match self.kind() {
            Kind::Compressed(m) => {
                if let Some(s) = m.stats(&self.id) {
                    d.set_item("pages", s.pages)?;
                    d.set_item("zero_pages", s.zero_pages)?;
                    d.set_item("dirty_pages", s.dirty_pages)?;
                    d.set_item("compressed_bytes", s.compressed_bytes)?;
                    d.set_item("budget_bytes", s.budget_bytes)?;
                    d.set_item("pool_bytes", s.pool_bytes)?;
                    d.set_item("reads_kept", s.reads_kept)?;
                    d.set_item("pages_written", s.pages_written)?;
                    d.set_item("evictions_to_lower", s.evictions_to_lower)?;
                    d.set_item("synced_to_lower", s.synced_to_lower)?;
                    d.set_item("reads_from_tier", s.reads_from_tier)?;
                    d.set_item("reads_from_lower", s.reads_from_lower)?;
                }
            }
            Kind::LazyCopy(m) => {
                if let Some(s) = m.stats(&self.id) {
                    d.set_item("reads_own", s.reads_own)?;
                    d.set_item("reads_source", s.reads_source)?;
                    d.set_item("pages_written", s.pages_written)?;
                    d.set_item("depth", s.depth)?;
                }
            }
            Kind::Far(m) => {
                d.set_item("round_trips", m.round_trips())?;
                d.set_item("retries", m.retries())?;
            }
            Kind::Pinned(m) => {
                d.set_item("quota", m.quota())?;
                d.set_item("pinned_bytes", m.pinned_bytes())?;
            }
            Kind::Persistent(_) | Kind::Anonymous(_) | Kind::File(_) => {}
        }
        Ok(d)
    }

    /// The dataspace's bytes `offset..offset+len` (None: to its end) at the
    /// region's byte `at`, read-write or `read_only`; offsets are whole
    /// pages. For `map_dataspaces`.
    #[pyo3(signature = (*, at = None, offset = None, len = None, read_only = false))]
    fn attach(
        slf: &Bound<'_, Self>,
        at: Option<&Bound<'_, PyAny>>,
        offset: Option<&Bound<'_, PyAny>>,
        len: Option<&Bound<'_, PyAny>>,
        read_only: bool,
    ) -> PyResult<PyAttachment> {
        let size = |o: Option<&Bound<'_, PyAny>>, what| o.map(|v| args::size(v, what)).transpose();
        Ok(PyAttachment {
            dataspace: slf.clone().unbind(),
            at: size(at, "at")?.unwrap_or(0),
            offset: size(offset, "offset")?.unwrap_or(0),
            len: size(len, "len")?,
            read_only,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<pagepilot.Dataspace {} of the {}, {} bytes>",
            self.id,
            self.arc.key(),
            self.len
        )
    }
}

/// Where a region attaches a dataspace (from `Dataspace.attach`): its
/// bytes `offset..offset+len` at the region's byte `at`.
#[pyclass(name = "Attachment", module = "pagepilot", frozen)]
pub struct PyAttachment {
    dataspace: Py<PyDataspace>,
    at: usize,
    offset: usize,
    len: Option<usize>,
    read_only: bool,
}

impl PyAttachment {
    /// The pager's attachment.
    pub fn attachment(&self) -> pagepilot_pager::Attachment {
        let ds = self.dataspace.get();
        let mut a = pagepilot_pager::Attachment::whole(ds.arc.clone(), ds.id.clone()).at(self.at);
        if let Some(len) = self.len {
            a = a.range(self.offset as u64, len);
        } else {
            a.offset = self.offset as u64;
        }
        if self.read_only {
            a = a.read_only();
        }
        a
    }
}

/// All of `ds`, read-write, at the region's start.
pub fn whole(ds: &PyDataspace) -> pagepilot_pager::Attachment {
    pagepilot_pager::Attachment::whole(ds.arc.clone(), ds.id.clone())
}

#[pymethods]
impl PyAttachment {
    /// The dataspace attached.
    #[getter]
    fn dataspace(&self, py: Python<'_>) -> Py<PyDataspace> {
        self.dataspace.clone_ref(py)
    }

    /// Where in the region, bytes.
    #[getter]
    fn at(&self) -> usize {
        self.at
    }

    /// Where in the dataspace, bytes.
    #[getter]
    fn offset(&self) -> usize {
        self.offset
    }

    /// How many bytes (None: to the dataspace's end).
    #[getter]
    fn len(&self) -> Option<usize> {
        self.len
    }

    /// Whether the region may only read it.
    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    fn __repr__(&self) -> String {
        let ds = self.dataspace.get();
        format!(
            "<pagepilot.Attachment {} at {}, from {}, {}{}>",
            ds.describe(),
            self.at,
            self.offset,
            self.len
                .map_or_else(|| "to its end".into(), |l| format!("{l} bytes")),
            if self.read_only { ", read-only" } else { "" }
        )
    }
}
