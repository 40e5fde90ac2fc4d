//! `pagepilot bench policy`: the cost of one PageFault event for an
//! interpreted policy program (`fifo2.hp` unless `--program`) against the
//! native built-in making the same decisions (CLOCK unless `--native`),
//! measured side by side in one run.
//!
//! Both policies make the same decisions (checked before timing), so one
//! trace gives both the same sequence of events. Each run simulates the whole
//! trace four ways: with the native policy, with the interpreted program,
//! with the same program without the load-time optimiser, and with a replay
//! policy that returns the native policy's recorded victims at almost no
//! cost. The replay run's time is the engine's share; subtracting it leaves
//! the policy's, which is divided by the number of PageFault events that
//! chose a victim. Runs rotate the order of the four; times are the thread's
//! CPU time; medians are reported.

use pagepilot_policy::program::{self, verify, ProgramPolicy, RunConfig};
use pagepilot_policy::registry::{self, Built, Setup};
use pagepilot_policy::{Fault, Memory, Page, Policy};
use pagepilot_sim::{simulate, Trace};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;

use crate::cmd::CmdResult;

const FIFO2: &str = include_str!("../../../../../policies/fifo2.hp");

/// Arguments of `pagepilot bench policy`.
#[derive(clap::Args)]
pub struct Args {
    /// Output format: table or json.
    #[arg(long, default_value = "table")]
    format: String,
    /// Distinct pages of the synthetic trace.
    #[arg(long, default_value_t = 8192)]
    pages: u64,
    /// Frames of memory.
    #[arg(long, default_value_t = 2048)]
    frames: usize,
    /// References in the trace.
    #[arg(long, default_value_t = 400_000)]
    refs: usize,
    /// Runs (the median is reported).
    #[arg(long, default_value_t = 21)]
    runs: usize,
    /// Program to measure instead of the built-in copy of policies/fifo2.hp.
    #[arg(long)]
    program: Option<std::path::PathBuf>,
    /// Native built-in that makes the program's decisions (`clock` for
    /// fifo2.hp and lru.hp, `mru-live` for mru.hp).
    #[arg(long, default_value = "clock")]
    native: String,
    /// For profiling (`perf stat`/`perf record`): time only this variant
    /// (native, interpreted, unoptimised or replay) and print its run time.
    #[arg(long, hide = true)]
    only: Option<String>,
}

/// What `pagepilot bench policy` reports.
#[derive(Serialize)]
struct Report {
    program: String,
    native: String,
    pages: u64,
    frames: usize,
    refs: usize,
    runs: usize,
    /// PageFault events that chose a victim, per run.
    events: u64,
    native_ns_per_event: f64,
    interpreted_ns_per_event: f64,
    /// interpreted / native.
    ratio: f64,
    /// Percent the interpreter adds to the native decision.
    added_percent: f64,
    /// The program without the load-time optimiser.
    unoptimised_ns_per_event: f64,
    /// unoptimised / native.
    unoptimised_ratio: f64,
    /// The engine's own share per event (replay run), subtracted from both.
    engine_ns_per_event: f64,
    /// Median whole-run thread CPU times, ms.
    native_run_ms: f64,
    interpreted_run_ms: f64,
    unoptimised_run_ms: f64,
    replay_run_ms: f64,
}

/// The native policy, recording its victims.
struct Recording {
    inner: Box<dyn Policy>,
    victims: std::sync::Arc<std::sync::Mutex<Vec<Page>>>,
}

impl Policy for Recording {
    fn name(&self) -> String {
        format!("{}-recording", self.inner.name())
    }
    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        self.inner.on_fault(fault, mem);
    }
    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        let v = self.inner.victim(incoming, mem);
        if let (Some(v), Ok(mut log)) = (v, self.victims.lock()) {
            log.push(v);
        }
        v
    }
    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        self.inner.on_evict(page, mem);
    }
}

/// Returns recorded victims: the engine's cost with a free decision.
struct Replay {
    victims: std::sync::Arc<Vec<Page>>,
    next: usize,
}

