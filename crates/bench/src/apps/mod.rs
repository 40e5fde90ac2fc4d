//! `pagepilot bench apps`: real, unmodified programs over data larger than the memory, side
//! by side: each run plainly (the kernel), under `pagepilot run` with its defaults, and
//! under `pagepilot run --policy BEST --budget B` (BEST from a table per application, B the
//! limit less `--headroom`, half the limit by default), every run in a fresh memory cgroup of `--memory` (the program,
//! pagepilot's frames and pagepilot's own memory all inside), from a dropped page cache.
//! The three rows alternate within each round (starting one row further each round);
//! medians of `--runs` rounds are reported with the kernel's time over each row's, the bytes
//! read from the disk and, for pagepilot's rows, the page-ins its interposer logged.

mod app;
mod data;
mod error;
mod exec;
mod lmdb;
mod numpy;
mod report;
mod ripgrep;
mod rounds;
mod runlog;
mod sqlite;
mod text;
mod tools;
mod variant;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use app::App;
pub use error::AppsError;

use app::Workload;
use data::DataCx;
use report::{AppReport, AppsReport, Row};
use variant::{Launcher, Variant};

use crate::emit::{emit, Format};
use crate::error::IoContext;
use crate::measure::check_range;
use crate::{BenchError, BenchResult};

/// Arguments of `pagepilot bench apps`.
#[derive(clap::Args)]
pub struct Args {
    /// Applications, in order: sqlite, numpy, ripgrep, lmdb.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "sqlite,numpy,ripgrep,lmdb"
    )]
    apps: Vec<App>,
    /// Every row's memory cgroup limit (e.g. 128M); the data's sizes are relative to it.
    #[arg(long, value_parser = size, default_value = "128M")]
    memory: u64,
    /// Rounds; every row runs once a round, medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The best row's policy of an application instead of the table's: APP=POLICY
    /// (repeatable; e.g. sqlite=seq, lmdb=sieve).
    #[arg(long = "policy", value_name = "APP=POLICY", value_parser = app::parse_override)]
    policies: Vec<(App, String)>,
    /// What the best row's budget leaves of the limit, for pagepilot's own memory and the
    /// program's heap and libraries (the budget is --memory less this; default: half).
    #[arg(long, value_parser = size)]
    headroom: Option<u64>,
    /// Directory of the data, made once and reused (on a disk, not tmpfs).
    #[arg(long, default_value = data::DEFAULT_DIR)]
    dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Longest one run may take, seconds; a slower one is killed and reported as such.
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
    /// sqlite: outer rows of the join, one scan of the inner table each. The counts' defaults
    /// make a kernel run 10-40 s at the default --memory on these machines (a 64M run of 40
    /// outer rows, 8 passes, 20 patterns and 100 000 gets took 3, 2.5, 2.5 and 6 s).
    #[arg(long, default_value_t = 100)]
    sqlite_outer: usize,
    /// numpy: k-means passes over the array.
    #[arg(long, default_value_t = 16)]
    numpy_passes: usize,
    /// ripgrep: `rg` processes, one pattern each.
    #[arg(long, default_value_t = 50)]
    rg_passes: usize,
    /// lmdb: random gets.
    #[arg(long, default_value_t = 200_000)]
    lmdb_gets: usize,
}

fn size(text: &str) -> Result<u64, String> {
    crate::scale::parse_size(text).map_err(|e| e.to_string())
}

/// Runs `pagepilot bench apps`.
pub fn run(args: Args) -> BenchResult {
    let format = args.format;
    let report = measure(args)?;
    let mut out = std::io::stdout().lock();
    emit(&mut out, format, &report, |out| {
        text::write_text(out, &report)
    })
    .doing("writing the report")?;
    Ok(())
}

/// Checks the counts; the first bad one is named.
fn validate(args: &Args) -> Result<(), BenchError> {
    check_range("--runs", args.runs, 100)?;
    check_range("--sqlite-outer", args.sqlite_outer, sqlite::OUTER_ROWS)?;
    check_range("--numpy-passes", args.numpy_passes, 1000)?;
    check_range("--rg-passes", args.rg_passes, 1000)?;
    check_range("--lmdb-gets", args.lmdb_gets, 1 << 30)?;
    check_range("--timeout-s", args.timeout_s as usize, 86_400)?;
    if args.apps.is_empty() {
        return Err(BenchError::EmptyList {
            option: "--apps",
            why: "needs at least one application",
        });
    }
    Ok(())
}

/// An application's data and command line.
fn prepare(app: App, cx: &DataCx, args: &Args) -> Result<Workload, BenchError> {
    match app {
        App::Sqlite => sqlite::prepare(cx, args.sqlite_outer),
        App::Numpy => numpy::prepare(cx, args.numpy_passes),
        App::Ripgrep => ripgrep::prepare(cx, args.rg_passes),
        App::Lmdb => lmdb::prepare(cx, args.lmdb_gets),
    }
}

/// One application being measured: its command, its rows, the output every run must print.
struct Bench {
    workload: Workload,
    policy: String,
    report: AppReport,
}

/// Runs every round and returns the report.
fn measure(args: Args) -> Result<AppsReport, BenchError> {
    validate(&args)?;
    let t0 = Instant::now();
    let mut apps: Vec<App> = Vec::new();
    for &a in &args.apps {
        if !apps.contains(&a) {
            apps.push(a);
        }
    }
    crate::kernel::baseline_available().map_err(AppsError::from)?;
    let python = tools::check(&apps)?;
    let budget = variant::best_budget(args.memory, args.headroom.unwrap_or(args.memory / 2))?;
    let launcher = Launcher::find(variant::log_dir())?;
    data::ensure_dir(&args.dir)?;
    let cx = DataCx {
        dir: args.dir.clone(),
        memory: args.memory,
        python,
    };
    let mut benches = Vec::new();
    for &app in &apps {
        let (policy, why) = match args.policies.iter().rev().find(|(a, _)| *a == app) {
            Some((_, p)) => (p.clone(), "chosen with --policy".to_string()),
            None => (app.best().policy.to_string(), app.best().why.to_string()),
        };
        crate::live::check_policy(&policy)?;
        let workload = prepare(app, &cx, &args)?;
        let label = crate::scale::size_label(budget);
        let rows = vec![
            Row::new(Variant::Kernel, "-", "-".into()),
            Row::new(Variant::Defaults, pagepilot_default_policy(), "auto".into()),
            Row::new(Variant::Best, &policy, label),
        ];
        let report = AppReport {
            app,
            what: workload.what.clone(),
            data: workload.data.clone(),
            data_bytes: workload.data_bytes,
            best_why: why,
            output: None,
            rows,
            kernel_over_defaults: None,
            kernel_over_best: None,
        };
        benches.push(Bench {
            workload,
            policy,
            report,
        });
    }
    std::fs::create_dir_all(&launcher.log_dir).on("creating", &launcher.log_dir)?;
    let timeout = Duration::from_secs(args.timeout_s);
    let result = rounds::rounds(&mut benches, &launcher, &args, budget, timeout);
    let _ = std::fs::remove_dir_all(&launcher.log_dir);
    result?;
    let apps = benches
        .into_iter()
        .map(|mut b| {
            b.report.settle();
            b.report
        })
        .collect();
    Ok(AppsReport {
        bench: "apps",
        memory_bytes: args.memory,
        runs: args.runs,
        best_budget_bytes: budget,
        dir: args.dir,
        apps,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// `pagepilot run`'s policy when given none (its `--policy` default).
fn pagepilot_default_policy() -> &'static str {
    "seq"
}
