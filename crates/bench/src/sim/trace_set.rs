//! `--trace-set`: named traces `bench sim` can run instead of `--trace
//! PATH`, each with its own default prefix.

use std::path::PathBuf;

use super::lcs::target_dir;
use super::SimArgError;

/// The traces `--trace-set` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceSet {
    /// The benchmark's own synthetic trace (sweeps, loops, random pages).
    #[default]
    Synthetic,
    /// The hit-heavy real trace: GNU sort over 30 MB of seeded lines under
    /// valgrind lackey, recorded by `scripts/hit-heavy-trace` into
    /// `target/hit-heavy.pptrace` (about 9,200 pages, nearly all hits).
    HitHeavy,
}

/// References of the hit-heavy trace the benchmark runs by default (of
/// about 96 M recorded).
pub const HIT_HEAVY_REFS: u64 = 64_000_000;

impl TraceSet {
    /// The trace file and default prefix of a recorded set, `None` for the
    /// synthetic trace (built in memory). A recorded set must exist: the
    /// error names the script that records it.
    pub fn file(self) -> Result<Option<(PathBuf, u64)>, SimArgError> {
        match self {
            TraceSet::Synthetic => Ok(None),
            TraceSet::HitHeavy => {
                let path = target_dir().join("hit-heavy.pptrace");
                if !path.exists() {
                    return Err(SimArgError::MissingTrace(path));
                }
                Ok(Some((path, HIT_HEAVY_REFS)))
            }
        }
    }
}
