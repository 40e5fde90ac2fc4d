//! Policy programs: HiPEC's application-specific replacement policies,
//! written in a small command set, checked once at load, and interpreted
//! under an instruction budget and a watchdog at every PageFault and
//! ReclaimFrame event.
//!
//! - [`opcode`], [`command`], [`operand`]: the command set, the 32-bit
//!   command word, the typed operand array.
//! - [`program`]: events, the command stream and the binary container.
//! - [`verifier`]: the checker. [`optimise`]: the load-time rewrite of
//!   verified code into fused instructions. [`interp`]: the metered executor.
//!   [`watchdog`]: the timeout thread. [`policy`]: the [`crate::Policy`]
//!   implementation with victim validation and fallback.
//! - [`translator`]: the C-like pseudo-code compiler; [`asm`] and [`disasm`]:
//!   the textual command form.

pub mod asm;
pub mod command;
pub mod disasm;
pub mod interp;
pub mod opcode;
pub mod operand;
pub mod optimise;
pub mod policy;
#[allow(clippy::module_inception)]
pub mod program;
mod queues;
pub mod translator;
pub mod verifier;
pub mod watchdog;

use std::path::Path;

use thiserror::Error;

pub use command::Command;
pub use opcode::Opcode;
pub use operand::Operand;
pub use policy::{OnOverrun, ProgramPolicy, RunConfig};
pub use program::{EventDef, FormatError, Program};
pub use verifier::{verify, Verified, VerifyError};

/// Why a program file could not be loaded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The system's reason.
        message: String,
    },
    /// A compiled program with a bad container.
    #[error("{path}")]
    Format {
        /// The file.
        path: String,
        /// What was wrong.
        source: FormatError,
    },
    /// Pseudo-code that does not compile.
    // The position follows the path as a compiler's does (`file:3:5: ...`):
    // the error is part of the message, not a source.
    #[error("{path}:{error}")]
    Translate {
        /// The file.
        path: String,
        /// What was wrong, with line and column.
        error: translator::TranslateError,
    },
    /// Assembler text that does not assemble.
    // The position follows the path as a compiler's does (`file:3:5: ...`):
    // the error is part of the message, not a source.
    #[error("{path}:{error}")]
    Asm {
        /// The file.
        path: String,
        /// What was wrong, with line and column.
        error: asm::AsmError,
    },
    /// The checker rejected the program.
    #[error("{path}: rejected")]
    Verify {
        /// The file.
        path: String,
        /// Why.
        source: VerifyError,
    },
}

/// Largest source file accepted.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// Reads a program file: compiled (detected by magic), assembler text (`.hpa`)
/// or pseudo-code source (anything else). Not yet verified.
pub fn read(path: &Path) -> Result<Program, LoadError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| LoadError::Io {
        path: shown.clone(),
        message: e.to_string(),
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len as usize > MAX_SOURCE_BYTES.max(program::MAX_FILE_BYTES) {
        return Err(LoadError::Format {
            path: shown,
            source: FormatError::TooLarge {
                bytes: len as usize,
                limit: program::MAX_FILE_BYTES,
            },
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    if Program::is_compiled(&bytes) {
        return Program::from_bytes(&bytes).map_err(|source| LoadError::Format {
            path: shown,
            source,
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| LoadError::Io {
        path: shown.clone(),
        message: "not UTF-8 text and not a compiled program".into(),
    })?;
    if path.extension().is_some_and(|e| e == "hpa") {
        asm::assemble(&text).map_err(|error| LoadError::Asm { path: shown, error })
    } else {
        translator::translate(&text).map_err(|error| LoadError::Translate { path: shown, error })
    }
}

/// Reads and verifies a program file.
pub fn load(path: &Path) -> Result<Verified, LoadError> {
    let program = read(path)?;
    verify(program).map_err(|source| LoadError::Verify {
        path: path.display().to_string(),
        source,
    })
}

/// Whether a registry spec names a program file rather than a built-in: it
/// ends in `.hp`, `.hpa` or `.hpc`, or names an existing file. Parameters may
/// follow a colon (`policies/fifo2.hp:budget=1000,fallback=detach`).
pub fn is_program_spec(spec: &str) -> bool {
    let path = split_spec(spec).0;
    [".hp", ".hpa", ".hpc"].iter().any(|e| path.ends_with(e)) || Path::new(path).is_file()
}

fn split_spec(spec: &str) -> (&str, &str) {
    if Path::new(spec).is_file() {
        return (spec, "");
    }
    spec.rsplit_once(':')
        .filter(|(_, params)| params.contains('='))
        .unwrap_or((spec, ""))
}

/// Builds a [`ProgramPolicy`] from a program spec: `PATH[:budget=N,
/// timeout_ms=N,fallback=NAME|detach]`.
pub fn build_spec(
    spec: &str,
    slots: usize,
    frames: usize,
) -> Result<ProgramPolicy, crate::registry::RegistryError> {
    use crate::registry::{RegistryError, Spec};
    let (path, params) = split_spec(spec);
    let parsed = Spec::parse(&format!("program:{params}"))?;
    parsed.only(&["budget", "timeout_ms", "fallback"])?;
    let mut config = RunConfig::default();
    if parsed
        .params
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("budget"))
    {
        config.budget = Some(parsed.usize_param("budget", 0)? as u64);
    }
    let ms = parsed.usize_param("timeout_ms", config.timeout.as_millis() as usize)?;
    config.timeout = std::time::Duration::from_millis(ms as u64);
    if let Some((_, v)) = parsed
        .params
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("fallback"))
    {
        config.on_overrun = if v == "detach" {
            OnOverrun::Detach
        } else {
            OnOverrun::Fallback(v.clone())
        };
    }
    let verified =
        load(Path::new(path)).map_err(|e| RegistryError::Program(crate::chain(&e).to_string()))?;
    let name = Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
    Ok(ProgramPolicy::new(&name, &verified, config, slots, frames))
}
