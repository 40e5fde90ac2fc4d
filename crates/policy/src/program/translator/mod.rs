//! The pseudo-code translator: HiPEC's C-like policy language, events written
//! as procedures, compiled to the command stream.
//!
//! ```text
//! queue active;                 // declarations: int, const, page, queue
//! page p;
//! event PageFault() {
//!     if (free > 0) { enqueue(active, fault); return; }
//!     while (true) {
//!         p = dequeue(active);
//!         if (!ref(p, 0)) break;   // test and clear the referenced bit
//!         enqueue(active, p);
//!     }
//!     victim = p;
//!     enqueue(active, fault);
//! }
//! event ReclaimFrame() { victim = lru(active); }
//! ```
//!
//! See `docs/policy-commands.md` for the built-in functions and the commands
//! they become. Errors carry line and column and say what was expected.

mod codegen;
mod lexer;
mod parser;

use thiserror::Error;

use super::Program;

/// A translation error at a source position.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{line}:{col}: {kind}")]
pub struct TranslateError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What was wrong.
    pub kind: ErrorKind,
}

/// What was wrong in the source.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// A character that starts no token.
    #[error("unexpected character `{0}`")]
    BadChar(char),
    /// An integer literal that does not fit 64 bits.
    #[error("integer literal out of range")]
    IntRange,
    /// The parser wanted something else.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What would have been accepted.
        expected: String,
        /// What was there.
        found: String,
    },
    /// A name that is not declared.
    #[error("`{0}` is not declared")]
    Unknown(String),
    /// A name declared twice.
    #[error("`{0}` is already declared")]
    Duplicate(String),
    /// An expression of the wrong type.
    #[error("expected {expected}, found {found}")]
    Type {
        /// Wanted type.
        expected: &'static str,
        /// Actual type.
        found: &'static str,
    },
    /// Assignment to something read-only.
    #[error("`{0}` is read-only")]
    ReadOnly(String),
    /// A built-in function called with the wrong number of arguments.
    #[error("`{name}` takes {expected} argument(s), found {found}")]
    Arity {
        /// The function.
        name: String,
        /// Accepted counts.
        expected: &'static str,
        /// Given.
        found: usize,
    },
    /// `break` or `continue` outside a loop.
    #[error("`{0}` outside a loop")]
    OutsideLoop(&'static str),
    /// An expression used as a statement that does nothing.
    #[error("expression has no effect; expected an assignment or a call")]
    NoEffect,
    /// The program needs more than 256 operands or too many commands.
    #[error("program too large: {0}")]
    TooLarge(&'static str),
    /// Nesting deeper than the translator accepts.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
}

/// Translates pseudo-code into an (unverified) program with a line table.
pub fn translate(source: &str) -> Result<Program, TranslateError> {
    let tokens = lexer::lex(source)?;
    let items = parser::parse(&tokens)?;
    codegen::generate(&items)
}
