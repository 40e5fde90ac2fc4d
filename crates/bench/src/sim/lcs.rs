//! libCacheSim's side of `bench sim --against libcachesim`: a Python with
//! the `libcachesim` package (PyPI, its official bindings), and the driver
//! script (`crates/bench/py/lcs_driver.py`, embedded) run as a subprocess.
//!
//! The Python is, in order: `--python`, the virtual environment
//! `target/libcachesim-venv` beside the running binary, `python3` on the
//! PATH if it imports `libcachesim`; else that virtual environment is
//! created and the package installed into it with pip.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The libcachesim release the benchmark was written against.
pub const PACKAGE: &str = "libcachesim==0.3.5";

/// The driver, kept in the repository as a file of its own.
const DRIVER: &str = include_str!("../../py/lcs_driver.py");

/// Errors reaching libCacheSim.
#[derive(Debug, Error)]
pub enum LcsError {
    /// No Python with libcachesim, and installing one failed.
    #[error("no Python with the libcachesim package, and installing it failed: {why}\ninstall it with:\n  {command}\nor name a Python that has it with --python")]
    Missing {
        /// What failed.
        why: String,
        /// The one command that installs it.
        command: String,
    },
    /// The driver could not run or failed.
    #[error("libCacheSim driver ({python}): {why}")]
    Driver {
        /// The Python used.
        python: String,
        /// What went wrong, with the driver's stderr.
        why: String,
    },
}

/// One run for the driver: a libcachesim cache class at a size.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Our label for it.
    pub name: String,
    /// The libcachesim class (`LRU`, `FIFO`, `Clock`, `ARC`, `S3FIFO`,
    /// `Sieve`, `Belady`).
    pub policy: String,
    /// Cache size in objects (objects have size 1).
    pub size: usize,
    /// Keyword arguments of the class (e.g. `init_freq`).
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// What the driver measured for one run.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Measured {
    /// The run's label.
    pub name: String,
    /// Trace reader, cache creation and `process_trace`, in seconds.
    pub seconds: f64,
    /// Requests libCacheSim read.
    pub requests: u64,
    /// Misses, first accesses included.
    pub misses: u64,
}

#[derive(Deserialize)]
struct Answer {
    version: String,
    runs: Vec<Measured>,
}

#[derive(Serialize)]
struct Job<'a> {
    trace: &'a Path,
    runs: &'a [Run],
}

/// A Python that has libcachesim, and the driver written out for it.
pub struct Driver {
    python: PathBuf,
    script: PathBuf,
    /// The libcachesim version it reported (after the first [`Driver::run`]).
    pub version: String,
}

impl Driver {
    /// Finds (or installs) a Python with libcachesim; `python` is `--python`.
    pub fn find(python: Option<&Path>) -> Result<Driver, LcsError> {
        let venv = venv_dir();
        let venv_python = venv.join("bin/python");
        let python = match python {
            Some(p) => p.to_path_buf(),
            None if has_package(&venv_python) => venv_python,
            None if has_package(Path::new("python3")) => PathBuf::from("python3"),
            None => install(&venv)?,
        };
        if !has_package(&python) {
            return Err(LcsError::Missing {
                why: format!("{} cannot import libcachesim", python.display()),
                command: install_command(&venv),
            });
        }
        let script =
            std::env::temp_dir().join(format!("pagepilot-lcs-driver-{}.py", std::process::id()));
        std::fs::write(&script, DRIVER).map_err(|e| LcsError::Driver {
            python: python.display().to_string(),
            why: format!("cannot write {}: {e}", script.display()),
        })?;
        Ok(Driver {
            python,
            script,
            version: String::new(),
        })
    }

    /// The Python used.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// Runs `runs` on the oracleGeneral trace `trace`, one after another in
    /// one process; the measurements in the same order.
    pub fn run(&mut self, trace: &Path, runs: &[Run]) -> Result<Vec<Measured>, LcsError> {
        let fail = |why: String| LcsError::Driver {
            python: self.python.display().to_string(),
            why,
        };
        let job = serde_json::to_vec(&Job { trace, runs }).map_err(|e| fail(e.to_string()))?;
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&job).map_err(|e| fail(e.to_string()))?;
        }
        let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(fail(format!("exited with {}: {}", out.status, err.trim())));
        }
        let answer: Answer = serde_json::from_slice(&out.stdout)
            .map_err(|e| fail(format!("unreadable answer ({e})")))?;
        if answer.runs.len() != runs.len() {
            return Err(fail(format!(
                "{} answers to {} runs",
                answer.runs.len(),
                runs.len()
            )));
        }
        self.version = answer.version;
        Ok(answer.runs)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.script);
    }
}

/// `target/libcachesim-venv`.
fn venv_dir() -> PathBuf {
    target_dir().join("libcachesim-venv")
}

/// The `target` directory holding the running `target/<profile>/pagepilot`
/// binary, else the current directory's `target`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
        .filter(|t| t.file_name().is_some_and(|n| n == "target"))
        .unwrap_or_else(|| PathBuf::from("target"))
}

fn has_package(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import libcachesim"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn install_command(venv: &Path) -> String {
    let v = venv.display();
    format!("python3 -m venv {v} && {v}/bin/pip install {PACKAGE}")
}

/// Creates the virtual environment and installs libcachesim into it.
fn install(venv: &Path) -> Result<PathBuf, LcsError> {
    eprintln!(
        "libcachesim not found; installing it into {}...",
        venv.display()
    );
    let missing = |why: String| LcsError::Missing {
        why,
        command: install_command(venv),
    };
    let step = |cmd: &mut Command| -> Result<(), LcsError> {
        let shown = format!("{cmd:?}");
        let out = cmd
            .stdout(Stdio::null())
            .output()
            .map_err(|e| missing(format!("{shown}: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(missing(format!("{shown}: {}", err.trim())))
        }
    };
    step(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    step(Command::new(venv.join("bin/pip")).args(["install", "--quiet", PACKAGE]))?;
    Ok(venv.join("bin/python"))
}
