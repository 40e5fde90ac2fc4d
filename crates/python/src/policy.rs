//! `pagepilot.Policy`: a policy program compiled from pseudo-code (or
//! assembler text) and checked, usable wherever a policy name is.

use std::path::{Path, PathBuf};

use pagepilot_policy::chain;
use pagepilot_policy::program::{self, asm, disasm, translator, verify, Verified};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::args;
use crate::errors::policy_error;

/// Where a program came from, to pickle it.
enum Origin {
    /// Pseudo-code text.
    Source(String),
    /// Assembler text.
    Asm(String),
    /// A program file.
    File(PathBuf),
}

/// A checked policy program (HiPEC's command set), usable as `policy=` of
/// `map_file`/`map_anon` and in `simulate`'s `policies`. Made by
/// `Policy.compile(source)` (pseudo-code, as `policies/*.hp`),
/// `Policy.assemble(text)` or `Policy.load(path)`. Errors raise
/// `PolicyError` with the message `pagepilot policy check` prints, and
/// `line`/`column` for a syntax error.
#[pyclass(name = "Policy", module = "pagepilot", frozen)]
pub struct Policy {
    name: String,
    origin: Origin,
    /// The compiled program, written once for the pager and the simulator
    /// (which take programs by path); removed with the object.
    dir: tempfile::TempDir,
    verified: Verified,
}

impl Policy {
    /// The spec the pager and the simulator accept: the compiled file's path.
    pub fn spec(&self) -> String {
        self.file().display().to_string()
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join(format!("{}.hpc", self.name))
    }

    fn build(py: Python<'_>, name: &str, origin: Origin, verified: Verified) -> PyResult<Self> {
        if name.is_empty() || name.contains('/') || name.contains(':') || name.starts_with('.') {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "name: `{name}` is not a policy name (no '/', ':' or leading '.')"
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("pagepilot-policy-")
            .tempdir()
            .map_err(|e| {
                policy_error(
                    py,
                    format!("cannot create a directory for the program: {e}"),
                    None,
                )
            })?;
        let p = Policy {
            name: name.to_string(),
            origin,
            dir,
            verified,
        };
        std::fs::write(p.file(), p.verified.program().to_bytes()).map_err(|e| {
            policy_error(
                py,
                format!("cannot write {}: {e}", p.file().display()),
                None,
            )
        })?;
        Ok(p)
    }
}

#[pymethods]
impl Policy {
    /// Compiles pseudo-code `source` (the language of `policies/*.hp`) and
    /// checks it. `name` names the policy in statistics and errors.
    #[staticmethod]
    #[pyo3(signature = (source, name = "program"))]
    fn compile(py: Python<'_>, source: &str, name: &str) -> PyResult<Self> {
        let program = translator::translate(source)
            .map_err(|e| policy_error(py, format!("{name}:{e}"), Some((e.line, e.col))))?;
        let verified = verify(program)
            .map_err(|e| policy_error(py, format!("{name}: rejected: {e}"), None))?;
        Policy::build(py, name, Origin::Source(source.to_string()), verified)
    }

    /// Assembles the textual command form (as `pagepilot policy disasm`
    /// prints it) and checks it.
    #[staticmethod]
    #[pyo3(signature = (text, name = "program"))]
    fn assemble(py: Python<'_>, text: &str, name: &str) -> PyResult<Self> {
        let program = asm::assemble(text)
            .map_err(|e| policy_error(py, format!("{name}:{e}"), Some((e.line, e.col))))?;
        let verified = verify(program)
            .map_err(|e| policy_error(py, format!("{name}: rejected: {e}"), None))?;
        Policy::build(py, name, Origin::Asm(text.to_string()), verified)
    }

    /// Loads and checks a program file: pseudo-code, assembler (`.hpa`) or
    /// compiled (`.hpc`).
    #[staticmethod]
    fn load(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Self> {
        let path = args::path(path, "path")?;
        let verified = program::load(&path).map_err(|e| {
            let at = match &e {
                program::LoadError::Translate { error, .. } => Some((error.line, error.col)),
                program::LoadError::Asm { error, .. } => Some((error.line, error.col)),
                _ => None,
            };
            policy_error(py, chain(&e).to_string(), at)
        })?;
        let name = Path::new(&path)
            .file_stem()
            .map_or_else(|| "program".into(), |s| s.to_string_lossy().into_owned());
        Policy::build(py, &name, Origin::File(path), verified)
    }

    /// The policy's name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The spec string the pager and simulator are given (a compiled
    /// program's path, valid while this object lives).
    #[getter]
    #[pyo3(name = "spec")]
    fn spec_py(&self) -> String {
        self.spec()
    }

    /// The program's events and their lengths, e.g. `{"PageFault": 12}`.
    #[getter]
    fn events(&self) -> Vec<(String, usize)> {
        let p = self.verified.program();
        p.events
            .iter()
            .map(|e| (e.name.to_string(), e.len as usize))
            .collect()
    }

    /// The program in the textual command form.
    fn disassemble(&self) -> String {
        disasm::disassemble(self.verified.program())
    }

    fn __repr__(&self) -> String {
        let p = self.verified.program();
        format!(
            "<pagepilot.Policy {:?}: {} commands, {} operands>",
            self.name,
            p.code.len(),
            p.operands.len()
        )
    }

    /// Pickling: compiled again from its source in the receiving process.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let cls = py.get_type::<Policy>();
        let (method, arg) = match &self.origin {
            Origin::Source(s) => ("compile", s.clone().into_pyobject(py)?.into_any()),
            Origin::Asm(s) => ("assemble", s.clone().into_pyobject(py)?.into_any()),
            Origin::File(p) => ("load", p.clone().into_pyobject(py)?.into_any()),
        };
        let f = cls.getattr(method)?;
        let args = match &self.origin {
            Origin::File(_) => PyTuple::new(py, [arg])?,
            _ => PyTuple::new(py, [arg, self.name.clone().into_pyobject(py)?.into_any()])?,
        };
        PyTuple::new(py, [f, args.into_any()])
    }
}
