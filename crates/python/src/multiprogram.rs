//! Multiprogrammed simulation from Python: several traces as processes
//! under one global policy (`pagepilot sim --global`), or each with its
//! own policy and frames drawn from one frame pool (`pagepilot sim
//! --global --pool`).

use pagepilot_policy::chain;
use pagepilot_sim::global::{self, Schedule};
use pagepilot_sim::pooled::{self, PoolConfig, ProcessSpec, RateConfig};
use pagepilot_sim::Trace;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::SimulationError;
use crate::simulate::{frames_arg, policies_arg, trace_arg, Load};

/// The traces and their names (a path's name is the path, as the CLI
/// names it; a sequence of page numbers is named by its index).
fn traces_arg(
    py: Python<'_>,
    traces: &Bound<'_, PyAny>,
    names: Option<Vec<String>>,
    load: &Load<'_>,
) -> PyResult<(Vec<Trace>, Vec<String>)> {
    let mut loaded = Vec::new();
    let mut labels = Vec::new();
    for (i, t) in traces.try_iter()?.enumerate() {
        let t = t?;
        let label = if t.is_instance_of::<PyString>() || t.hasattr("__fspath__")? {
            crate::args::path(&t, "traces")?.display().to_string()
        } else {
            i.to_string()
        };
        loaded.push(trace_arg(py, &t, load)?);
        labels.push(label);
    }
    if loaded.is_empty() {
        return Err(SimulationError::new_err("no trace given"));
    }
    match names {
        Some(n) if n.len() != loaded.len() => Err(PyValueError::new_err(format!(
            "names: {} names for {} traces",
            n.len(),
            loaded.len()
        ))),
        Some(n) => Ok((loaded, n)),
        None => Ok((loaded, labels)),
    }
}

/// One value per trace: None gives `default`, a single value (not a list)
/// repeats, a list needs one per trace (as the CLI's lists).
fn per_trace<'py, T: FromPyObjectOwned<'py> + Clone>(
    what: &str,
    obj: Option<&Bound<'py, PyAny>>,
    traces: usize,
    default: impl Fn() -> T,
) -> PyResult<Vec<T>> {
    let Some(obj) = obj else {
        return Ok(vec![default(); traces]);
    };
    if let Ok(one) = obj.extract::<T>() {
        return Ok(vec![one; traces]);
    }
    let list: Vec<T> = obj
        .try_iter()?
        .map(|v| v?.extract::<T>().map_err(Into::into))
        .collect::<PyResult<_>>()?;
    match list.len() {
        1 => Ok(vec![list[0].clone(); traces]),
        n if n == traces => Ok(list),
        n => Err(PyValueError::new_err(format!(
            "{what}: {n} values for {traces} traces; give one per trace, or one for all"
        ))),
    }
}

/// `pagepilot sim --global --format json`: each policy at each memory size
/// over the traces run round-robin as processes (`quantum` references a
/// turn, a missing fault blocking its process `service` reference times),
/// one row for the whole run (`process` "all", with `elapsed`) and one per
/// process.
#[pyfunction]
#[pyo3(name = "_simulate_global", signature = (traces, policies, frames, names = None,
    quantum = 1_000_000, service = 400_000, trace_format = None, page_size = None,
    instructions = false, collapse = false))]
#[allow(clippy::too_many_arguments)]
pub fn simulate_global<'py>(
    py: Python<'py>,
    traces: &Bound<'py, PyAny>,
    policies: &Bound<'py, PyAny>,
    frames: &Bound<'py, PyAny>,
    names: Option<Vec<String>>,
    quantum: u64,
    service: u64,
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
    let (traces, names) = traces_arg(py, traces, names, &load)?;
    let footprint = traces.iter().map(Trace::distinct).sum();
    let frames = frames_arg(frames, footprint)?;
    let specs: Vec<String> = policies.iter().map(|(s, _)| s.clone()).collect();
    let schedule = Schedule { quantum, service };
    let mut rows = py
        .detach(|| global::sweep(&traces, &names, &specs, &frames, schedule, &|_| {}))
        .map_err(|e| SimulationError::new_err(chain(&e).to_string()))?;
    for row in &mut rows {
        if let Some((_, label)) = policies.iter().find(|(s, _)| *s == row.policy) {
            row.policy = label.clone();
        }
    }
    crate::simulate::to_python(py, &rows)
}

