//! Why a benchmark failed: [`BenchError`], the one error of `pagepilot bench`.
//!
//! Its variants wrap the modules' own errors (`#[error(transparent)]`), an
//! io error with what was being done and on which path, a bad argument, and
//! a measurement that went wrong. As everywhere in pagepilot, a cause is in
//! the message or in `source()`, never both: show one with
//! [`pagepilot_policy::chain`].

use std::io;
use std::path::{Path, PathBuf};

/// Why a benchmark failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An option's value cannot be used.
    #[error("{option} {value}: {why}")]
    BadArg {
        /// The option, as typed (`--budget-mb`).
        option: &'static str,
        /// Its value, as given.
        value: String,
        /// What it must be.
        why: String,
    },
    /// A list option was given no values.
    #[error("{option}: {why}")]
    EmptyList {
        /// The option, as typed (`--sizes`).
        option: &'static str,
        /// What it needs.
        why: &'static str,
    },
    /// A measurement went wrong: wrong data, a side that failed or hung.
    #[error("bench {bench}: {what}")]
    Measurement {
        /// The benchmark (`share`, `rapha`, ...).
        bench: &'static str,
        /// What went wrong.
        what: String,
    },
    /// An io error: what was being done, on which path.
    #[error("{what} {path}", path = .path.display())]
    Io {
        /// What was being done (`creating`, `reading`, ...).
        what: &'static str,
        /// On which file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// An io error not on a file: what was being done (forking, writing the
    /// report, talking to a child).
    #[error("{what}")]
    Sys {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A JSON report or job that could not be read or written.
    #[error("{what}")]
    Json {
        /// Which report or job.
        what: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// Mapping a region.
    #[error(transparent)]
    Map(#[from] pagepilot_pager::MapError),
    /// Unmapping a region (its dirty pages written back).
    #[error(transparent)]
    Flush(#[from] pagepilot_pager::FlushError),
    /// Sharing a frame pool.
    #[error(transparent)]
    Pool(#[from] pagepilot_pager::PoolError),
    /// A region of a shared frame pool.
    #[error(transparent)]
    Pooled(#[from] pagepilot_sim::pooled::PooledError),
    /// Joining pagepilot's daemon.
    #[error(transparent)]
    PagerDaemon(#[from] pagepilot_pager::DaemonError),
    /// A trace.
    #[error(transparent)]
    Trace(#[from] pagepilot_sim::trace::TraceError),
    /// `bench aim`'s workers or region process.
    #[error(transparent)]
    Aim(#[from] crate::aim::AimError),
    /// A policy's name or setup.
    #[error(transparent)]
    Registry(#[from] pagepilot_policy::registry::RegistryError),
    /// A built-in policy program that does not translate (its position in
    /// the message, after the program's name).
    #[error("{program}:{error}")]
    Translate {
        /// The program (`fifo2.hp`).
        program: &'static str,
        /// Where and why.
        error: pagepilot_policy::program::translator::TranslateError,
    },
    /// A built-in policy program the verifier refuses.
    #[error("{program}")]
    Verify {
        /// The program (`fifo2.hp`).
        program: &'static str,
        /// Why.
        #[source]
        source: pagepilot_policy::program::VerifyError,
    },
    /// A synthetic trace.
    #[error(transparent)]
    Synthetic(#[from] pagepilot_sim::synthetic::SyntheticError),
    /// A plot.
    #[error(transparent)]
    Plot(#[from] pagepilot_sim::plot::PlotError),
    /// A policy program.
    #[error(transparent)]
    Program(#[from] pagepilot_policy::program::LoadError),
    /// Far memory's configuration.
    #[error(transparent)]
    FarConfig(#[from] pagepilot_far::ConfigError),
    /// Creating a dataspace.
    #[error(transparent)]
    Create(#[from] pagepilot_pager::dataspace::CreateError),
    /// Opening a dataspace.
    #[error(transparent)]
    Open(#[from] pagepilot_pager::dataspace::OpenError),
    /// Closing a dataspace.
    #[error(transparent)]
    Close(#[from] pagepilot_pager::dataspace::CloseError),
    /// Deleting a dataspace.
    #[error(transparent)]
    Delete(#[from] pagepilot_pager::dataspace::DeleteError),
    /// The kernel baseline cannot run here.
    #[error(transparent)]
    BaselineUnavailable(#[from] crate::kernel::BaselineUnavailable),
    /// A benchmark's child process.
    #[error(transparent)]
    Child(#[from] crate::child::ChildError),
    /// The kernel baseline.
    #[error(transparent)]
    Kernel(#[from] crate::kernel::KernelError),
    /// A memory cgroup.
    #[error(transparent)]
    Cgroup(#[from] crate::cgroup::CgroupError),
    /// The benchmark's daemon.
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    /// The C join program.
    #[error(transparent)]
    CJoin(#[from] crate::cjoin::CJoinError),
    /// A region paged by pagepilot.
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
    /// The data file.
    #[error(transparent)]
    DataFile(#[from] crate::datafile::DataFileError),
    /// `--windows`.
    #[error(transparent)]
    Window(#[from] crate::window::WindowError),
    /// A count out of its range.
    #[error(transparent)]
    OutOfRange(#[from] crate::measure::OutOfRange),
    /// `bench join`'s arguments.
    #[error(transparent)]
    JoinArg(#[from] crate::join::JoinArgError),
    /// `bench fork`.
    #[error(transparent)]
    Fork(#[from] crate::fork::ForkBenchError),
    /// `bench parallel-fill`.
    #[error(transparent)]
    Fill(#[from] crate::parallel_fill::FillError),
    /// `bench fork-ways`.
    #[error(transparent)]
    Ways(#[from] crate::fork_ways::WaysError),
    /// `bench rapha`: a round.
    #[error(transparent)]
    Round(#[from] crate::rapha::round::RoundError),
    /// `bench rapha`: its arguments.
    #[error(transparent)]
    RaphaArg(#[from] crate::rapha::ArgError),
    /// `bench rapha`: RAPHA's fault limits.
    #[error(transparent)]
    Limit(#[from] crate::rapha::limits::LimitError),
    /// `bench share`: its daemon side.
    #[error(transparent)]
    ShareDaemon(#[from] crate::share::daemon::ShareDaemonError),
    /// `bench scale`.
    #[error(transparent)]
    Scale(#[from] crate::scale::ScaleError),
    /// `bench scale`: a size.
    #[error(transparent)]
    Size(#[from] crate::scale::SizeError),
    /// `bench scale`: its child.
    #[error(transparent)]
    ScaleChild(#[from] crate::scale::child::ChildError),
    /// `bench sim`: its arguments.
    #[error(transparent)]
    SimArg(#[from] crate::sim::SimArgError),
    /// `bench sim`: libCacheSim.
    #[error(transparent)]
    Lcs(#[from] crate::sim::lcs::LcsError),
    /// `bench far`: its arguments.
    #[error(transparent)]
    FarArg(#[from] crate::far::FarArgError),
    /// `bench scan`: a side of a case.
    #[error(transparent)]
    Side(#[from] crate::scan::cases::SideError),
    /// `bench scan`: `--write-fraction`.
    #[error(transparent)]
    WriteFraction(#[from] crate::scan::BadWriteFraction),
    /// `bench appel-li`.
    #[error(transparent)]
    AppelLi(#[from] crate::appel_li::Error),
    /// `bench apps`.
    #[error(transparent)]
    Apps(#[from] crate::apps::AppsError),
}

/// Says what was being done when an io error happened, and on which path.
pub(crate) trait IoContext<T> {
    /// The error as [`BenchError::Sys`]: `what` was being done.
    fn doing(self, what: &'static str) -> Result<T, BenchError>;
    /// The error as [`BenchError::Io`]: `what` was being done on `path`.
    fn on(self, what: &'static str, path: impl AsRef<Path>) -> Result<T, BenchError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn doing(self, what: &'static str) -> Result<T, BenchError> {
        self.map_err(|source| BenchError::Sys { what, source })
    }

    fn on(self, what: &'static str, path: impl AsRef<Path>) -> Result<T, BenchError> {
        self.map_err(|source| BenchError::Io {
            what,
            path: path.as_ref().to_path_buf(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagepilot_policy::chain;

    #[test]
    fn test_an_io_error_says_what_and_where_and_leaves_its_cause_to_source() {
        let e = Err::<(), _>(io::Error::from(io::ErrorKind::NotFound))
            .on("opening", "/nonexistent/data")
            .unwrap_err();
        let cause = io::Error::from(io::ErrorKind::NotFound).to_string();
        assert_eq!(e.to_string(), "opening /nonexistent/data");
        assert_eq!(
            chain(&e).to_string(),
            format!("opening /nonexistent/data: {cause}")
        );
        let e = Err::<(), _>(io::Error::from(io::ErrorKind::BrokenPipe))
            .doing("writing the report")
            .unwrap_err();
        assert!(!e.to_string().contains("pipe"), "{e}");
        assert!(chain(&e).to_string().starts_with("writing the report: "));
    }

    #[test]
    fn test_a_wrapped_error_reads_as_itself() {
        let e = BenchError::from(crate::measure::OutOfRange("--runs", 100));
        assert_eq!(e.to_string(), "--runs must be between 1 and 100");
        assert!(std::error::Error::source(&e).is_none());
    }
}
