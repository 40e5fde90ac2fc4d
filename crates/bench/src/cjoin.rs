//! The join's "defaults (C API)" rows: the nested-loops join run by a small C program,
//! `crates/bench/c/join.c`, that maps the table with `pp_map_file(path, 0, budget, policy)` and
//! no other option, as an external C user would, and prints its time, its match count and the
//! region's `pp_stats_json`.
//!
//! The program is `--c-program PATH`, else `pp-join-c` beside the running executable
//! (`scripts/pagepilot` builds it as `target/release/pp-join-c`), else the rows are
//! left out.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::datafile::DataFile;
use super::measure::Measured;
use super::workload::{self, Workload};

/// The C program's file name beside the `pagepilot` executable.
pub const PROGRAM_NAME: &str = "pp-join-c";

/// Failure of a C-program run.
#[derive(Debug, thiserror::Error)]
pub enum CJoinError {
    /// `--c-program` names no executable file.
    #[error("--c-program {0}: no such executable (build it with scripts/pagepilot, or pass none)")]
    Missing(PathBuf),
    /// The program could not be started or the data file not reached.
    #[error("running the C join program {program}")]
    Io {
        /// The program.
        program: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The program failed (its stderr is quoted).
    #[error("the C join program {program} failed ({status}): {stderr}")]
    Failed {
        /// The program.
        program: PathBuf,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// Its output was not the JSON it prints.
    #[error("the C join program {program} printed no result ({error}): {stdout}")]
    Report {
        /// The program.
        program: PathBuf,
        /// The parse error.
        error: serde_json::Error,
        /// What it printed.
        stdout: String,
    },
    /// It counted the wrong number of matches: the pager served wrong data.
    #[error("the C join program ({policy}) counted {got} matches != expected {want}: wrong data paged in through the C API")]
    Checksum {
        /// The policy.
        policy: String,
        /// What it counted.
        got: u64,
        /// What `workload::expected` says.
        want: u64,
    },
    /// It mapped a different length than the file's.
    #[error("the C join program mapped {got} bytes of a {want}-byte table")]
    Length {
        /// What it mapped.
        got: u64,
        /// The file's length.
        want: u64,
    },
}

/// The line the C program prints.
#[derive(Deserialize)]
struct Report {
    elapsed_ns: u64,
    matches: u64,
    len: u64,
    bytes_read: u64,
    stats: Stats,
}

/// The fields of `pp_stats_json` the rows report.
#[derive(Deserialize)]
struct Stats {
    missing_faults: u64,
    minor_faults: u64,
}

/// The C program to run: `explicit` (`--c-program`; `none` leaves the rows out), else
/// [`PROGRAM_NAME`] beside the running executable if it is there, else none.
pub fn find_program(explicit: Option<&Path>) -> Result<Option<PathBuf>, CJoinError> {
    match explicit {
        Some(p) if p.as_os_str() == "none" => Ok(None),
        Some(p) if is_executable(p) => Ok(Some(p.to_path_buf())),
        Some(p) => Err(CJoinError::Missing(p.to_path_buf())),
        None => Ok(std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.join(PROGRAM_NAME)))
            .filter(|p| is_executable(p))),
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs the join `loops` times over `file` through `program` with `budget` bytes and `policy`,
/// cold (the file dropped from the page cache first, as for the other pagepilot runs), and
/// checks its match count against [`workload::expected`].
pub fn run(
    program: &Path,
    file: &DataFile,
    budget: usize,
    policy: &str,
    loops: usize,
) -> Result<Measured, CJoinError> {
    let io = |source| CJoinError::Io {
        program: program.to_path_buf(),
        source,
    };
    crate::cold::make_cold(&[file.path()], false).map_err(io)?;
    let out = Command::new(program)
        .arg(file.path())
        .arg(budget.to_string())
        .arg(policy)
        .arg(loops.to_string())
        .output()
        .map_err(io)?;
    if !out.status.success() {
        return Err(CJoinError::Failed {
            program: program.to_path_buf(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let report: Report =
        serde_json::from_slice(&out.stdout).map_err(|source| CJoinError::Report {
            program: program.to_path_buf(),
            error: source,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        })?;
    if report.len != file.len() as u64 {
        return Err(CJoinError::Length {
            got: report.len,
            want: file.len() as u64,
        });
    }
    let want = workload::expected(Workload::Join { loops }, file.len());
    if report.matches != want {
        return Err(CJoinError::Checksum {
            policy: policy.into(),
            got: report.matches,
            want,
        });
    }
    Ok(Measured {
        elapsed_ns: report.elapsed_ns,
        faults: report.stats.missing_faults,
        minor_faults: report.stats.minor_faults,
        bytes_read: report.bytes_read,
        checksum: report.matches,
        cgroup_baseline_bytes: 0,
        cpu_us: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_find_program_takes_an_explicit_executable_refuses_a_missing_one_and_none() {
        assert!(find_program(Some(Path::new("none"))).unwrap().is_none());
        assert!(matches!(
            find_program(Some(Path::new("/nonexistent/pp-join-c"))),
            Err(CJoinError::Missing(_))
        ));
        let sh = Path::new("/bin/sh");
        assert_eq!(find_program(Some(sh)).unwrap().as_deref(), Some(sh));
    }

    #[test]
    fn test_report_reads_the_c_programs_line() {
        let line = r#"{"elapsed_ns":5,"matches":7,"len":4096,"bytes_read":0,
            "stats":{"missing_faults":3,"minor_faults":1,"latency":{"p50":2}}}"#;
        let r: Report = serde_json::from_str(line).unwrap();
        assert_eq!((r.matches, r.stats.missing_faults), (7, 3));
    }
}
