//! Errors reading and writing traces.

use std::fmt;
use std::path::PathBuf;

use thiserror::Error;

/// Where in a trace file something went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// A 1-based line number (text formats).
    Line(u64),
    /// A byte offset (binary formats).
    Offset(u64),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line(n) => write!(f, "line {n}"),
            Position::Offset(o) => write!(f, "byte offset {o}"),
        }
    }
}

/// Errors reading and writing traces.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be opened, read or written.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The content is not a valid trace of the expected format.
    #[error("{}: {at}: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where.
        at: Position,
        /// What was wrong.
        what: String,
    },
    /// The trace holds no references.
    #[error("{}: the trace holds no references", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The format could not be told from the content or the file name.
    #[error("{}: cannot tell the trace format; name it with --format (text, lackey, binary, oracle-general, lcs-txt)", path.display())]
    Undetected {
        /// The file.
        path: PathBuf,
    },
    /// The format can be read but not written.
    #[error(
        "traces cannot be written in the {format} format (only binary, text and oracle-general)"
    )]
    Unwritable {
        /// The format asked for.
        format: super::Format,
    },
    /// A page size that is not a power of two up to 2^40.
    #[error("page size {0} is not a power of two between 1 and 2^40")]
    BadPageSize(u64),
}

impl TraceError {
    /// A malformed-content error.
    pub(crate) fn malformed(path: &std::path::Path, at: Position, what: impl Into<String>) -> Self {
        TraceError::Malformed {
            path: path.into(),
            at,
            what: what.into(),
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }
}
