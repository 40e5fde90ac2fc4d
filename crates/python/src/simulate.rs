//! `simulate` and `curve`: the trace-driven simulator of `pagepilot sim`,
//! on a trace file (any format the CLI reads) or page numbers from Python.

use pagepilot_policy::chain;
use pagepilot_sim::curve::StackPolicy;
use pagepilot_sim::sweep::{self, Parallelism};
use pagepilot_sim::trace::{self, Format, LoadOptions, DEFAULT_PAGE_SIZE};
use pagepilot_sim::Trace;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::args;
use crate::errors::{SimulationError, TraceError};

/// How to read a trace file (`pagepilot sim`'s `--from`, `--page-size`,
/// `--instructions`, `--collapse`).
pub(crate) struct Load<'py> {
    pub format: Option<&'py str>,
    pub page_size: Option<&'py Bound<'py, PyAny>>,
    pub instructions: bool,
    pub collapse: bool,
}

impl Load<'_> {
    fn options(&self) -> PyResult<LoadOptions> {
        let format = self
            .format
            .map(|f| f.parse::<Format>())
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("trace_format: {e}")))?;
        let page_size = match self.page_size {
            Some(p) => args::size(p, "page_size")? as u64,
            None => DEFAULT_PAGE_SIZE,
        };
        Ok(LoadOptions {
            format,
            page_size,
            instructions: self.instructions,
            collapse_repeats: self.collapse,
        })
    }
}

/// A trace argument: a path, or a sequence of page numbers (a numpy array
/// of non-negative integers, a list).
pub(crate) fn trace_arg(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    load: &Load<'_>,
) -> PyResult<Trace> {
    if obj.is_instance_of::<PyString>()
        || obj.hasattr("__fspath__")?
        || obj.is_instance_of::<pyo3::types::PyBytes>()
    {
        let path = args::path(obj, "trace")?;
        let options = load.options()?;
        return py
            .detach(|| trace::load_with(&path, &options))
            .map_err(|e| TraceError::new_err(chain(&e).to_string()));
    }
    let pages = pages_arg(py, obj)?;
    if pages.is_empty() {
        return Err(SimulationError::new_err("the trace holds no references"));
    }
    Ok(py.detach(|| Trace::from_pages(pages)))
}

/// Page numbers from a numpy array (any integer dtype) or a sequence.
fn pages_arg(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let Ok(np) = py.import("numpy") else {
        return obj.extract::<Vec<u64>>().map_err(|_| {
            PyTypeError::new_err(
                "trace: expected a path or a sequence of non-negative page numbers",
            )
        });
    };
    let arr = np.call_method1("asarray", (obj,)).map_err(|_| {
        PyTypeError::new_err("trace: expected a path or a sequence of page numbers")
    })?;
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "trace: expected a one-dimensional array of page numbers, got {ndim} dimensions"
        )));
    }
    match kind.as_str() {
        "u" => {}
        "i" => {
            let size: usize = arr.getattr("size")?.extract()?;
            if size > 0 {
                let min: i64 = arr.call_method0("min")?.extract()?;
                if min < 0 {
                    let at: usize = np.call_method1("argmin", (&arr,))?.extract()?;
                    return Err(PyValueError::new_err(format!(
                        "trace: page numbers must be non-negative; found {min} at index {at}"
                    )));
                }
            }
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "trace: page numbers must be integers, got an array of dtype {}",
                arr.getattr("dtype")?.str()?
            )))
        }
    }
    let contiguous = np.call_method1("ascontiguousarray", (&arr, "uint64"))?;
    let bytes = contiguous.call_method0("tobytes")?;
    let bytes = bytes.cast::<pyo3::types::PyBytes>()?.as_bytes();
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

/// A policies argument: one spec or `Policy`, or a list of them; returns
/// each spec and the label its rows carry.
pub(crate) fn policies_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let one = |p: &Bound<'_, PyAny>| -> PyResult<(String, String)> {
        let spec = args::policy_spec(p)?;
        let label = match p.cast::<crate::policy::Policy>() {
            Ok(pol) => pol.getattr("name")?.extract()?,
            Err(_) => spec.clone(),
        };
        Ok((spec, label))
    };
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<crate::policy::Policy>() {
        return Ok(vec![one(obj)?]);
    }
    obj.try_iter()?.map(|p| one(&p?)).collect()
}

/// A frames argument: "auto", an int, or a list of ints.
pub(crate) fn frames_arg(obj: &Bound<'_, PyAny>, footprint: usize) -> PyResult<Vec<usize>> {
    if let Ok(s) = obj.cast::<PyString>() {
        if s.to_str()?.trim().eq_ignore_ascii_case("auto") {
            return Ok(sweep::auto_frames(footprint, 20));
        }
        return Err(PyValueError::new_err(format!(
            "frames: `{}` is not a number of frames, a list of them, or \"auto\"",
            s.to_str()?
        )));
    }
    let list: Vec<usize> = if obj.hasattr("__iter__")? {
        obj.try_iter()?
            .map(|f| frame_count(&f?))
            .collect::<PyResult<_>>()?
    } else {
        vec![frame_count(obj)?]
    };
    if list.is_empty() {
        return Err(PyValueError::new_err("frames: no memory size given"));
    }
    Ok(list)
}

