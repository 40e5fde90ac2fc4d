//! SEQ's parameters L, M, N and X, and reading them from a policy spec.

use crate::registry::{RegistryError, Spec};

/// Largest X accepted: the table keeps X sequences and N times for each.
const MAX_X: usize = 1 << 20;
/// Largest N accepted.
const MAX_N: usize = 1 << 10;
/// Largest X * N accepted (8 bytes each).
const MAX_TIMES: usize = 1 << 24;

/// SEQ's parameters (section 4.1 of the paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqParams {
    /// L: only sequences at least this long are replaced from.
    pub l: u64,
    /// M: pages closer than this to a sequence's head are not replaced.
    pub m: u64,
    /// N: sequences are ranked by the time of their N-th most recent fault.
    pub n: usize,
    /// X: at most this many sequences are tracked.
    pub x: usize,
}

impl Default for SeqParams {
    /// The paper's defaults: L = 20, M = 20, N = 5, X = 200.
    fn default() -> Self {
        SeqParams {
            l: 20,
            m: 20,
            n: 5,
            x: 200,
        }
    }
}

impl SeqParams {
    /// Reads `L`, `M`, `N`, `X` (any case) from `spec`, with the defaults for
    /// those not given, and checks their ranges.
    pub fn from_spec(spec: &Spec) -> Result<Self, RegistryError> {
        spec.only(&["L", "M", "N", "X"])?;
        let d = SeqParams::default();
        let bad = |param: &str, why: String| RegistryError::BadParameter {
            policy: spec.name.clone(),
            param: param.into(),
            why,
        };
        let l = spec.usize_param("L", d.l as usize)?;
        let m = spec.usize_param("M", d.m as usize)?;
        let n = spec.usize_param("N", d.n)?;
        let x = spec.usize_param("X", d.x)?;
        if l == 0 {
            return Err(bad(&format!("L={l}"), "must be at least 1".into()));
        }
        if !(1..=MAX_N).contains(&n) {
            return Err(bad(
                &format!("N={n}"),
                format!("must be between 1 and {MAX_N}"),
            ));
        }
        if !(1..=MAX_X).contains(&x) {
            return Err(bad(
                &format!("X={x}"),
                format!("must be between 1 and {MAX_X}"),
            ));
        }
        if x * n > MAX_TIMES {
            return Err(bad(
                &format!("X={x}"),
                format!("X * N must be at most {MAX_TIMES}"),
            ));
        }
        Ok(SeqParams {
            l: l as u64,
            m: m as u64,
            n,
            x,
        })
    }
}
