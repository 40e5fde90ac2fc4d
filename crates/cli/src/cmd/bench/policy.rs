//! `pagepilot bench policy`: the cost of one PageFault event for the
//! interpreted `fifo2.hp` against the native CLOCK decision, measured side by
//! side in one run.
//!
//! Both policies make the same decisions (the test suite checks it), so one
//! trace gives both the same sequence of events. Each run simulates the whole
//! trace three ways: with native CLOCK, with the interpreted program, and with
//! a replay policy that returns CLOCK's recorded victims at almost no cost.
//! The replay run's time is the engine's share; subtracting it leaves the
//! policy's, which is divided by the number of PageFault events that chose a
//! victim. Runs alternate the order of the three; times are the thread's CPU
//! time; medians are reported.

use pagepilot_policy::builtin::Clock;
use pagepilot_policy::program::{self, verify, ProgramPolicy, RunConfig};
use pagepilot_policy::registry::Built;
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
}

/// What `pagepilot bench policy` reports.
#[derive(Serialize)]
struct Report {
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
    /// The engine's own share per event (replay run), subtracted from both.
    engine_ns_per_event: f64,
    /// Median whole-run thread CPU times, ms.
    native_run_ms: f64,
    interpreted_run_ms: f64,
    replay_run_ms: f64,
}

/// CLOCK that records its victims.
struct Recording {
    inner: Clock,
    victims: std::sync::Arc<std::sync::Mutex<Vec<Page>>>,
}

impl Policy for Recording {
    fn name(&self) -> String {
        "clock-recording".into()
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

/// CPU time of this thread, ns: unlike wall time it excludes the time the
/// thread waits for a core, which on a shared 2-core machine is most noise.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
    let program = match &args.program {
        Some(path) => program::load(path)?,
        None => verify(program::translator::translate(FIFO2).map_err(|e| format!("fifo2.hp:{e}"))?)
            .map_err(|e| format!("fifo2.hp: {e}"))?,
    };
    let mut rng = StdRng::seed_from_u64(42);
    // Uniform references: most are faults, and CLOCK's hand passes over a
    // few referenced pages per decision.
    let trace = Trace::from_pages((0..args.refs).map(|_| rng.gen_range(0..args.pages.max(2))));
    let frames = args.frames.max(1);
    let slots = trace.distinct();

    let native_counters = simulate(&trace, Built::Live(Box::new(Clock::new())), frames);
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    simulate(
        &trace,
        Built::Live(Box::new(Recording {
            inner: Clock::new(),
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
    let interp_counters = simulate(
        &trace,
        Built::Live(Box::new(ProgramPolicy::new(
            "fifo2.hp",
            &program,
            RunConfig::default(),
            slots,
            frames,
        ))),
        frames,
    );
    if interp_counters.faults != native_counters.faults {
        return Err(format!(
            "the program's faults ({}) differ from CLOCK's ({}); not a like-for-like comparison",
            interp_counters.faults, native_counters.faults
        )
        .into());
    }

    let runs = args.runs.max(1);
    let (mut native, mut interp, mut replay) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        for k in 0..3 {
            let which = (k + r) % 3;
            let policy: Box<dyn Policy> = match which {
                0 => Box::new(Clock::new()),
                1 => Box::new(ProgramPolicy::new(
                    "fifo2.hp",
                    &program,
                    RunConfig::default(),
                    slots,
                    frames,
                )),
                _ => Box::new(Replay {
                    victims: victims.clone(),
                    next: 0,
                }),
            };
            let t = thread_cpu_ns();
            let c = simulate(&trace, Built::Live(policy), frames);
            let ms = thread_cpu_ns().saturating_sub(t) as f64 / 1e6;
            std::hint::black_box(c);
            [&mut native, &mut interp, &mut replay][which].push(ms);
        }
    }
    let (n, i, e) = (median(native), median(interp), median(replay));
    let per = |ms: f64| (ms - e).max(0.0) * 1e6 / events.max(1) as f64;
    let (native_ns, interp_ns) = (per(n), per(i));
    let report = Report {
        pages: args.pages,
        frames,
        refs: args.refs,
        runs,
        events,
        native_ns_per_event: native_ns,
        interpreted_ns_per_event: interp_ns,
        ratio: interp_ns / native_ns.max(1e-9),
        added_percent: (interp_ns / native_ns.max(1e-9) - 1.0) * 100.0,
        engine_ns_per_event: e * 1e6 / events.max(1) as f64,
        native_run_ms: n,
        interpreted_run_ms: i,
        replay_run_ms: e,
    };
    if args.format == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("PageFault event cost, fifo2.hp interpreted vs native CLOCK ({} events/run, median of {runs} runs)", events);
        println!(
            "  native CLOCK      {:8.1} ns/event",
            report.native_ns_per_event
        );
        println!(
            "  fifo2.hp          {:8.1} ns/event",
            report.interpreted_ns_per_event
        );
        println!(
            "  ratio             {:8.2}x  (adds {:.0}%)",
            report.ratio, report.added_percent
        );
        println!(
            "  engine share      {:8.1} ns/event (subtracted)",
            report.engine_ns_per_event
        );
    }
    Ok(())
}
