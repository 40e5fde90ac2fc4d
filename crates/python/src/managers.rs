//! `pagepilot.Manager` and the dataspace managers of `pagepilot-dataspace`
//! as its subclasses: `PersistentManager`, `CompressedManager`,
//! `LazyCopyManager`, `AnonymousManager`, `FileManager`, `PinnedManager`
//! (and `FarManager`, in `far`). A manager hands out [`PyDataspace`]
//! handles; regions attach them (`map_dataspaces`). Every operation
//! releases the GIL (they do I/O) and raises `DataspaceError` with the
//! manager's message and the C API's errno.

use std::path::PathBuf;
use std::sync::Arc;

use pagepilot_dataspace::{
    AnonymousManager, CompressedManager, DataspaceId, FileManager, LazyCopyManager, Manager,
    PersistentManager, PinnedManager,
};
use pagepilot_far::RedisManager;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};

use crate::args;
use crate::dataspace::PyDataspace;
use crate::dataspace_errors::refused;

/// The manager behind a `pagepilot.Manager`, by kind (for the operations
/// and statistics only one kind has).
#[derive(Clone)]
pub enum Kind {
    /// Named dataspaces in a directory.
    Persistent(Arc<PersistentManager>),
    /// Compressed tiers over lower dataspaces.
    Compressed(Arc<CompressedManager>),
    /// Lazy copies.
    LazyCopy(Arc<LazyCopyManager>),
    /// Anonymous memory in swap files.
    Anonymous(Arc<AnonymousManager>),
    /// Files by path.
    File(Arc<FileManager>),
    /// Pinned dataspaces (received by transfer).
    Pinned(Arc<PinnedManager>),
    /// Far memory on Redis.
    Far(Arc<RedisManager>),
}

impl Kind {
    /// The manager as the pager attaches it.
    pub fn manager(&self) -> Arc<dyn Manager> {
        match self {
            Kind::Persistent(m) => m.clone(),
            Kind::Compressed(m) => m.clone(),
            Kind::LazyCopy(m) => m.clone(),
            Kind::Anonymous(m) => m.clone(),
            Kind::File(m) => m.clone(),
            Kind::Pinned(m) => m.clone(),
            Kind::Far(m) => m.clone(),
        }
    }
}

/// A dataspace manager (SawMill): it creates, identifies, deletes and
/// transfers dataspaces, and serves the pages of those attached to a
/// region. Made by one of its subclasses; not constructed itself.
#[pyclass(name = "Manager", module = "pagepilot", subclass, frozen)]
pub struct PyManager {
    kind: Kind,
}

impl PyManager {
    /// A manager of `kind`.
    pub fn of(kind: Kind) -> Self {
        PyManager { kind }
    }

    /// Its kind.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The manager itself.
    pub fn manager(&self) -> Arc<dyn Manager> {
        self.kind.manager()
    }