/// `pagepilot sim --global --pool FRAMES --format json`: the traces as
/// processes, each with its own policy and `min_frames`, drawing frames
/// from one pool of `pool` frames (HiPEC's global frame manager), under
/// RAPHA's fault limits if given. Lists take one value per trace or one
/// for all, as the CLI's. Returns the run's report as a dict.
#[pyfunction]
#[pyo3(name = "_simulate_pooled", signature = (traces, pool, policies = None, names = None,
    min_frames = None, partition_burst = None, reclaim_deadline = None,
    readahead_frames = None, fault_limit = None, fault_period = None, system_period = None,
    fault_unit = 1, reserve = None, sample_every = None, quantum = 1_000_000,
    service = 400_000, trace_format = None, page_size = None, instructions = false,
    collapse = false))]
#[allow(clippy::too_many_arguments)]
pub fn simulate_pooled<'py>(
    py: Python<'py>,
    traces: &Bound<'py, PyAny>,
    pool: usize,
    policies: Option<&Bound<'py, PyAny>>,
    names: Option<Vec<String>>,
    min_frames: Option<&Bound<'py, PyAny>>,
    partition_burst: Option<usize>,
    reclaim_deadline: Option<u64>,
    readahead_frames: Option<&Bound<'py, PyAny>>,
    fault_limit: Option<&Bound<'py, PyAny>>,
    fault_period: Option<u64>,
    system_period: Option<u64>,
    fault_unit: u64,
    reserve: Option<&Bound<'py, PyAny>>,
    sample_every: Option<u64>,
    quantum: u64,
    service: u64,
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
    let (traces, names) = traces_arg(py, traces, names, &load)?;
    let k = traces.len();
    let specs = match policies {
        None => vec!["clock".to_string(); k],
        Some(p) => {
            let specs: Vec<String> = policies_arg(p)?.into_iter().map(|(s, _)| s).collect();
            match specs.len() {
                1 => vec![specs[0].clone(); k],
                n if n == k => specs,
                n => {
                    return Err(PyValueError::new_err(format!(
                        "policies: {n} values for {k} traces; give one per trace, or one for all"
                    )))
                }
            }
        }
    };
    let mins = per_trace("min_frames", min_frames, k, || pool / k.max(1))?;
    let windows = per_trace("readahead_frames", readahead_frames, k, || 0usize)?;
    let limits: Option<Vec<u64>> = fault_limit
        .map(|f| per_trace("fault_limit", Some(f), k, || 0u64))
        .transpose()?;
    let reserves = per_trace("reserve", reserve, k, || 0.0f64)?;
    if let Some(&bad) = reserves.iter().find(|r| !(0.0..=100.0).contains(*r)) {
        return Err(PyValueError::new_err(format!(
            "reserve: {bad} is not a percentage in 0..=100"
        )));
    }
    let rate = match (&limits, fault_period) {
        (None, Some(_)) => {
            return Err(PyValueError::new_err(
                "fault_period without fault_limit: give each process a limit",
            ))
        }
        (_, Some(period)) => Some(RateConfig {
            fault_period: period,
            system_period: system_period.unwrap_or(period),
            fault_unit,
        }),
        _ => None,
    };
    let processes: Vec<ProcessSpec> = (0..k)
        .map(|p| ProcessSpec {
            name: names[p].clone(),
            policy: specs[p].clone(),
            min_frames: mins[p],
            readahead_frames: windows[p],
            fault_limit: limits.as_ref().map(|l| l[p]),
            reserve: reserves[p] / 100.0,
        })
        .collect();
    let schedule = Schedule { quantum, service };
    let config = PoolConfig {
        frames: pool,
        partition_burst,
        reclaim_deadline: reclaim_deadline.unwrap_or(service.saturating_mul(10)),
        schedule,
        rate,
        sample_every,
    };
    let run = py
        .detach(|| pooled::run(&traces, &processes, &config))
        .map_err(|e| SimulationError::new_err(chain(&e).to_string()))?;
    crate::simulate::to_python(py, &run)
}
