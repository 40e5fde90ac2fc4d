//! Why `bench apps` could not run: what is specific to running real programs (root for the
//! cgroups, the programs themselves, the interposer, their data). Everything else goes
//! through [`crate::BenchError`]'s own variants (io with a path, arguments, cgroups, policies).

use std::path::PathBuf;
use std::process::ExitStatus;

use crate::kernel::BaselineUnavailable;

/// A refusal or failure of `bench apps` of its own.
#[derive(Debug, thiserror::Error)]
pub enum AppsError {
    /// Not root (or no memory controller): every row runs in a memory cgroup.
    #[error(
        "every row (the kernel's, and pagepilot's for a fair comparison) runs in a memory \
         cgroup of --memory after the page cache is dropped, which needs root: {why}"
    )]
    NeedsRoot {
        /// What this user cannot do.
        why: String,
    },
    /// A program or Python module an application needs is not installed.
    #[error(
        "{app}: {program} is not installed; scripts/setup installs what pagepilot needs \
         (or by hand: {install})"
    )]
    Missing {
        /// The application (`sqlite`).
        app: &'static str,
        /// The program or module (`sqlite3`, `python3 module lmdb`).
        program: String,
        /// How to install it by hand.
        install: &'static str,
    },
    /// `pagepilot run`'s interposer is not beside this binary.
    #[error(
        "the interposer {0} is missing: the pagepilot rows need it (build it with \
         `cargo build --release -p pagepilot-interpose`, or set PAGEPILOT_RUN_LIB)"
    )]
    NoInterposer(PathBuf),
    /// A program making an application's data failed.
    #[error("{app}: making its data failed ({status}): {stderr}")]
    Prepare {
        /// The application.
        app: &'static str,
        /// How the generator ended.
        status: ExitStatus,
        /// The end of what it wrote to stderr.
        stderr: String,
    },
    /// An application's data came out other than asked.
    #[error("{app}: {what}")]
    Data {
        /// The application.
        app: &'static str,
        /// What is wrong with it.
        what: String,
    },
    /// `--memory` leaves no budget for the best row.
    #[error("--memory {memory} leaves no budget for the best row after --headroom {headroom}")]
    NoBudget {
        /// `--memory`, bytes.
        memory: u64,
        /// `--headroom`, bytes.
        headroom: u64,
    },
}

impl From<BaselineUnavailable> for AppsError {
    /// The kernel baseline's check, without its advice (other benches skip the kernel's
    /// rows; this one cannot run any row).
    fn from(e: BaselineUnavailable) -> AppsError {
        let why = match e {
            BaselineUnavailable::NotWritable(path) => {
                format!("{} is not writable by this user", path.display())
            }
            BaselineUnavailable::Cgroup(c) => pagepilot_policy::chain(&c).to_string(),
        };
        AppsError::NeedsRoot { why }
    }
}
