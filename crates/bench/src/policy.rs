//! `pagepilot bench policy`: the cost of one PageFault event for an
//! interpreted policy program (`fifo2.hp` unless `--program`) against the
//! native built-in making the same decisions (CLOCK unless `--native`),
//! measured side by side in one run.
//!
//! Both policies make the same decisions (checked before timing), so one
//! trace gives both the same sequence of events. Each run simulates the whole
//! trace six ways: with the native policy, with the interpreted program, with
//! the same program without the load-time optimiser, and with three replays
//! of the native policy's recorded decisions. The victims-only replay's time
//! is the engine's share, except for one part: the native policy clears
//! referenced bits, which later cost the engine minor faults (reference
//! emulation) that the victims-only replay never sees. That part is the
//! difference between a replay that also clears the recorded bits (whose
//! counters equal the native run's, checked) and one that makes the same
//! calls but only reads the bits, so their own cost cancels. Subtracting the
//! engine's share leaves the policy's, divided by the number of PageFault
//! events that chose a victim. Runs rotate the order of the six; times are
//! the thread's CPU time; medians are reported. `--only` times one variant
//! alone, for profilers.

use crate::error::IoContext;
use crate::BenchError;
use pagepilot_policy::program::{self, verify, ProgramPolicy, RunConfig};
use pagepilot_policy::registry::{self, Built, Setup};
use pagepilot_policy::{Fault, Memory, Page, Policy};
use pagepilot_sim::{simulate, Counters, Trace};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::Serialize;

use std::io::{self, Write};

use crate::emit::{emit, Format};
use crate::measure::median;
use crate::BenchResult;

const FIFO2: &str = include_str!("../../../policies/fifo2.hp");

/// Arguments of `pagepilot bench policy`.
#[derive(clap::Args)]
pub struct Args {
    /// Output format: table (text) or json.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
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
    /// (native, interpreted, unoptimised, replay, replay-clearing or
    /// replay-reading) and print its time per event.
    #[arg(long, hide = true)]
    only: Option<String>,
}

/// What `pagepilot bench policy` reports.
#[derive(Serialize)]
pub(crate) struct Report {
    pub(crate) program: String,
    pub(crate) native: String,
    pub(crate) pages: u64,
    pub(crate) frames: usize,
    pub(crate) refs: usize,
    pub(crate) runs: usize,
    /// PageFault events that chose a victim, per run.
    pub(crate) events: u64,
    pub(crate) native_ns_per_event: f64,
    pub(crate) interpreted_ns_per_event: f64,
    /// interpreted / native.
    pub(crate) ratio: f64,
    /// Percent the interpreter adds to the native decision.
    pub(crate) added_percent: f64,
    /// The program without the load-time optimiser.
    pub(crate) unoptimised_ns_per_event: f64,
    /// unoptimised / native.
    pub(crate) unoptimised_ratio: f64,
    /// The engine's own share per event (replay run), subtracted from both.
    pub(crate) engine_ns_per_event: f64,
    /// The engine's work per event that follows the native policy's bit
    /// clears (minor faults), part of the engine's share.
    pub(crate) minor_fault_ns_per_event: f64,
    /// Referenced bits the native policy cleared, per event (the replay
    /// clears the same ones, so its minor faults are the native run's).
    pub(crate) clears_per_event: f64,
    /// Minor faults of reference emulation per event, the same in all four
    /// runs (checked).
    pub(crate) minor_faults_per_event: f64,
    /// Median whole-run thread CPU times, ms.
    pub(crate) native_run_ms: f64,
    pub(crate) interpreted_run_ms: f64,
    pub(crate) unoptimised_run_ms: f64,
    pub(crate) replay_run_ms: f64,
    pub(crate) replay_clearing_run_ms: f64,
    pub(crate) replay_reading_run_ms: f64,
}

/// What the native policy decided at one victim request: the victim and the
/// referenced bits it cleared on the way.
#[derive(Default)]
struct Log {
    /// Per request: the victim and how many bits were cleared.
    steps: Vec<(Option<Page>, usize)>,
    /// The cleared pages, request after request.
    clears: Vec<u32>,
}

/// Forwards to the engine's memory, logging referenced-bit clears.
struct Logging<'a> {
    mem: &'a mut dyn Memory,
    clears: &'a mut Vec<u32>,
}

impl Memory for Logging<'_> {
    fn slots(&self) -> usize {
        self.mem.slots()
    }
    fn capacity(&self) -> usize {
        self.mem.capacity()
    }
    fn resident(&self) -> usize {
        self.mem.resident()
    }
    fn is_resident(&self, slot: u32) -> bool {
        self.mem.is_resident(slot)
    }
    fn page(&self, slot: u32) -> Page {
        self.mem.page(slot)
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        self.mem.page_of(vpn)
    }
    fn is_referenced(&self, slot: u32) -> bool {
        self.mem.is_referenced(slot)
    }
    fn is_modified(&self, slot: u32) -> bool {
        self.mem.is_modified(slot)
    }
    fn clear_referenced(&mut self, slot: u32) {
        self.clears.push(slot);
        self.mem.clear_referenced(slot);
    }
    fn request_frames(&mut self, count: usize) -> usize {
        self.mem.request_frames(count)
    }
    fn release_frames(&mut self, count: usize) -> usize {
        self.mem.release_frames(count)
    }
    fn flush(&mut self, slot: u32) -> bool {
        self.mem.flush(slot)
    }
}

