//! The SEQ experiments' traces: the synthetic mix of the paper's three
//! behaviour classes (a cyclic sweep like `es` and `gnuplot`, up-down runs
//! like `applu`, scattered references like `coral` and `gcc`), saved next to
//! the report so that `pagepilot sim` and `pagepilot plot` can be rerun on
//! them; in quick and full runs also real programs' traces recorded with valgrind
//! lackey (`pagepilot trace record`, a separate process anyway): gzip, and
//! SQLite joining two tables without an index, which loops over the inner
//! table's pages in its page cache as `es` loops over its region.

use crate::error::IoContext;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use pagepilot_sim::synthetic::{default_mix, Behaviour, Workload};
use pagepilot_sim::trace::{self, Format};
use pagepilot_sim::Trace;
use rand::{rngs::StdRng, Rng, SeedableRng};

use super::{command_line, shell_line, strings, Ctx, Size};

/// One trace with its name and file.
pub(crate) struct Named {
    /// Short name (`sweep`, `up-down`, `scattered`, `gzip`, `sqlite`).
    pub name: String,
    /// The trace.
    pub trace: Trace,
    /// Where it was saved, relative to the report's directory.
    pub file: String,
    /// The synthetic workload it came from (for the up-down geometry).
    pub workload: Option<Workload>,
}

/// The traces of the SEQ experiments.
pub(crate) struct Traces {
    /// Sweep, up-down, scattered.
    pub synthetic: Vec<Named>,
    /// A second scattered trace (another seed), for the global mix without a
    /// sequential program.
    pub scattered2: Named,
    /// The real programs' traces, each or why there is none.
    pub real: Vec<Result<Named, String>>,
    /// The commands that recorded the real traces.
    pub real_commands: Vec<String>,
}

/// Seed of the synthetic mix.
const SEED: u64 = 1997;

impl Traces {
    /// Generates (and saves) the traces.
    pub fn make(cx: &Ctx) -> Result<Traces, crate::BenchError> {
        let dir = cx.file("traces");
        std::fs::create_dir_all(&dir).on("creating", &dir)?;
        let save = |w: Workload| -> Result<Named, crate::BenchError> {
            let t = w.generate()?;
            let file = format!("traces/{}.pptrace", w.name);
            trace::save(&t, &cx.file(&file), Format::Binary)?;
            Ok(Named {
                name: w.name.clone(),
                trace: t,
                file,
                workload: Some(w),
            })
        };
        let synthetic = default_mix(SEED)
            .into_iter()
            .map(save)
            .collect::<Result<Vec<_>, _>>()?;
        let scattered2 = save(Workload {
            name: "scattered2".into(),
            behaviour: Behaviour::Scattered {
                pages: 2500,
                references: 100_000,
                exponent: 0.9,
            },
            base: 0x4_0000,
            seed: SEED + 7,
        })?;
        let (mut real, mut real_commands) = (Vec::new(), Vec::new());
        match cx.size {
            Size::Full | Size::Quick => {
                for record in [record_gzip, record_sqlite] {
                    let (trace, commands) = record(cx);
                    real.push(trace);
                    real_commands.extend(commands);
                }
            }
            Size::Smoke => real.push(Err(
                "real traces are recorded in quick and full runs only (valgrind lackey takes 20 s or more)".into(),
            )),
        }
        Ok(Traces {
            synthetic,
            scattered2,
            real,
            real_commands,
        })
    }

    /// Every trace there is: the synthetic three, then the real ones.
    pub fn all(&self) -> Vec<&Named> {
        let mut v: Vec<&Named> = self.synthetic.iter().collect();
        v.extend(self.real.iter().flatten());
        v
    }

    /// Why real traces are missing, one line each.
    pub fn missing(&self) -> impl Iterator<Item = &String> {
        self.real.iter().filter_map(|r| r.as_ref().err())
    }

    /// The synthetic trace named `name`.
    pub fn get(&self, name: &str) -> Option<&Named> {
        self.synthetic.iter().find(|n| n.name == name)
    }
}