    /// A dataspace id argument: a `Dataspace` of this manager, or the id
    /// in the form this manager's ids take (a name, a path, a number).
    pub fn id_arg(&self, obj: &Bound<'_, PyAny>) -> PyResult<DataspaceId> {
        if let Ok(ds) = obj.cast::<PyDataspace>() {
            let ds = ds.get();
            if ds.manager_key() != self.manager().key() {
                return Err(PyValueError::new_err(format!(
                    "{} belongs to the {}, not to this {} manager",
                    ds.describe(),
                    ds.manager_key(),
                    self.manager().name()
                )));
            }
            return Ok(ds.dataspace_id().clone());
        }
        match &self.kind {
            Kind::Persistent(_) | Kind::Far(_) => match obj.cast::<PyString>() {
                Ok(s) => Ok(DataspaceId::Name(s.to_str()?.to_string())),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "expected a pagepilot.Dataspace or a dataspace name (str), got {}",
                    obj.get_type().name()?
                ))),
            },
            Kind::File(_) => Ok(DataspaceId::Path(args::path(obj, "path")?)),
            _ if obj.is_instance_of::<PyInt>() => Ok(DataspaceId::Anonymous(obj.extract()?)),
            _ => Err(PyTypeError::new_err(format!(
                "expected a pagepilot.Dataspace or a dataspace number (int), got {}",
                obj.get_type().name()?
            ))),
        }
    }

    /// A handle on dataspace `id` of the manager `slf`, once its manager
    /// identified it.
    pub fn handle(slf: &Bound<'_, PyManager>, id: DataspaceId) -> PyResult<PyDataspace> {
        let py = slf.py();
        let m = slf.get().manager();
        let identity = py
            .detach(|| m.identify(&id))
            .map_err(|e| refused(py, m.name(), &format!("identifying {id}"), &e))?;
        Ok(PyDataspace::new(slf.clone().unbind(), id, identity.len))
    }

    /// Creates a dataspace (`name`: its name or path, or none) of `size`
    /// bytes and returns its handle.
    pub fn create_in(
        slf: &Bound<'_, PyManager>,
        name: Option<PathBuf>,
        size: &Bound<'_, PyAny>,
    ) -> PyResult<PyDataspace> {
        let py = slf.py();
        let len = args::size(size, "size")? as u64;
        let m = slf.get().manager();
        let what = match &name {
            Some(n) => format!(
                "creating {} dataspace {:?}",
                m.name(),
                n.display().to_string()
            ),
            None => format!("creating a {} dataspace", m.name()),
        };
        let id = py
            .detach(|| m.create(name.as_deref(), len))
            .map_err(|e| refused(py, m.name(), &what, &e))?;
        Ok(PyDataspace::new(slf.clone().unbind(), id, len))
    }
}

#[pymethods]
impl PyManager {
    /// The manager's name ("persistent", "compressed", "lazy-copy",
    /// "anonymous", "file", "pinned", "redis").
    #[getter]
    fn name(&self) -> &'static str {
        self.manager().name()
    }

    /// The existing dataspace `id` (a name, path or number as the manager's
    /// ids are, or a `Dataspace`), identified by the manager; raises
    /// `DataspaceError` (errno ENOENT) if there is none.
    fn dataspace(slf: &Bound<'_, Self>, id: &Bound<'_, PyAny>) -> PyResult<PyDataspace> {
        let id = slf.get().id_arg(id)?;
        PyManager::handle(slf, id)
    }

    /// Deletes dataspace `id` (a `Dataspace`, or its name, path or number).
    /// Raises `DataspaceError` (errno EBUSY while it is open or mapped,
    /// ENOENT if there is none, ENOTSUP where the manager does not delete).
    fn delete(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = self.id_arg(id)?;
        let m = self.manager();
        py.detach(|| m.delete(&id))
            .map_err(|e| refused(py, m.name(), &format!("deleting {id}"), &e))
    }

    /// The operations and flavours the manager offers (`interrogate`), as
    /// lower-case names: `{"operations": [...], "flavours": [...]}`.
    fn interrogate(&self) -> std::collections::HashMap<&'static str, Vec<String>> {
        let c = self.manager().interrogate();
        let names = |v: Vec<String>| v.into_iter().map(|s| s.to_lowercase()).collect();
        std::collections::HashMap::from([
            (
                "operations",
                names(c.operations.iter().map(|o| format!("{o:?}")).collect()),
            ),
            (
                "flavours",
                names(c.flavours.iter().map(|f| format!("{f:?}")).collect()),
            ),
        ])
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "<pagepilot.{} ({})>",
            slf.get_type().name()?,
            slf.get().manager().key()
        ))
    }
}

/// The initializer of a manager subclass `sub` over its base.
pub fn init<T: pyo3::PyClass<BaseType = PyManager>>(
    sub: T,
    base: PyManager,
) -> PyClassInitializer<T> {
    PyClassInitializer::from(base).add_subclass(sub)
}

/// A directory for managers' swap files: `dir` given, else the temp dir.
fn dir_or_temp(dir: Option<&Bound<'_, PyAny>>) -> PyResult<PathBuf> {
    match dir {
        Some(d) => args::path(d, "dir"),
        None => Ok(std::env::temp_dir()),
    }
}

