//! SEQ in the simulator against LRU and OPT on the paper's access patterns.

use pagepilot_policy::registry::{self, Setup};
use pagepilot_policy::Page;
use pagepilot_sim::{simulate, Counters, Trace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn run(trace: &Trace, spec: &str, frames: usize) -> Counters {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    let policy = registry::build(spec, &setup).expect("a built-in policy");
    simulate(trace, policy, frames)
}

/// `sweeps` upward passes over pages `0..pages` of address space `space`.
fn sweeps(space: u16, pages: u64, sweeps: usize) -> Vec<u64> {
    (0..sweeps)
        .flat_map(|_| (0..pages).map(move |p| Page::vpn_in(space, p)))
        .collect()
}

/// Round-robin interleaving of several reference strings, `quantum` at a time.
fn interleave(streams: &[Vec<u64>], quantum: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = vec![0; streams.len()];
    while at.iter().zip(streams).any(|(&i, s)| i < s.len()) {
        for (i, s) in at.iter_mut().zip(streams) {
            let end = (*i + quantum).min(s.len());
            out.extend_from_slice(&s[*i..end]);
            *i = end;
        }
    }
    out
}

fn ratio(a: &Counters, b: &Counters) -> f64 {
    a.faults as f64 / b.faults as f64
}

#[test]
fn test_seq_is_within_10_percent_of_opt_on_repeated_upward_sweeps() {
    // Enough sweeps to reach SEQ's steady state: each sweep then costs
    // OPT's faults plus a few times L (new sequences are replaced from only
    // once they reach L; meanwhile LRU chooses).
    let (pages, frames) = (4000, 2000);
    let trace = Trace::from_pages(sweeps(0, pages, 100));
    let refs = trace.len() as u64;
    let lru = run(&trace, "lru", frames);
    let opt = run(&trace, "opt", frames);
    let seq = run(&trace, "seq", frames);
    // LRU floods: every reference after the first sweep faults.
    assert_eq!(lru.faults - lru.cold_faults, refs - pages);
    eprintln!(
        "sweeps: lru {} seq {} opt {}",
        lru.faults, seq.faults, opt.faults
    );
    assert!(
        ratio(&seq, &opt) <= 1.10,
        "seq {} vs opt {} faults",
        seq.faults,
        opt.faults
    );
    // Also without the first-touch faults, which the paper leaves out.
    let warm = |c: &Counters| (c.faults - c.cold_faults) as f64;
    assert!(warm(&seq) <= 1.10 * warm(&opt), "{seq:?} {opt:?}");
    assert_eq!(seq.overruled, 0);
}

#[test]
fn test_seq_live_is_within_20_percent_of_opt_on_repeated_upward_sweeps() {
    // CLOCK is a coarser fallback than exact LRU while new sequences are
    // shorter than L, so the live variant pays more per sweep than SEQ.
    let (pages, frames) = (4000, 2000);
    let trace = Trace::from_pages(sweeps(0, pages, 100));
    let opt = run(&trace, "opt", frames);
    let live = run(&trace, "seq-live", frames);
    let clock = run(&trace, "clock", frames);
    eprintln!(
        "sweeps: clock {} seq-live {} opt {}",
        clock.faults, live.faults, opt.faults
    );
    assert!(
        ratio(&live, &opt) <= 1.20,
        "seq-live {} vs opt {} faults",
        live.faults,
        opt.faults
    );
    assert!(clock.faults as f64 > 1.5 * live.faults as f64);
    assert_eq!(live.overruled, 0);
}

#[test]
fn test_seq_stays_within_2_percent_of_lru_on_a_uniformly_random_trace() {
    let mut rng = StdRng::seed_from_u64(7);
    let pages = 4000u64;
    let trace = Trace::from_pages((0..200_000).map(|_| rng.gen_range(0..pages)));
    for frames in [500, 2000, 3500] {
        let lru = run(&trace, "lru", frames);
        let seq = run(&trace, "seq", frames);
        let diff = (ratio(&seq, &lru) - 1.0).abs();
        eprintln!(
            "random, {frames} frames: lru {} seq {}",
            lru.faults, seq.faults
        );
        assert!(diff <= 0.02, "{frames} frames: seq {seq:?} lru {lru:?}");
    }
}

#[test]
fn test_global_seq_groups_sequences_per_process() {
    // Two processes sweep the same page numbers of their own address space,
    // interleaved round-robin: global SEQ keeps one sequence per process.
    let (pages, frames) = (1500, 1500);
    let streams = [sweeps(0, pages, 60), sweeps(1, pages, 60)];
    let trace = Trace::from_pages(interleave(&streams, 100));
    let refs = trace.len() as u64;
    let lru = run(&trace, "lru", frames);
    let opt = run(&trace, "opt", frames);
    let seq = run(&trace, "seq", frames);
    assert_eq!(lru.faults - lru.cold_faults, refs - 2 * pages);
    eprintln!(
        "two processes: lru {} seq {} opt {}",
        lru.faults, seq.faults, opt.faults
    );
    assert!(
        ratio(&seq, &opt) <= 1.15,
        "seq {} vs opt {} faults",
        seq.faults,
        opt.faults
    );
}

#[test]
fn test_seq_beats_lru_on_sweeps_up_and_down_with_small_skips() {
    // The paper's second class: regions swept up and down, skipping a page
    // now and then (applu-like).
    let mut vpns = Vec::new();
    for pass in 0..10 {
        for region in 0..3u64 {
            let base = region * 10_000;
            let pages: Vec<u64> = (0..800).filter(|p| p % 37 != 0).map(|p| base + p).collect();
            if pass % 2 == 0 {
                vpns.extend(pages);
            } else {
                vpns.extend(pages.into_iter().rev());
            }
        }
    }
    let trace = Trace::from_pages(vpns);
    let frames = 1200;
    let lru = run(&trace, "lru", frames);
    let opt = run(&trace, "opt", frames);
    let seq = run(&trace, "seq", frames);
    assert!(seq.faults < lru.faults, "seq {seq:?} lru {lru:?}");
    assert!(opt.faults <= seq.faults);
    eprintln!(
        "up and down: lru {} seq {} opt {}",
        lru.faults, seq.faults, opt.faults
    );
}

/// Per sweep of a region twice the memory: warm faults in the lower half,
/// and pages of the upper half resident when the sweep ends.
fn lower_faults_and_upper_resident(spec: &str, pages: u64, passes: usize) -> (Vec<u64>, Vec<u64>) {
    use pagepilot_sim::{Access, Machine};
    let mut trace = Trace::new();
    for vpn in sweeps(1, pages, passes) {
        trace.push(vpn, false);
    }
    let frames = pages as usize / 2;
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    let policy = registry::build(spec, &setup).expect("a built-in policy");
    let mut m = Machine::new(&trace, policy, frames, 0);
    let offset = |slot: u32| trace.pages[slot as usize] - Page::vpn_in(1, 0);
    let (mut lower, mut upper) = (vec![0; passes], Vec::new());
    for (i, &slot) in trace.refs.iter().enumerate() {
        let pass = i / pages as usize;
        if let Access::Missing { cold: false, .. } = m.access(slot, false, i as u64) {
            if offset(slot) < pages / 2 {
                lower[pass] += 1;
            }
        }
        if (i + 1) % pages as usize == 0 {
            let resident = (0..trace.distinct() as u32)
                .filter(|&s| offset(s) >= pages / 2 && m.is_resident(s))
                .count();
            upper.push(resident as u64);
        }
    }
    (lower, upper)
}

#[test]
fn test_each_sweep_leaves_m_more_head_pages_resident_and_faults_m_more_in_the_lower_half() {
    // SEQ Figure 5's question (issue 34): the paper's rules, followed, page
    // the lower half out M pages more per sweep. A sweep ends with the M
    // pages behind its sequence's head resident (never replaced: too close
    // to the head). The next sweep's first fault above the bottom splits
    // that sequence, and the split keeps only the part below the fault, so
    // those M pages are in no sequence; SEQ replaces outside sequences only
    // when none is at least L long, which never happens here. They stay,
    // and their frames come out of the resident bottom.
    for m in [20u64, 50] {
        let (lower, upper) = lower_faults_and_upper_resident(&format!("seq:M={m}"), 2000, 6);
        for pass in 1..6 {
            assert_eq!(upper[pass] - upper[pass - 1], m, "M={m}: {upper:?}");
        }
        for pass in 2..6 {
            assert_eq!(lower[pass] - lower[pass - 1], m, "M={m}: {lower:?}");
        }
    }
    // OPT rotates its victims too, by one page a sweep.
    let (lower, _) = lower_faults_and_upper_resident("opt", 2000, 6);
    assert_eq!(lower, [0, 1, 2, 3, 4, 5]);
}