/// Records `gzip -1` compressing 64 KiB of generated text under valgrind
/// lackey with `pagepilot trace record`.
fn record_gzip(cx: &Ctx) -> (Result<Named, String>, Vec<String>) {
    let input = cx.file("traces/gzip-input.txt");
    let mut rng = StdRng::seed_from_u64(SEED);
    let words = [
        "page", "fault", "frame", "sequence", "policy", "region", "kernel", "pager",
    ];
    let mut text = String::new();
    while text.len() < 64 * 1024 {
        text.push_str(words[rng.gen_range(0..words.len())]);
        text.push(if rng.gen_range(0..12) == 0 { '\n' } else { ' ' });
    }
    if let Err(e) = std::fs::write(&input, text) {
        return (Err(format!("{}: {e}", input.display())), Vec::new());
    }
    let input = input.display().to_string();
    record(cx, "gzip", &["gzip", "-1", "-c", &input])
}

/// Rows of the inner table of the SQLite join, about 3 MB: 750 database
/// pages, more than the smaller memory sizes of the curves hold.
const SQLITE_INNER_ROWS: u32 = 30_000;
/// Rows of the outer table: one scan of the inner table each.
const SQLITE_OUTER_ROWS: u32 = 8;

/// Records SQLite (the `sqlite3` shell, a program nobody here wrote)
/// joining an 8-row table with a 30,000-row one on a column without an
/// index: with automatic indexes off, a nested loop that scans the inner
/// table once per outer row. Its page cache is large enough for the whole
/// database, so the scans reread the same heap pages: a loop over about
/// 900 pages of memory, with SQLite's own work beside it.
fn record_sqlite(cx: &Ctx) -> (Result<Named, String>, Vec<String>) {
    let db = cx.file("traces/join.db");
    let _ = std::fs::remove_file(&db);
    let create = format!(
        "PRAGMA page_size=4096; \
         CREATE TABLE inner_t(k INTEGER, pad TEXT); \
         WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i < {SQLITE_INNER_ROWS}) \
         INSERT INTO inner_t SELECT i, printf('%090d', i) FROM c; \
         CREATE TABLE outer_t(k INTEGER); \
         INSERT INTO outer_t SELECT k * 997 % {SQLITE_INNER_ROWS} FROM inner_t LIMIT {SQLITE_OUTER_ROWS};"
    );
    let db = db.display().to_string();
    let made = Command::new("sqlite3")
        .args([db.as_str(), create.as_str()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output();
    match made {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr);
            return (
                Err(format!("sqlite3 could not create {db}: {}", err.trim())),
                Vec::new(),
            );
        }
        Err(e) => {
            return (
                Err(format!(
                    "cannot run sqlite3 (scripts/setup installs it): {e}"
                )),
                Vec::new(),
            )
        }
    }
    let query = "PRAGMA automatic_index=OFF; PRAGMA cache_size=-16000; \
                 SELECT count(*) FROM outer_t o, inner_t i WHERE i.k = o.k;";
    let (trace, mut commands) = record(cx, "sqlite", &["sqlite3", &db, query]);
    commands.insert(0, shell_line("sqlite3", &[], &strings(&[&db, &create])));
    (trace, commands)
}

/// Records `program` under valgrind lackey with `pagepilot trace record`
/// into `traces/NAME.pptrace.zst` and loads it.
fn record(cx: &Ctx, name: &str, program: &[&str]) -> (Result<Named, String>, Vec<String>) {
    let file = format!("traces/{name}.pptrace.zst");
    let out: PathBuf = cx.file(&file);
    let mut argv = strings(&[
        "record",
        "-o",
        &out.display().to_string(),
        "--collapse",
        "--",
    ]);
    argv.extend(strings(program));
    let commands = vec![command_line(&["trace"], &argv)];
    let status = Command::new("/proc/self/exe")
        .arg("trace")
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let result = match status {
        Ok(s) if s.success() => trace::load(&out)
            .map(|t| Named {
                name: name.into(),
                trace: t,
                file,
                workload: None,
            })
            .map_err(|e| pagepilot_policy::chain(&e).to_string()),
        Ok(s) => Err(format!(
            "`pagepilot trace record` of {name} failed ({s}); is valgrind installed?"
        )),
        Err(e) => Err(format!("cannot run `pagepilot trace record`: {e}")),
    };
    (result, commands)
}