/// Named dataspaces whose contents outlive the process, in a directory
/// (`dir`; None: `$PAGEPILOT_HOME/dataspaces`, else
/// `$XDG_DATA_HOME/pagepilot/dataspaces`, else
/// `~/.local/share/pagepilot/dataspaces`). Opens are exclusive across
/// processes: a dataspace mapped (here or elsewhere) cannot be mapped or
/// deleted again (errno EBUSY).
#[pyclass(name = "PersistentManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyPersistentManager {
    manager: Arc<PersistentManager>,
}

#[pymethods]
impl PyPersistentManager {
    #[new]
    #[pyo3(signature = (dir = None))]
    fn new(py: Python<'_>, dir: Option<&Bound<'_, PyAny>>) -> PyResult<PyClassInitializer<Self>> {
        let dir = match dir {
            Some(d) => args::path(d, "dir")?,
            None => PersistentManager::default_dir().ok_or_else(|| {
                crate::errors::dataspace_error(
                    py,
                    PersistentManager::NAME,
                    libc::EINVAL,
                    "no directory for persistent dataspaces: dir is None and none of \
                     PAGEPILOT_HOME, XDG_DATA_HOME and HOME is set"
                        .into(),
                )
            })?,
        };
        let manager = Arc::new(PersistentManager::new(dir));
        Ok(init(
            PyPersistentManager {
                manager: manager.clone(),
            },
            PyManager::of(Kind::Persistent(manager)),
        ))
    }

    /// The directory.
    #[getter]
    fn dir(&self) -> PathBuf {
        self.manager.dir().to_path_buf()
    }

    /// Creates dataspace `name`, `size` bytes of zeros (an int or a string
    /// such as "64MB"). Raises `DataspaceError` (errno EEXIST if taken,
    /// EINVAL for a bad name).
    fn create(slf: &Bound<'_, Self>, name: &str, size: &Bound<'_, PyAny>) -> PyResult<PyDataspace> {
        PyManager::create_in(slf.as_super(), Some(PathBuf::from(name)), size)
    }

    /// The names of the dataspaces in the directory, sorted.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let m = self.manager.clone();
        let dir = m.dir().display().to_string();
        let mut names = py.detach(|| m.names()).map_err(|e| {
            crate::errors::dataspace_error(
                py,
                PersistentManager::NAME,
                crate::dataspace_errors::io_errno(&e),
                format!("listing the persistent dataspaces of {dir}: {e}"),
            )
        })?;
        names.sort();
        Ok(names)
    }
}

/// SawMill's compressed memory: each dataspace has a tier of compressed
/// pages in memory (lz4) over a lower dataspace, and all the tiers of one
/// manager hold at most `budget` bytes together; the least recently used
/// pages beyond go down to the lower dataspace. A dataspace transferred to
/// it (`Dataspace.transfer`) is stacked under a tier; `create(size)` makes
/// one over a fresh swap file in `dir` (None: the temp dir).
#[pyclass(name = "CompressedManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyCompressedManager {
    budget: usize,
}

#[pymethods]
impl PyCompressedManager {
    #[new]
    #[pyo3(signature = (budget, *, dir = None))]
    fn new(
        budget: &Bound<'_, PyAny>,
        dir: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let budget = args::size(budget, "budget")?;
        let manager = Arc::new(CompressedManager::with_dir(budget, dir_or_temp(dir)?));
        Ok(init(
            PyCompressedManager { budget },
            PyManager::of(Kind::Compressed(manager)),
        ))
    }

    /// A compressed dataspace of `size` zero bytes over a fresh swap file.
    fn create(slf: &Bound<'_, Self>, size: &Bound<'_, PyAny>) -> PyResult<PyDataspace> {
        PyManager::create_in(slf.as_super(), None, size)
    }

    /// The manager's budget in bytes, shared by all its dataspaces.
    #[getter]
    fn budget(&self) -> usize {
        self.budget
    }
}

/// Lazy copies (SawMill's copy): a copy's unmodified pages read through to
/// its source, its modified pages are its own (in a swap file in `dir`,
/// None: the temp dir); the source is never written.
#[pyclass(name = "LazyCopyManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyLazyCopyManager {
    manager: Arc<LazyCopyManager>,
}

