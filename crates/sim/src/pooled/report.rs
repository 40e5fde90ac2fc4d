//! What a pooled run reports: per process its faults, frames, reclaims and
//! postponements; the frames each held over time; as a table or JSON.

use std::io::Write;

use serde::Serialize;

use crate::Counters;

/// What one process did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessReport {
    /// Its name.
    pub name: String,
    /// Its policy spec.
    pub policy: String,
    /// Its `minFrame`.
    pub min_frames: usize,
    /// Of its frames, those set aside for read-ahead windows.
    pub readahead_frames: usize,
    /// Its machine's counters: references, faults (page-ins, first
    /// touches included), minor faults, evictions, write-backs.
    #[serde(flatten)]
    pub counters: Counters,
    /// Most frames it held at once.
    pub held_max: usize,
    /// Frames asked for with `Request`.
    pub requested: u64,
    /// Of those, frames granted.
    pub granted: u64,
    /// Frames given back with `Release`.
    pub released: u64,
    /// Reclamations it completed itself (its `ReclaimFrame` event ran).
    pub reclaims: u64,
    /// Frames it gave back in them.
    pub reclaimed_frames: u64,
    /// Reclamations it missed the deadline of: forced.
    pub forced_reclaims: u64,
    /// Frames taken from it by force.
    pub forced_frames: u64,
    /// RAPHA: its fault limit per period.
    pub fault_limit: Option<u64>,
    /// RAPHA: most missing faults it took in one of its periods.
    pub max_faults_per_period: Option<u64>,
    /// Faults postponed to a next period (each postponement counted).
    pub postponed: u64,
    /// Time the postponements added, reference times.
    pub postponed_delay: u64,
    /// Mean delay of a postponement, reference times.
    pub postponed_delay_mean: f64,
    /// When its last reference ran.
    pub finished_at: u64,
    /// Policy incidents (for example a program stopped by its budget).
    pub incidents: Vec<String>,
}

/// Frames each process held at one time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Reference time.
    pub time: u64,
    /// Per process, in the order given (0 once it ended).
    pub held: Vec<usize>,
}

/// One pooled run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PooledRun {
    /// Frames in the pool.
    pub pool_frames: usize,
    /// The `partition_burst` watermark in force.
    pub partition_burst: usize,
    /// Reference times a process had to give frames back.
    pub reclaim_deadline: u64,
    /// Quantum, reference times.
    pub quantum: u64,
    /// Fault service time, reference times.
    pub service: u64,
    /// RAPHA: the system's fault limit per system period (Eq. 4).
    pub system_fault_limit: Option<u64>,
    /// RAPHA: most missing faults of all processes in one system period.
    pub max_system_faults_per_period: Option<u64>,
    /// Time from start to the last reference, idle time included.
    pub elapsed: u64,
    /// Time no process was ready.
    pub idle: u64,
    /// Per process, in the order given.
    pub processes: Vec<ProcessReport>,
    /// Frames held over time.
    pub samples: Vec<Sample>,
}

impl PooledRun {
    /// Writes the run as a table, one row per process.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "frame pool: {} frames, partition_burst {}, reclaim deadline {}, quantum {}, \
             service {}; elapsed {} (idle {})",
            self.pool_frames,
            self.partition_burst,
            self.reclaim_deadline,
            self.quantum,
            self.service,
            self.elapsed,
            self.idle
        )?;
        if let Some(limit) = self.system_fault_limit {
            writeln!(
                out,
                "RAPHA: system limit {limit} faults per period, most taken in one: {}",
                self.max_system_faults_per_period.unwrap_or(0)
            )?;
        }
        writeln!(
            out,
            "{:<24} {:<12} {:>7} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12} {:>12} {:>9} {:>10}",
            "process",
            "policy",
            "minFrm",
            "refs",
            "faults",
            "held max",
            "granted",
            "released",
            "reclaims",
            "forced",
            "postponed",
            "mean delay"
        )?;
        for p in &self.processes {
            writeln!(
                out,
                "{:<24} {:<12} {:>7} {:>10} {:>9} {:>8} {:>8} {:>8} {:>12} {:>12} {:>9} {:>10.1}",
                clip(&p.name, 24),
                clip(&p.policy, 12),
                p.min_frames,
                p.counters.references,
                p.counters.faults,
                p.held_max,
                p.granted,
                p.released,
                format!("{} ({}f)", p.reclaims, p.reclaimed_frames),
                format!("{} ({}f)", p.forced_reclaims, p.forced_frames),
                p.postponed,
                p.postponed_delay_mean
            )?;
        }
        for p in self.processes.iter().filter(|p| !p.incidents.is_empty()) {
            for incident in &p.incidents {
                writeln!(out, "{}: {incident}", p.name)?;
            }
        }
        Ok(())
    }
}

/// The last `width` characters of `s` (file names keep their ends).
fn clip(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - (width - 1)).collect();
    format!("…{tail}")
}