/// The native policy, recording its decisions.
struct Recording {
    inner: Box<dyn Policy>,
    log: std::sync::Arc<std::sync::Mutex<Log>>,
}

impl Policy for Recording {
    fn name(&self) -> String {
        format!("{}-recording", self.inner.name())
    }
    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        self.inner.on_fault(fault, mem);
    }
    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        let Ok(mut log) = self.log.lock() else {
            return self.inner.victim(incoming, mem);
        };
        let log = &mut *log;
        let before = log.clears.len();
        let v = self.inner.victim(
            incoming,
            &mut Logging {
                mem,
                clears: &mut log.clears,
            },
        );
        log.steps.push((v, log.clears.len() - before));
        v
    }
    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        self.inner.on_evict(page, mem);
    }
}

/// What a [`Replay`] does with the referenced bits the native policy cleared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bits {
    /// Nothing: the victims alone (no minor faults follow).
    Untouched,
    /// Clears them, so the engine does exactly the native run's work,
    /// minor faults of reference emulation included.
    Cleared,
    /// Reads them instead: the same loop and calls as `Cleared`, without
    /// its effect on the engine.
    Read,
}

/// Replays the recorded decisions at almost no cost.
struct Replay {
    log: std::sync::Arc<Log>,
    bits: Bits,
    next: usize,
    cleared: usize,
}

impl Policy for Replay {
    fn name(&self) -> String {
        "replay".into()
    }
    fn on_fault(&mut self, _fault: Fault, _mem: &mut dyn Memory) {}
    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        let &(v, count) = self.log.steps.get(self.next)?;
        self.next += 1;
        if self.bits != Bits::Untouched {
            let from = self.cleared;
            self.cleared += count;
            for &s in self.log.clears.get(from..from + count).unwrap_or(&[]) {
                if self.bits == Bits::Cleared {
                    mem.clear_referenced(s);
                } else {
                    std::hint::black_box(mem.is_referenced(s));
                }
            }
        }
        v
    }
    fn on_evict(&mut self, _page: Page, _mem: &mut dyn Memory) {}
}

/// The timed variants, in `--only` spelling.
const VARIANTS: [&str; 6] = [
    "native",
    "interpreted",
    "unoptimised",
    "replay",
    "replay-clearing",
    "replay-reading",
];

/// Runs `pagepilot bench policy`.
pub fn run(args: Args) -> BenchResult {
    let Some(report) = measure(&args)? else {
        return Ok(());
    };
    print(&args, &report)
}

/// The measurement went wrong: `what`.
fn failed(what: String) -> BenchError {
    BenchError::Measurement {
        bench: "policy",
        what,
    }
}

