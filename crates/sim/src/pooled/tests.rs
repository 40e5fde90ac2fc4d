//! The frame manager's and RAPHA's rules, run in the simulator.

use super::*;
use crate::{simulate, Trace};
use pagepilot_frames::RateError;
use pagepilot_policy::registry::{self, Setup};

/// A policy program written to a fresh temporary directory, removed on drop.
struct Program {
    dir: std::path::PathBuf,
    path: String,
}

impl Program {
    fn new(tag: &str, src: &str) -> Program {
        let dir = std::env::temp_dir().join(format!("pp-pooled-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{tag}.hp"));
        std::fs::write(&path, src).unwrap();
        Program {
            dir,
            path: path.display().to_string(),
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// FIFO that asks the pool for one more frame before it evicts.
const GROW: &str = "queue q; int got;\nevent PageFault() {\n  if (free == 0) {\n    got = request(1);\n    if (got == 0) { victim = fifo(q); }\n  }\n  enqueue(q, fault);\n}\nevent ReclaimFrame() { victim = fifo(q); }\n";

/// FIFO that asks for `1000` frames at every fault, whatever it holds.
const GREEDY: &str = "queue q; int got;\nevent PageFault() {\n  got = request(1000);\n  if (free == 0) { victim = fifo(q); }\n  enqueue(q, fault);\n}\nevent ReclaimFrame() { victim = fifo(q); }\n";

/// FIFO that asks for frames one at a time as long as any is granted.
const LOOPING: &str = "queue q; int got;\nevent PageFault() {\n  got = request(1);\n  while (got > 0) { got = request(1); }\n  if (free == 0) { victim = fifo(q); }\n  enqueue(q, fault);\n}\nevent ReclaimFrame() { victim = fifo(q); }\n";

fn config(frames: usize) -> PoolConfig {
    PoolConfig {
        frames,
        partition_burst: Some(frames),
        reclaim_deadline: 1_000_000,
        schedule: Schedule {
            quantum: 50,
            service: 10,
        },
        rate: None,
        sample_every: Some(10),
    }
}

fn random_trace(seed: u64, refs: usize, pages: u64) -> Trace {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Trace::from_pages((0..refs).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % pages
    }))
}

/// Pages `0..pages` then `hits` references to page 0.
fn grow_then_stay(pages: u64, hits: usize) -> Trace {
    Trace::from_pages((0..pages).chain(std::iter::repeat_n(0, hits)))
}

fn spec(name: &str, policy: &str, min: usize) -> ProcessSpec {
    ProcessSpec::new(name, policy, min)
}

#[test]
fn test_a_minimum_that_does_not_fit_in_the_pool_is_refused_with_the_sums() {
    let traces = vec![random_trace(1, 100, 20), random_trace(2, 100, 20)];
    let err = run(
        &traces,
        &[spec("a", "clock", 60), spec("b", "clock", 50)],
        &config(100),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            PooledError::PoolTooSmall {
                pool: 100,
                sum: 110,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("60 + 50") && text.contains("minFrame"),
        "{text}"
    );
    // At the boundary both fit.
    let r = run(
        &traces,
        &[spec("a", "clock", 60), spec("b", "clock", 40)],
        &config(100),
    )
    .unwrap();
    assert_eq!(r.processes[0].held_max, 60);
    assert_eq!(r.processes[1].held_max, 40);
}

#[test]
fn test_a_process_alone_in_the_pool_faults_as_a_single_run_with_its_minimum() {
    let trace = random_trace(3, 5_000, 80);
    for policy in ["clock", "fifo", "lru", "mru-live", "opt"] {
        let r = run(
            std::slice::from_ref(&trace),
            &[spec("t", policy, 30)],
            &config(64),
        )
        .unwrap();
        let setup = Setup {
            slots: trace.distinct(),
            frames: 30,
            future: Some(&trace.refs),
        };
        let single = simulate(&trace, registry::build(policy, &setup).unwrap(), 30);
        assert_eq!(r.processes[0].counters.faults, single.faults, "{policy}");
        assert_eq!(r.processes[0].counters.references, 5_000);
    }
}

#[test]
fn test_a_cyclic_scan_under_mru_pages_in_pf_m_and_read_ahead_frames_cost_one_each_per_pass() {
    // The join's outer table: O = 300 pages, Loop = 5, M = 200 frames each.
    let (o, loops, m) = (300u64, 5u64, 200usize);
    let scan = Trace::from_pages((0..loops).flat_map(|_| 0..o));
    let traces = vec![scan.clone(), scan];
    let mut mru = spec("mru", "mru-live", m);
    let clock = spec("clock", "clock", m);
    let r = run(&traces, &[mru.clone(), clock.clone()], &config(2 * m)).unwrap();
    // The live MRU (by faults) evicts the page before the faulting one:
    // one page-in per pass above HiPEC's PF_m.
    let pf_m = o + (o - m as u64) * (loops - 1);
    assert_eq!(r.processes[0].counters.faults, pf_m + (loops - 1));
    assert_eq!(r.processes[1].counters.faults, o * loops, "PF_l");
    // 16 frames held by read-ahead windows come out of MRU's resident set:
    // 16 more page-ins per pass.
    mru.readahead_frames = 16;
    let r = run(&traces, &[mru, clock], &config(2 * m)).unwrap();
    assert_eq!(r.processes[0].counters.faults, pf_m + 17 * (loops - 1));
}

#[test]
fn test_a_request_beyond_the_pool_is_granted_partially() {
    let greedy = Program::new("greedy", GREEDY);
    let traces = vec![random_trace(4, 2_000, 300)];
    let r = run(&traces, &[spec("g", &greedy.path, 10)], &config(50)).unwrap();
    let p = &r.processes[0];
    // Its first fault asks for 290 (no more than its pages beyond its 10
    // frames) and gets the 40 free; every later request gets nothing.
    assert_eq!(p.granted, 40, "{p:?}");
    assert!(p.requested > p.granted, "{p:?}");
    assert_eq!(p.held_max, 50);
    assert!(r.samples.iter().all(|s| s.held[0] <= 50));
}

#[test]
fn test_passing_partition_burst_reclaims_first_allocated_first() {
    let grow = Program::new("fafr", GROW);
    // Three growing processes, each with 10 frames guaranteed and 60 pages
    // to grow to, one after the other (the later ones first hit one page
    // for a while); 40 frames above the minimums allowed in all.
    let staggered = |wait: usize| {
        Trace::from_pages(
            std::iter::repeat_n(0, wait)
                .chain(0..60)
                .chain(std::iter::repeat_n(0, 40_000)),
        )
    };
    let traces = vec![staggered(0), staggered(10_000), staggered(20_000)];
    let procs: Vec<ProcessSpec> = ["a", "b", "c"]
        .iter()
        .map(|n| spec(n, &grow.path, 10))
        .collect();
    let mut cfg = config(200);
    cfg.partition_burst = Some(40);
    cfg.sample_every = Some(100);
    let r = run(&traces, &procs, &cfg).unwrap();
    let (a, b, c) = (&r.processes[0], &r.processes[1], &r.processes[2]);
    // Balance asked frames back: from the first allocated while it had
    // frames above its minimum, then from the second; the last gave back
    // only its own requests beyond the watermark once the others were down
    // to their minimums.
    assert!(a.reclaimed_frames >= 40, "{a:?}");
    assert!(b.reclaimed_frames >= 40, "{b:?}");
    assert!(c.reclaimed_frames < b.reclaimed_frames, "{c:?}");
    assert_eq!(a.forced_frames + b.forced_frames + c.forced_frames, 0);
    // Once all grew: the first two are back at their minimum, the last
    // holds what partition_burst allows above the minimums.
    let last = r
        .samples
        .iter()
        .rev()
        .find(|s| s.held.iter().all(|&h| h > 0))
        .unwrap();
    assert_eq!(last.held, vec![10, 10, 50], "{last:?}");
    // While the second grew, the first gave its frames back: at some time
    // the second held more than the first and the last none above its
    // minimum.
    assert!(r
        .samples
        .iter()
        .any(|s| s.held[1] == 50 && s.held[0] == 10 && s.held[2] == 10));
}

#[test]
fn test_a_holder_blocked_past_its_deadline_is_reclaimed_by_force_and_reported() {
    let grow = Program::new("deadline", GROW);
    let traces = vec![grow_then_stay(60, 2_000), grow_then_stay(60, 2_000)];
    let procs = [spec("a", &grow.path, 10), spec("b", &grow.path, 10)];
    let mut cfg = config(200);
    cfg.partition_burst = Some(30);
    // Each fault blocks its process for 100 reference times: a process
    // asked for frames while blocked cannot give them back within 5.
    cfg.schedule.service = 100;
    cfg.reclaim_deadline = 5;
    let tight = run(&traces, &procs, &cfg).unwrap();
    let forced: u64 = tight.processes.iter().map(|p| p.forced_reclaims).sum();
    let frames: u64 = tight.processes.iter().map(|p| p.forced_frames).sum();
    assert!(forced > 0 && frames > 0, "{:?}", tight.processes);
    // With time enough, every reclamation is the holder's own.
    cfg.reclaim_deadline = 1_000_000;
    let loose = run(&traces, &procs, &cfg).unwrap();
    assert!(loose.processes.iter().all(|p| p.forced_reclaims == 0));
    assert!(loose.processes.iter().any(|p| p.reclaims > 0));
}

#[test]
fn test_a_program_requesting_frames_in_a_loop_stays_within_the_pool() {
    let looping = Program::new("looping", LOOPING);
    let traces = vec![random_trace(5, 4_000, 500), random_trace(6, 4_000, 100)];
    let mut cfg = config(120);
    cfg.partition_burst = Some(40);
    let procs = [spec("loop", &looping.path, 20), spec("clock", "clock", 50)];
    let r = run(&traces, &procs, &cfg).unwrap();
    for s in &r.samples {
        assert!(s.held.iter().sum::<usize>() <= 120, "{s:?}");
        // The other keeps its minimum throughout.
        assert!(s.held[1] == 50 || s.held[1] == 0, "{s:?}");
    }
    let p = &r.processes[0];
    assert!(p.granted > 0 && p.held_max <= 70, "{p:?}");
    assert_eq!(r.processes[0].counters.references, 4_000);
    // The CLOCK process paged as with its minimum alone.
    let setup = Setup {
        slots: traces[1].distinct(),
        frames: 50,
        future: None,
    };
    let alone = simulate(&traces[1], registry::build("clock", &setup).unwrap(), 50);
    assert_eq!(r.processes[1].counters.faults, alone.faults);
}

fn rate(period: u64, system_period: u64, fault_unit: u64) -> Option<RateConfig> {
    Some(RateConfig {
        fault_period: period,
        system_period,
        fault_unit,
    })
}

#[test]
fn test_a_process_never_takes_more_faults_per_period_than_its_limit() {
    let traces = vec![random_trace(7, 3_000, 400), random_trace(8, 3_000, 400)];
    let mut procs = [spec("a", "clock", 20), spec("b", "clock", 20)];
    procs[0].fault_limit = Some(5);
    procs[1].fault_limit = Some(3);
    let mut cfg = config(40);
    cfg.schedule.service = 2;
    cfg.rate = rate(100, 100, 1);
    let r = run(&traces, &procs, &cfg).unwrap();
    for (p, limit) in r.processes.iter().zip([5, 3]) {
        assert_eq!(p.max_faults_per_period, Some(limit), "{p:?}");
        assert!(p.postponed > 0 && p.postponed_delay > 0, "{p:?}");
        let mean = p.postponed_delay as f64 / p.postponed as f64;
        assert!((p.postponed_delay_mean - mean).abs() < 1e-9);
        assert_eq!(p.counters.references, 3_000);
    }
    // Unlimited, the same traces fault faster than that.
    let mut free = cfg.clone();
    free.rate = None;
    for p in procs.iter_mut() {
        p.fault_limit = None;
    }
    let unlimited = run(&traces, &procs, &free).unwrap();
    assert!(unlimited.elapsed < r.elapsed);
}

#[test]
fn test_the_system_limit_bounds_all_processes_together() {
    // fault_unit 10, system period 100: reserves 0.5 and 0.3 leave 2
    // faults per period (Eq. 4), though each may take 1 per 50.
    let traces = vec![random_trace(9, 1_000, 300), random_trace(10, 1_000, 300)];
    let mut procs = [spec("a", "fifo", 10), spec("b", "fifo", 10)];
    for (p, pc) in procs.iter_mut().zip([0.5, 0.3]) {
        p.fault_limit = Some(1);
        p.reserve = pc;
    }
    let mut cfg = config(20);
    cfg.rate = rate(100, 100, 10);
    let r = run(&traces, &procs, &cfg).unwrap();
    assert_eq!(r.system_fault_limit, Some(2));
    assert!(r.max_system_faults_per_period.unwrap() <= 2, "{r:?}");
    assert!(r
        .processes
        .iter()
        .all(|p| p.max_faults_per_period <= Some(1)));
}

#[test]
fn test_admission_is_refused_just_past_eq_2_and_accepted_at_the_boundary() {
    let traces = vec![random_trace(11, 200, 30), random_trace(12, 200, 30)];
    let mut procs = [spec("a", "clock", 10), spec("b", "clock", 10)];
    let mut cfg = config(20);
    cfg.rate = rate(100, 100, 10);
    // Limits of 1 per 100 each take 0.1 of the processor (Eq. 1): reserves
    // of 0.5 and 0.3 fill it exactly.
    for (p, pc) in procs.iter_mut().zip([0.5, 0.3]) {
        p.fault_limit = Some(1);
        p.reserve = pc;
    }
    assert!(run(&traces, &procs, &cfg).is_ok());
    procs[1].reserve = 0.31;
    let err = run(&traces, &procs, &cfg).unwrap_err();
    assert!(
        matches!(
            &err,
            PooledError::Rate {
                process: Some((1, _)),
                source: RateError::ReserveDoesNotFit { .. }
            }
        ),
        "{err}"
    );
    assert!(
        pagepilot_policy::chain(&err).to_string().contains("Eq. 2"),
        "{err}"
    );
}

#[test]
fn test_bad_pools_periods_and_limits_get_clear_errors() {
    let traces = vec![random_trace(13, 200, 30)];
    let one = |p: ProcessSpec, cfg: &PoolConfig| run(&traces, &[p], cfg).unwrap_err();
    let mut limited = spec("a", "clock", 10);
    limited.fault_limit = Some(4);
    // A zero fault period.
    let mut cfg = config(20);
    cfg.rate = rate(0, 100, 1);
    let err = one(limited.clone(), &cfg);
    assert!(
        matches!(
            &err,
            PooledError::Rate {
                source: RateError::ZeroPeriod,
                ..
            }
        ),
        "{err}"
    );
    cfg.rate = rate(100, 0, 1);
    assert!(matches!(
        one(limited.clone(), &cfg),
        PooledError::Rate {
            process: None,
            source: RateError::ZeroPeriod
        }
    ));
    // A zero fault limit: the process could never fault.
    cfg.rate = rate(100, 100, 1);
    let mut zero = limited.clone();
    zero.fault_limit = Some(0);
    assert!(matches!(
        one(zero, &cfg),
        PooledError::ZeroFaultLimit { process: 0, .. }
    ));
    // Limits without periods, periods without limits.
    assert!(matches!(
        one(limited.clone(), &config(20)),
        PooledError::NoFaultPeriod
    ));
    assert!(matches!(
        one(spec("a", "clock", 10), &cfg),
        PooledError::MissingFaultLimit { process: 0, .. }
    ));
    // Reserves that leave the system no fault per period (Eq. 4).
    let mut slow = limited.clone();
    slow.fault_limit = Some(1);
    slow.reserve = 0.5;
    cfg.rate = rate(1_000, 100, 100);
    assert!(matches!(
        one(slow, &cfg),
        PooledError::NoSystemFaults { .. }
    ));
    // Pools: empty, smaller than the minimums; minimums eaten by read-ahead.
    assert!(matches!(
        one(spec("a", "clock", 0), &config(0)),
        PooledError::EmptyPool
    ));
    assert!(matches!(
        one(spec("a", "clock", 30), &config(20)),
        PooledError::PoolTooSmall {
            pool: 20,
            sum: 30,
            ..
        }
    ));
    let mut windows = spec("a", "clock", 8);
    windows.readahead_frames = 8;
    assert!(matches!(
        one(windows, &config(20)),
        PooledError::MinTooSmall { need: 9, .. }
    ));
    assert!(matches!(
        one(spec("a", "nope", 10), &config(20)),
        PooledError::Policy { process: 0, .. }
    ));
    assert!(matches!(
        run(&traces, &[], &config(20)),
        Err(PooledError::CountMismatch {
            processes: 0,
            traces: 1
        })
    ));
    let mut quantum = config(20);
    quantum.schedule.quantum = 0;
    assert!(matches!(
        one(spec("a", "clock", 10), &quantum),
        PooledError::ZeroQuantum
    ));
}
