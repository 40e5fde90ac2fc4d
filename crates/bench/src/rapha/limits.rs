//! The launcher's fault limit, derived as RAPHA does (its Eq. 1-4) with the
//! frame manager's own rate controller: the decoder is admitted with its
//! processor reserve (its compute time per period) and its own fault limit;
//! the system's fault limit is what the reserves leave (Eq. 4); the
//! launcher, reserving no processor time, gets the system limit less the
//! decoder's faults, and is admitted only if Eq. 2 still holds. Its limit
//! is counted over a fault period of its own, shorter than the system's
//! (RAPHA's `task.fault_period`): the faults are dispersed, a few each
//! short period, rather than let through in one burst every 100 ms.
//!
//! `fault_unit` is the time the fault service (the disk and the processor
//! behind it) spends on one fault: by default a cold 4 KiB read from these
//! machines' disks (about 100 us, docs/pager.md), since it is the fault
//! service the launcher floods, not the processor alone.

use pagepilot_frames::{ManualClock, RateControl, RateError};
use serde::Serialize;

/// RAPHA's system fault period, ns (the live controller's too).
pub const SYSTEM_PERIOD_NS: u64 = 100_000_000;

/// Why no limit could be derived.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// The rate controller refused (the decoder's reserve does not fit).
    #[error("RAPHA admission")]
    Rate(#[from] RateError),
    /// The decoder's reserve and faults leave the launcher no fault.
    #[error(
        "the decoder's reserve ({pc:.3}) and its {decoder} faults per system period leave the \
         launcher none of the system's {system} (Eq. 4): lower --compute-ms or raise --fault-unit-us"
    )]
    NoneLeft {
        /// The decoder's processor capacity.
        pc: f64,
        /// Its faults per system period.
        decoder: u64,
        /// The system limit.
        system: u64,
    },
}

/// The reserves, the limits and how they were computed.
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    /// Time of the fault service per fault, us.
    pub fault_unit_us: u64,
    /// The decoder's processor reserve, compute / period (`task.pc`).
    pub decoder_pc: f64,
    /// The decoder's fault limit per its period (two per chunk).
    pub decoder_fault_limit: u64,
    /// Eq. 4: faults per system period the reserves leave.
    pub system_fault_limit: u64,
    /// The launcher's fault limit per its fault period.
    pub launcher_fault_limit: u64,
    /// The launcher's fault period, ms.
    pub launcher_fault_period_ms: u64,
    /// Eq. 1: the processor capacity the launcher's limit takes.
    pub launcher_fault_pc: f64,
}

/// Derives the limits for a decoder computing `compute_ns` every
/// `period_ns` and reading `chunks` chunks a period, the launcher's faults
/// counted per `launcher_period_ns` (at most the system period).
pub fn derive(
    period_ns: u64,
    compute_ns: u64,
    chunks: u64,
    fault_unit_ns: u64,
    launcher_period_ns: u64,
) -> Result<Limits, LimitError> {
    let mut rc = RateControl::new(fault_unit_ns, SYSTEM_PERIOD_NS, ManualClock::at(0))?;
    let pc = compute_ns as f64 / period_ns as f64;
    let decoder_fault_limit = 2 * chunks;
    rc.admit(pc, decoder_fault_limit, period_ns)?;
    let system = rc.system_fault_limit();
    let decoder = (decoder_fault_limit * SYSTEM_PERIOD_NS).div_ceil(period_ns);
    let left = system.saturating_sub(decoder);
    let launcher = left * launcher_period_ns.min(SYSTEM_PERIOD_NS) / SYSTEM_PERIOD_NS;
    if launcher == 0 {
        return Err(LimitError::NoneLeft {
            pc,
            decoder,
            system,
        });
    }
    rc.admit(0.0, launcher, launcher_period_ns)?;
    let per_system_period = launcher * SYSTEM_PERIOD_NS / launcher_period_ns;
    Ok(Limits {
        fault_unit_us: fault_unit_ns / 1000,
        decoder_pc: pc,
        decoder_fault_limit,
        system_fault_limit: system,
        launcher_fault_limit: launcher,
        launcher_fault_period_ms: launcher_period_ns / 1_000_000,
        launcher_fault_pc: rc.fault_pc(per_system_period),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn test_the_launcher_gets_what_the_decoders_reserve_and_faults_leave() {
        // fault_unit 100 us, 100 ms: 1000 faults for a free processor. The
        // decoder reserves 20/40 = 0.5 (Eq. 4: 500 left) and 2 x 5 faults
        // per 40 ms, 25 per 100 ms: the launcher gets 475.
        let l = derive(40 * MS, 20 * MS, 5, 100_000, 100 * MS).unwrap();
        assert_eq!(l.system_fault_limit, 500);
        assert_eq!(l.launcher_fault_limit, 475);
        assert!((l.launcher_fault_pc - 0.475).abs() < 1e-12);
        // Dispersed over 10 ms periods: 47 each (470 per 100 ms, Eq. 2 holds).
        let l = derive(40 * MS, 20 * MS, 5, 100_000, 10 * MS).unwrap();
        assert_eq!(
            (l.launcher_fault_limit, l.launcher_fault_period_ms),
            (47, 10)
        );
        assert!((l.launcher_fault_pc - 0.47).abs() < 1e-12);
    }

    #[test]
    fn test_a_decoder_that_leaves_no_fault_is_refused() {
        // A reserve of 1: Eq. 2 refuses the decoder's own faults.
        let err = derive(10 * MS, 10 * MS, 1, 100_000, 100 * MS).unwrap_err();
        assert!(matches!(err, LimitError::Rate(_)), "{err}");
        // 0.99 of the processor and 2 faults per 10 ms (20 per 100 ms at
        // 0.5 ms each = 0.1): Eq. 2 fails too.
        let err = derive(10 * MS, 9_900_000, 1, 500_000, 100 * MS).unwrap_err();
        let shown = pagepilot_policy::chain(&err).to_string();
        assert!(shown.contains("Eq. 2"), "{shown}");
    }
}