#[pymethods]
impl PyLazyCopyManager {
    #[new]
    #[pyo3(signature = (*, dir = None))]
    fn new(dir: Option<&Bound<'_, PyAny>>) -> PyResult<PyClassInitializer<Self>> {
        let manager = Arc::new(LazyCopyManager::new(dir_or_temp(dir)?));
        Ok(init(
            PyLazyCopyManager {
                manager: manager.clone(),
            },
            PyManager::of(Kind::LazyCopy(manager)),
        ))
    }

    /// A lazy copy of `source` (a `Dataspace` of any manager; one of this
    /// manager's own copies is frozen, as `copy` in Rust). The source is
    /// opened read-only while the copy lives, and released when the copy is
    /// deleted.
    fn copy(slf: &Bound<'_, Self>, source: &Bound<'_, PyDataspace>) -> PyResult<PyDataspace> {
        let py = slf.py();
        let src = source.get();
        let (from, id) = (src.manager_arc(py), src.dataspace_id().clone());
        let m = slf.get().manager.clone();
        let copy = py
            .detach(|| m.copy_of(from, &id))
            .map_err(|e| refused(py, LazyCopyManager::NAME, &format!("copying {id}"), &e))?;
        PyManager::handle(slf.as_super(), copy)
    }
}

/// Anonymous memory: zero-filled dataspaces in swap files of `dir` (None:
/// the temp dir), gone with the manager. A dataspace transferred to it
/// becomes anonymous memory over that dataspace (persistence below
/// anonymous memory).
#[pyclass(name = "AnonymousManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyAnonymousManager;

#[pymethods]
impl PyAnonymousManager {
    #[new]
    #[pyo3(signature = (*, dir = None))]
    fn new(dir: Option<&Bound<'_, PyAny>>) -> PyResult<PyClassInitializer<Self>> {
        let manager = Arc::new(AnonymousManager::new(dir_or_temp(dir)?));
        Ok(init(
            PyAnonymousManager,
            PyManager::of(Kind::Anonymous(manager)),
        ))
    }

    /// A fresh dataspace of `size` zero bytes.
    fn create(slf: &Bound<'_, Self>, size: &Bound<'_, PyAny>) -> PyResult<PyDataspace> {
        PyManager::create_in(slf.as_super(), None, size)
    }
}

/// Files by path (`dataspace(path)`; `create(path, size)` makes a sparse
/// file).
#[pyclass(name = "FileManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyFileManager;

#[pymethods]
impl PyFileManager {
    #[new]
    fn new() -> PyClassInitializer<Self> {
        init(
            PyFileManager,
            PyManager::of(Kind::File(Arc::new(FileManager))),
        )
    }

    /// A new sparse file of `size` zero bytes at `path` (EEXIST if taken).
    fn create(
        slf: &Bound<'_, Self>,
        path: &Bound<'_, PyAny>,
        size: &Bound<'_, PyAny>,
    ) -> PyResult<PyDataspace> {
        let path = args::path(path, "path")?;
        PyManager::create_in(slf.as_super(), Some(path), size)
    }
}

/// Pinned memory (SawMill, Figure 6): a dataspace transferred to it is
/// pinned: a region mapping it holds all its pages in memory, never
/// evicted. It takes dataspaces up to `quota` bytes in all (errno EDQUOT
/// beyond); transferring one out unpins it.
#[pyclass(name = "PinnedManager", module = "pagepilot", extends = PyManager, frozen)]
pub struct PyPinnedManager {
    manager: Arc<PinnedManager>,
}

#[pymethods]
impl PyPinnedManager {
    #[new]
    fn new(quota: &Bound<'_, PyAny>) -> PyResult<PyClassInitializer<Self>> {
        let quota = args::size(quota, "quota")? as u64;
        let manager = Arc::new(PinnedManager::new(quota));
        Ok(init(
            PyPinnedManager {
                manager: manager.clone(),
            },
            PyManager::of(Kind::Pinned(manager)),
        ))
    }

    /// Bytes it may hold pinned.
    #[getter]
    fn quota(&self) -> u64 {
        self.manager.quota()
    }

    /// Bytes of its quota taken.
    #[getter]
    fn pinned_bytes(&self) -> u64 {
        self.manager.pinned_bytes()
    }
}