fn frame_count(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    let n: i64 = obj
        .call_method0("__index__")
        .and_then(|i| i.extract())
        .map_err(|_| PyTypeError::new_err("frames: expected whole numbers of frames"))?;
    usize::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
        PyValueError::new_err(format!("frames: `{n}` is not a positive number of frames"))
    })
}

/// Simulates each policy at each memory size over `trace` (what `pagepilot
/// sim --format json` prints): a list of dicts with `policy`, `frames`,
/// `references`, `faults`, `cold_faults`, `minor_faults`,
/// `faults_per_million`, `mean_inter_fault` (and `incidents` when a policy
/// reported some). `trace` is a path (any format the CLI reads; options as
/// its `--from`, `--page-size`, `--instructions`, `--collapse`) or a
/// sequence of page numbers. `policies`: names, specs (`seq:L=20`), program
/// paths or `Policy` objects; `frames`: sizes or "auto". LRU and OPT are
/// one-pass curves; the other runs spread over every core, the GIL released.
#[pyfunction]
#[pyo3(name = "_simulate", signature = (trace, policies, frames, trace_format = None,
    page_size = None, instructions = false, collapse = false))]
#[allow(clippy::too_many_arguments)]
pub fn simulate<'py>(
    py: Python<'py>,
    trace: &Bound<'py, PyAny>,
    policies: &Bound<'py, PyAny>,
    frames: &Bound<'py, PyAny>,
    trace_format: Option<&'py str>,
    page_size: Option<&'py Bound<'py, PyAny>>,
    instructions: bool,
    collapse: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let load = Load {
        format: trace_format,
        page_size,
        instructions,
        collapse,
    };
    let policies = policies_arg(policies)?;
    if policies.is_empty() {
        return Err(SimulationError::new_err("no policy given"));
    }
    let trace = trace_arg(py, trace, &load)?;
    let frames = frames_arg(frames, trace.distinct())?;
    let specs: Vec<String> = policies.iter().map(|(s, _)| s.clone()).collect();
    let rows = py
        .detach(|| sweep::sweep(&trace, &specs, &frames, Parallelism::AllCores, &|_| {}))
        .map_err(|e| SimulationError::new_err(chain(&e).to_string()))?;
    let mut rows = rows;
    for row in &mut rows {
        if let Some((_, label)) = policies.iter().find(|(s, _)| *s == row.policy) {
            row.policy = label.clone();
        }
    }
    to_python(py, &rows)
}

/// A report as Python objects (dicts and lists), through its JSON.
pub(crate) fn to_python<'py>(
    py: Python<'py>,
    report: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_string(report)
        .map_err(|e| SimulationError::new_err(format!("cannot report the results: {e}")))?;
    py.import("json")?.call_method1("loads", (json,))
}

/// The whole fault curve of a stack algorithm (`"lru"` or `"opt"`) in one
/// pass: a list of dicts with `frames`, `references`, `faults`,
/// `cold_faults`, `evictions`, `faults_per_million`, for each size in
/// `frames` (default every size from 1 to the trace's footprint).
#[pyfunction]
#[pyo3(name = "_curve", signature = (trace, policy, frames = None, trace_format = None,
    page_size = None, instructions = false, collapse = false))]
#[allow(clippy::too_many_arguments)]
pub fn curve<'py>(
    py: Python<'py>,
    trace: &Bound<'py, PyAny>,
    policy: &str,
    frames: Option<&Bound<'py, PyAny>>,
    trace_format: Option<&'py str>,
    page_size: Option<&'py Bound<'py, PyAny>>,
    instructions: bool,
    collapse: bool,
) -> PyResult<Bound<'py, PyList>> {
    let stack = StackPolicy::of_spec(policy).ok_or_else(|| {
        SimulationError::new_err(format!(
            "policy `{policy}`: a one-pass curve exists for \"lru\" and \"opt\" only \
             (simulate() runs the others size by size)"
        ))
    })?;
    let load = Load {
        format: trace_format,
        page_size,
        instructions,
        collapse,
    };
    let trace = trace_arg(py, trace, &load)?;
    let sizes = match frames {
        Some(f) => frames_arg(f, trace.distinct())?,
        None => (1..=trace.distinct()).collect(),
    };
    let most = sizes.iter().copied().max().unwrap_or(1);
    let points: Vec<_> = py.detach(|| {
        let c = stack.curve_upto(&trace.refs, trace.distinct(), most);
        sizes.iter().map(|&n| c.point(n)).collect()
    });
    let out = PyList::empty(py);
    for p in points {
        let d = pyo3::types::PyDict::new(py);
        d.set_item("policy", stack.name())?;
        d.set_item("frames", p.frames)?;
        d.set_item("references", p.references)?;
        d.set_item("faults", p.faults)?;
        d.set_item("cold_faults", p.cold_faults)?;
        d.set_item("evictions", p.evictions)?;
        let rate = if p.references == 0 {
            0.0
        } else {
            p.faults as f64 * 1e6 / p.references as f64
        };
        d.set_item("faults_per_million", rate)?;
        out.append(d)?;
    }
    Ok(out)
}
