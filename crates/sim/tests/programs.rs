//! Policy programs in the simulator: `policies/fifo2.hp` must fault exactly
//! like the built-in CLOCK and `policies/mru.hp` exactly like `mru-live`, on
//! every trace and memory size used here, with and without reclaims.

use pagepilot_policy::registry::{build, Built, Setup};
use pagepilot_policy::Page;
use pagepilot_sim::{simulate, Counters, Machine, Trace};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn policy_path(name: &str) -> String {
    format!("{}/../../policies/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn built(spec: &str, trace: &Trace, frames: usize) -> Built {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    build(spec, &setup).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// A program that spins forever on a fault once memory is full.
const RUNAWAY: &str = "queue q;\nint n;\nevent PageFault() {\n  if (free == 0) { while (true) { n += 1; } }\n  enqueue(q, fault);\n}\nevent ReclaimFrame() { victim = fifo(q); }\n";

/// A policy program written to `<tmp>/<dir>-<pid>/<name>`, removed on drop.
struct ProgramFile {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl ProgramFile {
    fn new(dir: &str, name: &str, src: &str) -> ProgramFile {
        let dir = std::env::temp_dir().join(format!("{dir}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, src).unwrap();
        ProgramFile { dir, path }
    }
}

impl Drop for ProgramFile {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

fn random_trace(seed: u64, refs: usize, pages: u64, writes: f64) -> Trace {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = Trace::new();
    for _ in 0..refs {
        t.push(rng.gen_range(0..pages), rng.gen_bool(writes));
    }
    t
}

fn hot_cold_trace(seed: u64, refs: usize) -> Trace {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = Trace::new();
    for _ in 0..refs {
        let page = if rng.gen_bool(0.8) {
            rng.gen_range(0..30)
        } else {
            rng.gen_range(30..300)
        };
        t.push(page, rng.gen_bool(0.2));
    }
    t
}

fn sweep_trace(pages: u64, rounds: usize) -> Trace {
    Trace::from_pages((0..rounds).flat_map(|_| 0..pages))
}

/// The nested-loops join: each outer page, then a scan of the inner table.
fn join_trace(outer: u64, inner: u64) -> Trace {
    let mut t = Trace::new();
    for o in 0..outer {
        t.push(1_000 + o, false);
        for i in 0..inner {
            t.push(i, false);
        }
    }
    t
}

/// Three processes, each its own pattern, interleaved in quanta.
fn multiprocess_trace(seed: u64) -> Trace {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = Trace::new();
    let mut cursor = [0u64; 3];
    for _ in 0..300 {
        let space = rng.gen_range(0..3u16);
        for _ in 0..rng.gen_range(5..60) {
            let c = &mut cursor[space as usize];
            let page = match space {
                0 => {
                    *c = (*c + 1) % 120;
                    *c
                }
                1 => rng.gen_range(0..80),
                _ => {
                    *c = (*c + 1) % 40;
                    *c / 2
                }
            };
            t.push(Page::vpn_in(space, page), rng.gen_bool(0.1));
        }
    }
    t
}

fn traces() -> Vec<(&'static str, Trace)> {
    vec![
        ("random", random_trace(1, 20_000, 200, 0.3)),
        ("random-small", random_trace(2, 5_000, 12, 0.5)),
        ("hot-cold", hot_cold_trace(3, 20_000)),
        ("sweep", sweep_trace(150, 40)),
        ("join", join_trace(40, 120)),
        ("multiprocess", multiprocess_trace(4)),
    ]
}

fn sizes(distinct: usize) -> Vec<usize> {
    let mut s: Vec<usize> = [1, 2, 3, 4, 5, 8, 13, 21, 34, 55, 89, 144, 233]
        .into_iter()
        .filter(|&f| f < distinct + 2)
        .collect();
    s.extend([distinct.saturating_sub(1).max(1), distinct, distinct + 1]);
    s.sort_unstable();
    s.dedup();
    s
}

fn same_faults(program: &str, native: &str) {
    for (name, trace) in traces() {
        for frames in sizes(trace.distinct()) {
            let native_run = simulate(&trace, built(native, &trace, frames), frames);
            let program_run =
                simulate(&trace, built(&policy_path(program), &trace, frames), frames);
            assert_eq!(
                program_run, native_run,
                "{program} vs {native} on {name} with {frames} frames"
            );
            assert_eq!(program_run.overruled, 0);
        }
    }
}

#[test]
fn test_fifo2_program_faults_exactly_like_builtin_clock() {
    same_faults("fifo2.hp", "clock");
}

#[test]
fn test_mru_program_faults_exactly_like_builtin_mru_live() {
    same_faults("mru.hp", "mru-live");
}

#[test]
fn test_lru_command_program_faults_exactly_like_builtin_clock() {
    same_faults("lru.hp", "clock");
}

/// Runs a trace, taking `take` frames back every `every` references.
fn with_reclaims(
    trace: &Trace,
    policy: Built,
    frames: usize,
    every: usize,
    take: usize,
) -> Counters {
    let mut m = Machine::new(trace, policy, frames, 0);
    for (i, &slot) in trace.refs.iter().enumerate() {
        if i > 0 && i % every == 0 {
            m.reclaim(take);
        }
        m.access(slot, trace.is_write(i), i as u64);
    }
    m.finish()
}

#[test]
fn test_programs_match_builtins_through_reclaim_frame_events() {
    for (program, native) in [("fifo2.hp", "clock"), ("mru.hp", "mru-live")] {
        for (name, trace) in traces() {
            let frames = trace.distinct() / 2 + 40;
            let a = with_reclaims(&trace, built(native, &trace, frames), frames, 500, 2);
            let b = with_reclaims(
                &trace,
                built(&policy_path(program), &trace, frames),
                frames,
                500,
                2,
            );
            assert_eq!(b, a, "{program} vs {native} on {name} with reclaims");
        }
    }
}

#[test]
fn test_seq_program_beats_clock_on_a_sweep_larger_than_memory() {
    let trace = sweep_trace(150, 40);
    let clock = simulate(&trace, built("clock", &trace, 100), 100);
    let seq = simulate(&trace, built(&policy_path("seq.hp"), &trace, 100), 100);
    assert_eq!(
        clock.faults,
        trace.len() as u64,
        "clock faults on every reference of the loop"
    );
    assert!(
        seq.faults * 5 < clock.faults * 3,
        "seq.hp {} faults vs clock {}",
        seq.faults,
        clock.faults
    );
}

#[test]
fn test_runaway_program_is_stopped_and_fault_served_by_fallback() {
    let file = ProgramFile::new("pp-runaway", "runaway.hp", RUNAWAY);
    let path = &file.path;
    let trace = random_trace(7, 3_000, 50, 0.2);
    let spec = format!("{}:budget=5000", path.display());
    let setup = Setup {
        slots: trace.distinct(),
        frames: 10,
        future: None,
    };
    let Built::Live(policy) = build(&spec, &setup).unwrap() else {
        panic!("a program is a live policy")
    };
    let mut m = Machine::new(&trace, Built::Live(policy), 10, 0);
    for (i, &slot) in trace.refs.iter().enumerate() {
        m.access(slot, trace.is_write(i), i as u64);
    }
    let incidents = m.incidents();
    let counters = m.finish();
    let clock = simulate(&trace, built("clock", &trace, 10), 10);
    // Until the first full-memory fault the program ran; from then on CLOCK,
    // seeded with the resident pages in the program's order: same faults.
    assert_eq!(counters.faults, clock.faults);
    assert_eq!(
        counters.overruled, 0,
        "the fault in progress was served by the fallback"
    );
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert!(
        incidents[0].contains("PageFault")
            && incidents[0].contains("budget")
            && incidents[0].contains("clock"),
        "{}",
        incidents[0]
    );
}

#[test]
fn test_program_requesting_frames_from_the_pool_grows_before_it_evicts() {
    let file = ProgramFile::new("pp-grow", "grow.hp", "queue q; int got;\nevent PageFault() {\n  if (free == 0) {\n    got = request(1);\n    if (got == 0) { victim = fifo(q); }\n  }\n  enqueue(q, fault);\n}\nevent ReclaimFrame() { victim = fifo(q); }\n");
    let path = &file.path;
    let trace = random_trace(9, 5_000, 60, 0.2);
    let policy = built(&path.display().to_string(), &trace, 10);
    let mut m = Machine::new(&trace, policy, 10, 20);
    for (i, &slot) in trace.refs.iter().enumerate() {
        m.access(slot, trace.is_write(i), i as u64);
    }
    let grown = m.finish();
    // Ten frames plus twenty granted one by one: FIFO over thirty frames.
    let fifo30 = simulate(&trace, built("fifo", &trace, 30), 30);
    assert_eq!(grown, fifo30);
    assert_eq!(grown.overruled, 0);
}

#[test]
fn test_sweep_report_rows_carry_a_runaway_programs_incident() {
    let file = ProgramFile::new("pp-runaway-sweep", "runaway.hp", RUNAWAY);
    let path = &file.path;
    let trace = random_trace(9, 2_000, 40, 0.1);
    let specs = vec![
        format!("{}:budget=3000", path.display()),
        "clock".to_string(),
    ];
    let rows = pagepilot_sim::sweep::sweep(
        &trace,
        &specs,
        &[8, 100],
        pagepilot_sim::sweep::Parallelism::Serial,
        &|_| {},
    )
    .unwrap();
    let noted: Vec<(&str, usize)> = rows
        .iter()
        .filter(|r| !r.incidents.is_empty())
        .map(|r| (r.policy.as_str(), r.frames))
        .collect();
    // Only the program, and only where memory fills up (8 of 40 pages).
    assert_eq!(noted, vec![(specs[0].as_str(), 8)], "{rows:?}");
    assert!(
        rows[0].incidents[0].contains("budget"),
        "{:?}",
        rows[0].incidents
    );
    let json = serde_json::to_string(&rows).unwrap();
    assert!(json.contains("\"incidents\""));
}
