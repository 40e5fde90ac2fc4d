//! The SEQ experiments' traces: the synthetic mix of the paper's three
//! behaviour classes (a cyclic sweep like `es` and `gnuplot`, up-down runs
//! like `applu`, scattered references like `coral` and `gcc`), saved next to
//! the report so that `pagepilot sim` and `pagepilot plot` can be rerun on
//! them; in quick and full runs also a real program's trace recorded with valgrind
//! lackey (`pagepilot trace record`, a separate process anyway).

use crate::error::IoContext;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use pagepilot_sim::synthetic::{default_mix, Behaviour, Workload};
use pagepilot_sim::trace::{self, Format};
use pagepilot_sim::Trace;
use rand::{rngs::StdRng, Rng, SeedableRng};

use super::{command_line, strings, Ctx, Size};

/// One trace with its name and file.
pub(crate) struct Named {
    /// Short name (`sweep`, `up-down`, `scattered`, `gzip`).
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
    /// The real program's trace, or why there is none.
    pub real: Result<Named, String>,
    /// The commands that recorded the real trace.
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
        let (real, real_commands) = match cx.size {
            Size::Full | Size::Quick => record_real(cx),
            Size::Smoke => (
                Err("the real trace is recorded in quick and full runs only (valgrind lackey takes 20 s or more)".into()),
                Vec::new(),
            ),
        };
        Ok(Traces {
            synthetic,
            scattered2,
            real,
            real_commands,
        })
    }

    /// Every trace there is: the synthetic three, then the real one.
    pub fn all(&self) -> Vec<&Named> {
        let mut v: Vec<&Named> = self.synthetic.iter().collect();
        if let Ok(r) = &self.real {
            v.push(r);
        }
        v
    }

    /// The synthetic trace named `name`.
    pub fn get(&self, name: &str) -> Option<&Named> {
        self.synthetic.iter().find(|n| n.name == name)
    }
}

/// Records `gzip -1` compressing 64 KiB of generated text under valgrind
/// lackey with `pagepilot trace record`.
fn record_real(cx: &Ctx) -> (Result<Named, String>, Vec<String>) {
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
    let file = "traces/gzip.pptrace.zst".to_string();
    let out: PathBuf = cx.file(&file);
    let argv = strings(&[
        "record",
        "-o",
        &out.display().to_string(),
        "--collapse",
        "--",
        "gzip",
        "-1",
        "-c",
        &input.display().to_string(),
    ]);
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
                name: "gzip".into(),
                trace: t,
                file,
                workload: None,
            })
            .map_err(|e| pagepilot_policy::chain(&e).to_string()),
        Ok(s) => Err(format!(
            "`pagepilot trace record` failed ({s}); is valgrind installed?"
        )),
        Err(e) => Err(format!("cannot run `pagepilot trace record`: {e}")),
    };
    (result, commands)
}
