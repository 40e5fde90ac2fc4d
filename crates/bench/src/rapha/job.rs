//! What the parent tells its two children (the decoder and the launcher),
//! what they answer, and the clock they share.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The configurations, side by side in every round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Config {
    /// Both tasks on the kernel's `mmap`, each in a memory cgroup of its budget.
    Kernel,
    /// Both tasks in pagepilot regions, no fault limit.
    Pagepilot,
    /// Both in pagepilot regions, the launcher's faults limited per period
    /// as RAPHA derives it from the decoder's reserve.
    Rapha,
    /// As [`Config::Rapha`], both tasks joined to a `pagepilot daemon` of
    /// their two budgets (each its budget as its `minFrame`, so nothing is
    /// reclaimed): the decoder's region declares its processor reserve
    /// and fault limit, and the daemon's admission control (Eq. 2) admits
    /// it and the launcher's limit across the two processes.
    #[serde(rename = "rapha+daemon")]
    RaphaDaemon,
}

impl Config {
    /// Its name in the reports.
    pub fn name(self) -> &'static str {
        match self {
            Config::Kernel => "kernel",
            Config::Pagepilot => "pagepilot",
            Config::Rapha => "rapha",
            Config::RaphaDaemon => "rapha+daemon",
        }
    }
}

/// Where a child maps its file: the kernel's mapping inside a memory
/// cgroup, or a pagepilot region (with a fault limit or not). Both tasks
/// read scattered pages and say so, each system in its own way: one page
/// per fault (`MADV_RANDOM`; a region with no read-around or read-ahead).
/// Plain `mmap` reads around a fault up to the disk's `read_ahead_kb`,
/// 8 MiB on these machines: more than the decoder's budget (its cgroup
/// killed it) and thrashing the launcher's (163 s for 64 MB, measured).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Mapping {
    /// `MAP_SHARED` of the file, the process in this cgroup (its budget
    /// plus what the process itself holds).
    Kernel {
        /// The cgroup's directory.
        cgroup: PathBuf,
    },
    /// A pagepilot region of the budget, one page per fault.
    Pagepilot {
        /// RAPHA's limit: fault events per period (ns).
        limit: Option<(u64, u64)>,
        /// Handler threads serving its faults (0: the default, one per CPU).
        handlers: usize,
        /// RAPHA's processor reserve the region declares (with its limit).
        #[serde(default)]
        reserve: f64,
    },
}

/// The periodic task with deadlines.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DecoderJob {
    /// Its data (the "movie").
    pub file: PathBuf,
    /// Frames it may hold, bytes.
    pub budget: u64,
    /// How it maps the file.
    pub mapping: Mapping,
    /// Its period, ns.
    pub period_ns: u64,
    /// Processor time it computes each period, ns.
    pub compute_ns: u64,
    /// Chunks of the file it reads each period.
    pub chunks: usize,
    /// Pages per chunk.
    pub chunk_pages: usize,
    /// Seed of the chunks' positions.
    pub seed: u64,
    /// Its processor reserve.
    pub priority: Priority,
}

/// How the decoder's processor reserve is approximated on Linux.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// None: time sharing at the default weight.
    Normal,
    /// Nice -20: the largest time-sharing weight (88761 against a default
    /// task's 1024), its I/O in the best-effort class like everyone's.
    Nice,
    /// `SCHED_FIFO`: the processor first, and (the I/O priority follows the
    /// scheduling class) the disk's queue first.
    Fifo,
}

/// The task launched beside it: it faults through a large file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LauncherJob {
    /// The file it faults through.
    pub file: PathBuf,
    /// Frames it may hold, bytes.
    pub budget: u64,
    /// How it maps the file.
    pub mapping: Mapping,
    /// Threads faulting at once.
    pub threads: usize,
    /// Interval of its fault and resident-set samples, ns.
    pub sample_ns: u64,
    /// Seed of its page order.
    pub seed: u64,
}

/// A child's job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Job {
    /// Run the decoder until its standard input closes.
    Decoder(DecoderJob),
    /// Run the launcher through its file.
    Launcher(LauncherJob),
}

/// One period of the decoder.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Frame {
    /// When the period began (its release), ns on the shared clock.
    pub release_ns: u64,
    /// When its work finished.
    pub finish_ns: u64,
    /// How long it took to read its chunks (its faults), ns.
    pub read_ns: u64,
}

/// What the decoder reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DecoderOut {
    /// Every period it ran, in order.
    pub frames: Vec<Frame>,
    /// Whether its priority could be set (root).
    pub realtime: bool,
    /// Fault events it took (pagepilot) or major faults (kernel).
    pub faults: u64,
    /// Of them, how many its fault limit postponed (pagepilot).
    #[serde(default)]
    pub postponed: u64,
    /// Messages its process sent the daemon, all told (under one).
    #[serde(default)]
    pub messages_sent: Option<u64>,
}

/// One sample of the launcher.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Sample {
    /// When, ns on the shared clock.
    pub at_ns: u64,
    /// Fault events so far (pagepilot), or major faults (kernel).
    pub faults: u64,
    /// Pages resident: the region's frames in use, or the file pages mapped
    /// (`RssFile`).
    pub resident_pages: u64,
}

/// What the launcher reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LauncherOut {
    /// When it began (before mapping its file), ns on the shared clock.
    pub start_ns: u64,
    /// When its last thread had touched its last page.
    pub end_ns: u64,
    /// Samples every `sample_ns` from `start_ns`, the last at `end_ns`.
    pub samples: Vec<Sample>,
    /// Fault events (pagepilot) or major faults (kernel) in all.
    pub faults: u64,
    /// Faults its fault limit postponed (pagepilot).
    pub postponed: u64,
    /// Pages it touched, each checked against the file.
    pub pages: u64,
    /// Messages its process sent the daemon, all told (under one).
    #[serde(default)]
    pub messages_sent: Option<u64>,
}

/// Now on the clock both children and the parent read: wall time since the
/// epoch, ns (they are different processes).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The page number a data-file page holds in bytes 8..16 (see `datafile`).
pub const PAGE_NUMBER_AT: usize = 8;