/// Measures what `pagepilot bench policy` reports; `None` when `--only` printed its one line.
pub(crate) fn measure(args: &Args) -> Result<Option<Report>, crate::BenchError> {
    let (name, program) = match &args.program {
        Some(path) => (path.display().to_string(), program::load(path)?),
        None => (
            "fifo2.hp".to_string(),
            verify(program::translator::translate(FIFO2).map_err(|error| {
                BenchError::Translate {
                    program: "fifo2.hp",
                    error,
                }
            })?)
            .map_err(|source| BenchError::Verify {
                program: "fifo2.hp",
                source,
            })?,
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
    let log = std::sync::Arc::new(std::sync::Mutex::new(Log::default()));
    simulate(
        &trace,
        Built::Live(Box::new(Recording {
            inner: native_policy()?,
            log: log.clone(),
        })),
        frames,
    );
    let recorded = std::mem::take(
        &mut *log
            .lock()
            .map_err(|_| failed("decision log poisoned".into()))?,
    );
    let events = recorded.steps.iter().filter(|(v, _)| v.is_some()).count() as u64;
    let clears = recorded.clears.len();
    let log = std::sync::Arc::new(recorded);
    let replay = |bits: Bits| -> Box<dyn Policy> {
        Box::new(Replay {
            log: log.clone(),
            bits,
            next: 0,
            cleared: 0,
        })
    };
    // The engine's share is only fair if the replays make it do the native
    // run's work (the victims-only replay all but the minor faults).
    let cleared = simulate(&trace, Built::Live(replay(Bits::Cleared)), frames);
    let untouched = Counters {
        minor_faults: native_counters.minor_faults,
        ..simulate(&trace, Built::Live(replay(Bits::Untouched)), frames)
    };
    if cleared != native_counters || untouched != native_counters {
        return Err(failed(format!(
            "the replays of `{}`'s decisions count {cleared:?} and {untouched:?}, the policy {native_counters:?}: the engine's share would be wrong",
            args.native
        )));
    }
    if events == 0 {
        return Err(failed("no PageFault event had to choose a victim: use more --refs or --pages, or fewer --frames".into()));
    }
    for optimise in [true, false] {
        let c = simulate(&trace, Built::Live(interpreted(optimise)), frames);
        if c != native_counters {
            return Err(failed(format!(
                "{name} (optimiser {}) counts {c:?}, native `{}` {native_counters:?}: not a like-for-like comparison",
                if optimise { "on" } else { "off" },
                args.native
            )));
        }
    }

    let runs = args.runs.max(1);
    // The policy of variant `which` (the order of VARIANTS).
    let variant = |which: usize| -> Result<Box<dyn Policy>, registry::RegistryError> {
        Ok(match which {
            0 => native_policy()?,
            1 => interpreted(true),
            2 => interpreted(false),
            3 => replay(Bits::Untouched),
            4 => replay(Bits::Cleared),
            _ => replay(Bits::Read),
        })
    };
    if let Some(only) = &args.only {
        let which = VARIANTS
            .iter()
            .position(|w| w == only)
            .ok_or_else(|| BenchError::BadArg {
                option: "--only",
                value: only.clone(),
                why: format!("expected one of {}", VARIANTS.join(", ")),
            })?;
        let t = pagepilot_pager::sys::thread_cpu_ns();
        for _ in 0..runs {
            let policy = variant(which)?;
            std::hint::black_box(simulate(&trace, Built::Live(policy), frames));
        }
        let ns = pagepilot_pager::sys::thread_cpu_ns().saturating_sub(t) as f64;
        println!(
            "{only}: {:.1} ns/event including the engine ({events} events/run, {runs} runs)",
            ns / (events * runs as u64) as f64
        );
        return Ok(None);
    }
    let mut times: [Vec<f64>; 6] = Default::default();
    for r in 0..runs {
        for k in 0..6 {
            let which = (k + r) % 6;
            let policy = variant(which)?;
            let t = pagepilot_pager::sys::thread_cpu_ns();
            let c = simulate(&trace, Built::Live(policy), frames);
            let ms = pagepilot_pager::sys::thread_cpu_ns().saturating_sub(t) as f64 / 1e6;
            std::hint::black_box(c);
            times[which].push(ms);
        }
    }
    let [native, interp, plain, replay, clearing, reading] = times;
    // The engine's work that follows the clears (minor faults): clearing
    // and reading replays differ in nothing else. Per run, then the median.
    // Noise can make it negative when there are no clears.
    let minor = median(clearing.iter().zip(&reading).map(|(c, r)| c - r).collect()).max(0.0);
    let u = median(plain);
    let (n, i, r) = (median(native), median(interp), median(replay));
    let e = r + minor;
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
        clears_per_event: clears as f64 / events.max(1) as f64,
        minor_faults_per_event: native_counters.minor_faults as f64 / events.max(1) as f64,
        native_run_ms: n,
        interpreted_run_ms: i,
        unoptimised_run_ms: u,
        minor_fault_ns_per_event: minor * 1e6 / events.max(1) as f64,
        replay_run_ms: r,
        replay_clearing_run_ms: median(clearing),
        replay_reading_run_ms: median(reading),
    };
    Ok(Some(report))
}

/// Prints `report` as `--format` asks.
fn print(args: &Args, report: &Report) -> BenchResult {
    let mut out = std::io::stdout().lock();
    emit(&mut out, args.format, report, |out| {
        print_text(args, report, out)
    })
    .doing("writing the report")?;
    Ok(())
}

/// The text form of `report`.
fn print_text(args: &Args, report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let (name, events, runs) = (&report.program, report.events, report.runs);
    writeln!(
 out,
            "PageFault event cost, {name} interpreted vs native `{}` ({events} events/run, median of {runs} runs)",
            args.native
        )?;
    writeln!(
        out,
        "  native {:<12} {:8.1} ns/event",
        args.native, report.native_ns_per_event
    )?;
    writeln!(
        out,
        "  interpreted         {:8.1} ns/event  ratio {:.2}x  (adds {:.0}%)",
        report.interpreted_ns_per_event, report.ratio, report.added_percent
    )?;
    writeln!(
        out,
        "  optimiser off       {:8.1} ns/event  ratio {:.2}x",
        report.unoptimised_ns_per_event, report.unoptimised_ratio
    )?;
    writeln!(
 out,
            "  engine share        {:8.1} ns/event (subtracted; {:.2} bit clears, {:.2} minor faults per event)",
            report.engine_ns_per_event, report.clears_per_event, report.minor_faults_per_event
        )?;
    writeln!(
        out,
        "    of which minor faults {:6.1} ns/event",
        report.minor_fault_ns_per_event
    )?;
    Ok(())
}