impl Policy for Replay {
    fn name(&self) -> String {
        "replay".into()
    }
    fn on_fault(&mut self, _fault: Fault, _mem: &mut dyn Memory) {}
    fn victim(&mut self, _incoming: Page, _mem: &mut dyn Memory) -> Option<Page> {
        let v = self.victims.get(self.next).copied();
        self.next += 1;
        v
    }
    fn on_evict(&mut self, _page: Page, _mem: &mut dyn Memory) {}
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs `pagepilot bench policy`.
pub fn run(args: Args) -> CmdResult {
    if !matches!(args.format.as_str(), "table" | "json") {
        return Err(format!("--format {}: expected `table` or `json`", args.format).into());
    }
    let (name, program) = match &args.program {
        Some(path) => (path.display().to_string(), program::load(path)?),
        None => (
            "fifo2.hp".to_string(),
            verify(program::translator::translate(FIFO2).map_err(|e| format!("fifo2.hp:{e}"))?)
                .map_err(|e| format!("fifo2.hp: {e}"))?,
        ),
    };
    let mut rng = StdRng::seed_from_u64(42);
    // Uniform references: most are faults, and CLOCK's hand passes over a
    // few referenced pages per decision.
    let trace = Trace::from_pages((0..args.refs).map(|_| rng.gen_range(0..args.pages.max(2))));
    let frames = args.frames.max(1);
    let slots = trace.distinct();
    let setup = Setup {
        slots,
        frames,
        future: None,
    };
    let native_policy = || registry::build_live(&args.native, &setup);
    let interpreted = |optimise: bool| -> Box<dyn Policy> {
        let p = ProgramPolicy::new(&name, &program, RunConfig::default(), slots, frames);
        Box::new(if optimise {
            p
        } else {
            p.without_optimiser(&program)
        })
    };

    let native_counters = simulate(&trace, Built::Live(native_policy()?), frames);
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    simulate(
        &trace,
        Built::Live(Box::new(Recording {
            inner: native_policy()?,
            victims: log.clone(),
        })),
        frames,
    );
    let recorded = std::mem::take(&mut *log.lock().map_err(|_| "victim log poisoned")?);
    let victims = std::sync::Arc::new(recorded);
    let events = victims.len() as u64;
    if events == 0 {
        return Err("no PageFault event had to choose a victim: use more --refs or --pages, or fewer --frames".into());
    }
    for optimise in [true, false] {
        let c = simulate(&trace, Built::Live(interpreted(optimise)), frames);
        if c != native_counters {
            return Err(format!(
                "{name} (optimiser {}) counts {c:?}, native `{}` {native_counters:?}: not a like-for-like comparison",
                if optimise { "on" } else { "off" },
                args.native
            )
            .into());
        }
    }

    let runs = args.runs.max(1);
    if let Some(only) = &args.only {
        let which = ["native", "interpreted", "unoptimised", "replay"]
            .iter()
            .position(|w| w == only)
            .ok_or_else(|| {
                format!("--only {only}: expected native, interpreted, unoptimised or replay")
            })?;
        let t = pagepilot_pager::sys::thread_cpu_ns();
        for _ in 0..runs {
            let policy: Box<dyn Policy> = match which {
                0 => native_policy()?,
                1 => interpreted(true),
                2 => interpreted(false),
                _ => Box::new(Replay {
                    victims: victims.clone(),
                    next: 0,
                }),
            };
            std::hint::black_box(simulate(&trace, Built::Live(policy), frames));
        }
        let ns = pagepilot_pager::sys::thread_cpu_ns().saturating_sub(t) as f64;
        println!(
            "{only}: {:.1} ns/event including the engine ({events} events/run, {runs} runs)",
            ns / (events * runs as u64) as f64
        );
        return Ok(());
    }
    let mut times: [Vec<f64>; 4] = Default::default();
    for r in 0..runs {
        for k in 0..4 {
            let which = (k + r) % 4;
            let policy: Box<dyn Policy> = match which {
                0 => native_policy()?,
                1 => interpreted(true),
                2 => interpreted(false),
                _ => Box::new(Replay {
                    victims: victims.clone(),
                    next: 0,
                }),
            };
            let t = pagepilot_pager::sys::thread_cpu_ns();
            let c = simulate(&trace, Built::Live(policy), frames);
            let ms = pagepilot_pager::sys::thread_cpu_ns().saturating_sub(t) as f64 / 1e6;
            std::hint::black_box(c);
            times[which].push(ms);
        }
    }
    let [native, interp, plain, replay] = times;
    let u = median(plain);
    let (n, i, e) = (median(native), median(interp), median(replay));
    let per = |ms: f64| (ms - e).max(0.0) * 1e6 / events.max(1) as f64;
    let (native_ns, interp_ns) = (per(n), per(i));
    let plain_ns = per(u);
    let report = Report {
        program: name.clone(),
        native: args.native.clone(),
        pages: args.pages,
        frames,
        refs: args.refs,
        runs,
        events,
        native_ns_per_event: native_ns,
        interpreted_ns_per_event: interp_ns,
        ratio: interp_ns / native_ns.max(1e-9),
        added_percent: (interp_ns / native_ns.max(1e-9) - 1.0) * 100.0,
        unoptimised_ns_per_event: plain_ns,
        unoptimised_ratio: plain_ns / native_ns.max(1e-9),
        engine_ns_per_event: e * 1e6 / events.max(1) as f64,
        native_run_ms: n,
        interpreted_run_ms: i,
        unoptimised_run_ms: u,
        replay_run_ms: e,
    };
    if args.format == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "PageFault event cost, {name} interpreted vs native `{}` ({events} events/run, median of {runs} runs)",
            args.native
        );
        println!(
            "  native {:<12} {:8.1} ns/event",
            args.native, report.native_ns_per_event
        );
        println!(
            "  interpreted         {:8.1} ns/event  ratio {:.2}x  (adds {:.0}%)",
            report.interpreted_ns_per_event, report.ratio, report.added_percent
        );
        println!(
            "  optimiser off       {:8.1} ns/event  ratio {:.2}x",
            report.unoptimised_ns_per_event, report.unoptimised_ratio
        );
        println!(
            "  engine share      {:8.1} ns/event (subtracted)",
            report.engine_ns_per_event
        );
    }
    Ok(())
}
