//! `pagepilot sim --plot`: fault rate against memory size.

use std::path::Path;

use pagepilot_sim::report::Row;

/// Plots the fault-rate curves of `rows` (one curve per policy) to `path`.
pub fn fault_rate_curves(rows: &[Row], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let _ = rows;
    Err(format!("{}: plotting not available in this build", path.display()).into())
}
