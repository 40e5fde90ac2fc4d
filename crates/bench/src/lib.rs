//! The benchmark machinery behind `pagepilot bench ...`: workloads run by
//! pagepilot and by the kernel (a child process in a memory cgroup of the
//! same limit), side by side, reported as ratios; probes of a fault's cost;
//! the simulator's and policy programs' throughput. The CLI is a thin front
//! over [`Command`] and [`run`].

/// What a benchmark returns: its report is printed; an error names what failed.
pub type BenchResult = Result<(), BenchError>;

pub use error::BenchError;

mod aim;
mod appel_li;
pub mod apps;
mod cgroup;
mod child;
mod cjoin;
mod cold;
mod daemon;
mod datafile;
mod emit;
mod error;
mod far;
mod faults;
mod fork;
mod fork_ways;
pub mod join;
mod kernel;
mod live;
mod measure;
mod parallel_fill;
mod policy;
mod probe;
mod rapha;
pub mod repro;
mod scale;
mod scan;
mod share;
mod sigprobe;
mod sim;
mod window;
mod workload;

/// Benchmarks.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Simulator throughput and whole-curve cost.
    Sim(sim::Args),
    /// Policy-program interpretation against the native decision.
    Policy(policy::Args),
    /// The nested-loops join, live, against the kernel.
    Join(join::Args),
    /// Cost of a fault served by pagepilot against the kernel's own.
    Faults(faults::Args),
    /// First touches of a large file, cold and warm, against the kernel's mmap and pread.
    Scan(scan::Args),
    /// Cost of a fork with dirty pages in a file region against the kernel's mapping.
    Fork(fork::Args),
    /// Forked workers filling one array (a file larger than the memory cgroup) that the parent
    /// then checks: the kernel's mapping, pagepilot's defaults and tuned, side by side.
    ParallelFill(parallel_fill::Args),
    /// The price of serving a forked child's faults from the parent's handler
    /// (`UFFD_FEATURE_EVENT_FORK`): `fork()` latency and a child's fault against the parent's.
    ForkWays(fork_ways::Args),
    /// Regions from 1 GiB to 8 TiB under a fixed budget: memory, time per touch, map and
    /// unmap, against the kernel's mmap.
    Scale(scale::Args),
    /// Two joins at once: one frame pool (MRU and CLOCK, each its minimum), the same as two
    /// processes under a pagepilot daemon, against the kernel with both in one memory cgroup.
    Share(share::Args),
    /// RAPHA's experiment: a periodic task with deadlines beside a launcher faulting through
    /// a large file, under the kernel, pagepilot, pagepilot with RAPHA's fault limits, and the
    /// same with both tasks joined to a pagepilot daemon.
    Rapha(rapha::Args),
    /// The Appel-Li virtual memory primitives (SawMill's Table 1): pagepilot's write-protect
    /// through userfaultfd against `mprotect` and a SIGSEGV handler, beside the paper's columns.
    AppelLi(appel_li::Args),
    /// Page-ins of a region on far memory (a Redis Cluster, pagepilot-far): batched windows
    /// against one GET per page and a local file, 1/2/4 threads, against a PING's round trip.
    Far(far::Args),
    /// Real programs (sqlite3, numpy, ripgrep, lmdb) over data larger than a memory cgroup:
    /// plainly, under `pagepilot run` with its defaults, and with the policy right for each.
    Apps(apps::Args),
    /// HiPEC's Figure 5, an AIM Suite III analogue: simulated users running compute, file and
    /// memory jobs, their throughput with no pagepilot and beside a pagepilot daemon and region.
    Aim(aim::Args),
    /// Runs a child of a benchmark: the bench re-executing itself ([`child`]).
    #[command(name = "internal-child", hide = true)]
    InternalChild(child::Args),
}

/// Runs a benchmark.
pub fn run(command: Command) -> BenchResult {
    match command {
        Command::Sim(a) => sim::run(a),
        Command::Policy(a) => policy::run(a),
        Command::Join(a) => join::run(a),
        Command::Faults(a) => faults::run(a),
        Command::Scan(a) => scan::run(a),
        Command::Fork(a) => fork::run(a),
        Command::ParallelFill(a) => parallel_fill::run(a),
        Command::ForkWays(a) => fork_ways::run(a),
        Command::Scale(a) => scale::run(a),
        Command::Share(a) => share::run(a),
        Command::Rapha(a) => rapha::run(a),
        Command::AppelLi(a) => appel_li::run(a),
        Command::Far(a) => far::run(a),
        Command::Apps(a) => apps::run(a),
        Command::Aim(a) => aim::run(a),
        Command::InternalChild(a) => child::main(a),
    }
}
