//! The flags of a page mapped for a fault.

use crate::frame_table::{MODIFIED, REFERENCED};

/// The flags of a zero-filled page: referenced, and modified if the fault
/// was a write. A write fault's whole cluster is mapped writable, so every
/// page of it must count as modified (the stream is writing them): one
/// written back while still all zeros is correct, one written but thought
/// clean would be lost.
pub(super) fn zero_flags(write: bool) -> u8 {
    REFERENCED | if write { MODIFIED } else { 0 }
}
