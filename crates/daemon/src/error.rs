//! What goes wrong: the caller's misuse of the core ([`CoreError`]), and a
//! client's request refused (`Refusal`, which becomes an `Error` reply).

use pagepilot_frames::{FrameError, RateError};
use pagepilot_protocol::{ClientId, ErrorCode, RegionId};

/// Misuse of the core by its caller (never a client's fault: those are
/// answered with protocol errors).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// No such client: never connected, or already gone.
    #[error("no client {0:?}")]
    UnknownClient(ClientId),
    /// The budget does not fit this machine's address size.
    #[error("a budget of {0} frames does not fit in usize")]
    BudgetTooLarge(u64),
    /// The frame manager refused the configuration.
    #[error("frame manager")]
    Frames(#[from] FrameError),
    /// RAPHA's controller refused the configuration.
    #[error("rate control")]
    Rate(#[from] RateError),
}

/// A request refused: becomes an `Error` reply naming the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub code: ErrorCode,
    pub region: Option<RegionId>,
    pub text: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, region: Option<RegionId>, text: impl Into<String>) -> Refusal {
        Refusal {
            code,
            region,
            text: text.into(),
        }
    }

    /// The frame manager or the controller disagreeing with the core's
    /// records: a bug, reported rather than panicked on.
    pub fn internal(region: RegionId, e: impl std::fmt::Display) -> Refusal {
        Refusal::new(ErrorCode::Internal, Some(region), e.to_string())
    }
}
