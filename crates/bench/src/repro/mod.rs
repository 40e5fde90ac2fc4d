//! `pagepilot repro`: every experiment of the five papers that these machines
//! can run, in one go, written as a report (`report.md` with its PNG figures,
//! `report.json` with every number). Each experiment sets the paper's
//! numbers (constants here, with their figure or table) beside ours and names
//! the `pagepilot ...` command lines that reproduce it. Benchmarks are called
//! as library functions with the arguments their command line would give
//! (parsed by the same clap definitions, so the command shown is the command
//! run); the simulator's experiments call the simulator directly. An
//! experiment that cannot run here is reported as skipped, with the reason.

mod cache_kernel;
mod experiments;
mod hipec;
mod rapha;
pub mod report;
mod sawmill;
mod seq;
mod seq_traces;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use experiments::experiment_names;
use experiments::selected;
use report::{Claim, Entry, Report, Status};

/// Arguments of `pagepilot repro`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Smaller sizes and fewer rounds: the whole run in about 6 minutes.
    #[arg(long)]
    pub quick: bool,
    /// Smallest sizes, for tests only (the numbers mean little).
    #[arg(long, hide = true, conflicts_with = "quick")]
    pub smoke: bool,
    /// Directory of the report (created; default `repro-<date>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Only these experiments, comma-separated (see `--list`).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// List the experiments and exit.
    #[arg(long)]
    pub list: bool,
}

/// How big the experiments are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// For tests: seconds per experiment.
    Smoke,
    /// `--quick`: the whole run in about 6 minutes.
    Quick,
    /// The papers' sizes where the machine allows (about 16 minutes).
    Full,
}

impl Size {
    fn name(self) -> &'static str {
        match self {
            Size::Smoke => "smoke",
            Size::Quick => "quick",
            Size::Full => "full",
        }
    }

    /// One of three values by size.
    pub(crate) fn pick<T>(self, smoke: T, quick: T, full: T) -> T {
        match self {
            Size::Smoke => smoke,
            Size::Quick => quick,
            Size::Full => full,
        }
    }
}

/// Why `pagepilot repro` failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// `--only` named an experiment that does not exist.
    #[error("--only: no experiment named `{name}`; the experiments are: {known}")]
    UnknownExperiment {
        /// The name given.
        name: String,
        /// The names there are.
        known: String,
    },
    /// The report directory could not be made or written.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Experiments failed (the report was written and says why).
    #[error("{failed} experiment(s) failed: {names}; see {report}", report = .report.display())]
    Failed {
        /// How many.
        failed: usize,
        /// Their names.
        names: String,
        /// The report.
        report: PathBuf,
    },
}

/// Why one experiment did not produce its results.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExpError {
    /// It cannot run on this machine.
    #[error("skipped: {0}")]
    Skip(String),
    /// It failed.
    #[error("{0}")]
    Fail(String),
}

impl From<crate::BenchError> for ExpError {
    fn from(e: crate::BenchError) -> Self {
        ExpError::Fail(pagepilot_policy::chain(&e).to_string())
    }
}

/// What an experiment returns.
#[derive(Default)]
pub(crate) struct Outcome {
    pub claims: Vec<Claim>,
    pub figures: Vec<String>,
    pub commands: Vec<String>,
    pub notes: Vec<String>,
    pub data: serde_json::Value,
}

/// What every experiment sees.
pub(crate) struct Ctx {
    /// The report's directory.
    pub out: PathBuf,
    /// How big.
    pub size: Size,
    /// The traces of the SEQ experiments, made on first use.
    pub traces: std::cell::OnceCell<Result<seq_traces::Traces, String>>,
}

impl Ctx {
    /// Path of a file in the report's directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.out.join(name)
    }

    /// The SEQ experiments' traces.
    pub fn traces(&self) -> Result<&seq_traces::Traces, ExpError> {
        self.traces
            .get_or_init(|| {
                seq_traces::Traces::make(self).map_err(|e| pagepilot_policy::chain(&e).to_string())
            })
            .as_ref()
            .map_err(|e| ExpError::Fail(e.clone()))
    }
}

/// Parses `argv` (the flags after `pagepilot bench <sub>`) with the benchmark's own clap
/// definitions; returns the arguments and the command line that runs the same.
pub(crate) fn bench_args<A: clap::Args>(
    sub: &str,
    argv: &[String],
) -> Result<(A, String), ExpError> {
    let cmd = A::augment_args(clap::Command::new("pagepilot-bench").no_binary_name(true));
    let matches = cmd
        .try_get_matches_from(argv)
        .map_err(|e| ExpError::Fail(format!("bench {sub} arguments: {e}")))?;
    let args = <A as clap::FromArgMatches>::from_arg_matches(&matches)
        .map_err(|e| ExpError::Fail(format!("bench {sub} arguments: {e}")))?;
    Ok((args, command_line(&["bench", sub], argv)))
}

/// Skips a live experiment when this process cannot open a userfaultfd.
pub(crate) fn need_userfaultfd() -> Result<(), ExpError> {
    pagepilot_pager::sys::Uffd::open(0)
        .map(drop)
        .map_err(|e| ExpError::Skip(format!("no userfaultfd for this user: {e}")))
}

/// `pagepilot <words> <argv>`, arguments quoted for a shell where needed.
pub(crate) fn command_line(words: &[&str], argv: &[String]) -> String {
    shell_line("pagepilot", words, argv)
}

