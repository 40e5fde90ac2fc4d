//! Options for reading traces.

use super::{Format, TraceError};

/// The page size assumed for address traces unless told otherwise.
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// How to read a trace; `LoadOptions::default()` detects everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// The format, or `None` to detect it.
    pub format: Option<Format>,
    /// Bytes per page for address traces (lackey); a power of two.
    pub page_size: u64,
    /// Include instruction fetches (lackey `I` lines) as read references.
    pub instructions: bool,
    /// Drop a reference to the same page as the one just before it (its
    /// write flag is merged into the kept one). Off by default: every
    /// reference counts.
    pub collapse_repeats: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            format: None,
            page_size: DEFAULT_PAGE_SIZE,
            instructions: false,
            collapse_repeats: false,
        }
    }
}

impl LoadOptions {
    /// Refuses options no reader can honour.
    pub fn check(&self) -> Result<(), TraceError> {
        if !self.page_size.is_power_of_two() || self.page_size > 1 << 40 {
            return Err(TraceError::BadPageSize(self.page_size));
        }
        Ok(())
    }

    /// log2 of the page size.
    pub fn page_shift(&self) -> u32 {
        self.page_size.trailing_zeros()
    }
}