/// `program` with `words` and `argv`, each quoted for a POSIX shell where it
/// needs it.
pub(crate) fn shell_line(program: &str, words: &[&str], argv: &[String]) -> String {
    let quote = |a: &str| {
        if a.is_empty()
            || a.chars()
                .any(|c| !(c.is_ascii_alphanumeric() || "-_=,./:+".contains(c)))
        {
            format!("'{}'", a.replace('\'', "'\\''"))
        } else {
            a.to_string()
        }
    };
    let mut s = String::from(program);
    for w in words.iter().copied().chain(argv.iter().map(String::as_str)) {
        s.push(' ');
        s.push_str(&quote(w));
    }
    s
}

/// Strings from string slices.
pub(crate) fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

/// A serializable value as JSON (null if it cannot be).
pub(crate) fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// `/proc/loadavg`'s three averages (zeros if unreadable).
pub(crate) fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text.split_whitespace().map(|x| x.parse().unwrap_or(0.0));
    [
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    ]
}

/// UTC `(YYYY-MM-DD, HH:MM)` of `secs` since the epoch (civil-from-days).
fn utc(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!("{:02}:{:02}", rem / 3600, rem % 3600 / 60),
    )
}

/// Runs `pagepilot repro`; returns the report's directory.
pub fn run(args: Args) -> Result<PathBuf, ReproError> {
    let chosen = selected(&args.only)?;
    let size = match (args.smoke, args.quick) {
        (true, _) => Size::Smoke,
        (false, true) => Size::Quick,
        _ => Size::Full,
    };
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (date, time) = utc(secs);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("repro-{date}")));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReproError::Io { path, source }
    };
    std::fs::create_dir_all(&out).map_err(io(&out))?;
    let mut argv = Vec::new();
    if size == Size::Quick {
        argv.push("--quick".to_string());
    }
    if size == Size::Smoke {
        argv.push("--smoke".to_string());
    }
    argv.push("--out".into());
    argv.push(out.display().to_string());
    if !args.only.is_empty() {
        argv.push("--only".into());
        argv.push(chosen.iter().map(|e| e.name).collect::<Vec<_>>().join(","));
    }
    let ctx = Ctx {
        out: out.clone(),
        size,
        traces: std::cell::OnceCell::new(),
    };
    let t0 = Instant::now();
    let load_before = loadavg();
    let mut entries = Vec::new();
    for (i, e) in chosen.iter().enumerate() {
        eprintln!(
            "repro [{}/{}] {}: {} {}...",
            i + 1,
            chosen.len(),
            e.name,
            e.paper,
            e.figure
        );
        let t = Instant::now();
        let result = (e.run)(&ctx);
        let seconds = t.elapsed().as_secs_f64();
        let (status, outcome) = match result {
            Ok(o) => (Status::Ran, o),
            Err(ExpError::Skip(reason)) => (Status::Skipped { reason }, Outcome::default()),
            Err(ExpError::Fail(error)) => (Status::Failed { error }, Outcome::default()),
        };
        eprintln!(
            "repro [{}/{}] {}: {:?} in {seconds:.1} s",
            i + 1,
            chosen.len(),
            e.name,
            status
        );
        entries.push(Entry {
            name: e.name,
            paper: e.paper,
            figure: e.figure,
            title: e.title,
            status,
            seconds,
            claims: outcome.claims,
            figures: outcome.figures,
            commands: outcome.commands,
            notes: outcome.notes,
            data: outcome.data,
        });
    }
    let report = Report {
        started: format!("{date} {time} UTC"),
        size: size.name(),
        command: command_line(&["repro"], &argv),
        load_before,
        load_after: loadavg(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        wall_s: t0.elapsed().as_secs_f64(),
        experiments: entries,
    };
    report.write(&out).map_err(io(&out))?;
    println!("{}", report.summary_table());
    println!(
        "wrote {} ({:.0} s)",
        out.join("report.md").display(),
        report.wall_s
    );
    let failed: Vec<&str> = report
        .experiments
        .iter()
        .filter(|e| matches!(e.status, Status::Failed { .. }))
        .map(|e| e.name)
        .collect();
    if !failed.is_empty() {
        return Err(ReproError::Failed {
            failed: failed.len(),
            names: failed.join(", "),
            report: out.join("report.md"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_utc_dates_match_known_days() {
        assert_eq!(utc(0), ("1970-01-01".into(), "00:00".into()));
        assert_eq!(
            utc(951_782_400 + 3_660),
            ("2000-02-29".into(), "01:01".into())
        );
        assert_eq!(utc(1_764_028_800), ("2025-11-25".into(), "00:00".into()));
    }

    #[test]
    fn test_bench_arguments_parse_and_give_their_command_line() {
        let argv = strings(&["--reps", "10", "--runs", "1"]);
        let (_, line) = bench_args::<crate::appel_li::Args>("appel-li", &argv).unwrap();
        assert_eq!(line, "pagepilot bench appel-li --reps 10 --runs 1");
        let bad = strings(&["--nosuch"]);
        assert!(bench_args::<crate::appel_li::Args>("appel-li", &bad).is_err());
        assert_eq!(
            command_line(&["x"], &strings(&["a b"])),
            "pagepilot x 'a b'"
        );
    }
}
