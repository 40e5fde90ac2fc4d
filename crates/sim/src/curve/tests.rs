use pagepilot_policy::registry::{build, Setup};
use proptest::prelude::*;

use super::*;
use crate::{simulate, Trace};

fn single(trace: &Trace, spec: &str, frames: usize) -> crate::Counters {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    simulate(trace, build(spec, &setup).unwrap(), frames)
}

fn assert_curve_matches_single_runs(trace: &Trace, policy: StackPolicy) {
    let curve = policy.curve(&trace.refs, trace.distinct());
    for frames in 1..=trace.distinct() + 2 {
        let c = single(trace, policy.name(), frames);
        let p = curve.point(frames);
        assert_eq!(
            (p.references, p.faults, p.cold_faults, p.evictions),
            (c.references, c.faults, c.cold_faults, c.evictions),
            "{} with {frames} frames on {:?}",
            policy.name(),
            trace.refs
        );
    }
}

#[test]
fn test_lru_curve_on_a_cyclic_sweep_faults_on_every_reference_below_the_loop() {
    let trace = Trace::from_pages((0..5).flat_map(|_| 0..10u64));
    let curve = lru(&trace.refs, trace.distinct());
    assert_eq!(curve.faults(9), 50);
    assert_eq!(curve.faults(10), 10);
    assert_eq!(curve.faults(1000), 10);
}

#[test]
fn test_curves_on_the_textbook_string_give_the_textbook_counts() {
    // Silberschatz's reference string: with 3 frames OPT faults 9 times and
    // LRU 12 times.
    let pages = [7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1];
    let trace = Trace::from_pages(pages);
    assert_eq!(opt(&trace.refs, trace.distinct()).faults(3), 9);
    assert_eq!(lru(&trace.refs, trace.distinct()).faults(3), 12);
    assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
    assert_curve_matches_single_runs(&trace, StackPolicy::Lru);
}

#[test]
fn test_stack_spec_detection_only_takes_plain_lru_and_opt() {
    assert_eq!(StackPolicy::of_spec("LRU"), Some(StackPolicy::Lru));
    assert_eq!(StackPolicy::of_spec("opt"), Some(StackPolicy::Opt));
    assert_eq!(StackPolicy::of_spec("clock"), None);
    assert_eq!(StackPolicy::of_spec("lru:x=1"), None);
}

#[test]
fn test_curves_survive_time_renumbering_on_long_traces() {
    // Long enough to renumber the LRU window many times.
    let mut x = 12345u64;
    let pages = (0..40_000).map(|_| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % 300
    });
    let trace = Trace::from_pages(pages);
    for frames in [1, 7, 50, 150, 299, 300] {
        for policy in [StackPolicy::Lru, StackPolicy::Opt] {
            let curve = policy.curve(&trace.refs, trace.distinct());
            assert_eq!(
                curve.faults(frames),
                single(&trace, policy.name(), frames).faults,
                "{} {frames}",
                policy.name()
            );
        }
    }
}

fn traces() -> impl Strategy<Value = Trace> {
    (1u64..24, 1usize..300).prop_flat_map(|(pages, len)| {
        prop::collection::vec(0..pages, len).prop_map(Trace::from_pages)
    })
}

proptest! {
    #[test]
    fn test_opt_curve_kept_to_a_limit_equals_the_whole_curve_below_it(
        trace in traces(), limit in 1usize..30
    ) {
        let whole = opt(&trace.refs, trace.distinct());
        let part = opt_upto(&trace.refs, trace.distinct(), limit);
        for frames in 1..=limit.min(trace.distinct()) {
            prop_assert_eq!(part.faults(frames), whole.faults(frames), "{}", frames);
        }
    }

    #[test]
    fn test_lru_curve_equals_single_size_runs(trace in traces()) {
        assert_curve_matches_single_runs(&trace, StackPolicy::Lru);
    }

    #[test]
    fn test_opt_curve_equals_single_size_runs(trace in traces()) {
        assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
    }

    #[test]
    fn test_curves_on_sweepy_traces_equal_single_size_runs(
        runs in prop::collection::vec((0u64..40, 1u64..30, any::<bool>()), 1..20)
    ) {
        // Ascending and descending runs of consecutive pages, the shape SEQ
        // and OPT's records care about.
        let pages = runs.iter().flat_map(|&(start, len, up)| {
            (0..len).map(move |i| if up { start + i } else { start + len - 1 - i })
        });
        let trace = Trace::from_pages(pages);
        assert_curve_matches_single_runs(&trace, StackPolicy::Lru);
        assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
    }
}

/// A deterministic generator for the adversarial traces below.
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Page `k` of `pages` with probability about proportional to `1 / (k + 1)`.
fn zipf_pages(seed: u64, pages: u64, len: usize) -> Vec<u64> {
    let mut next = xorshift(seed);
    let weights: Vec<f64> = (0..pages).map(|k| 1.0 / (k + 1) as f64).collect();
    let total: f64 = weights.iter().sum();
    (0..len)
        .map(|_| {
            let mut u = (next() >> 11) as f64 / (1u64 << 53) as f64 * total;
            for (k, w) in weights.iter().enumerate() {
                if u < *w {
                    return k as u64;
                }
                u -= w;
            }
            pages - 1
        })
        .collect()
}

#[test]
fn test_opt_curve_on_a_cyclic_loop_equals_single_size_runs() {
    // A loop one page larger than memory is LRU's worst case; OPT keeps all
    // but one page and the records move on every reference.
    for pages in [2u64, 3, 17, 40] {
        let trace = Trace::from_pages((0..30).flat_map(|_| 0..pages));
        assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
    }
}

#[test]
fn test_opt_curve_on_uniform_random_references_equals_single_size_runs() {
    let mut next = xorshift(7);
    let trace = Trace::from_pages((0..3000).map(|_| next() % 48));
    assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
}

#[test]
fn test_opt_curve_on_zipf_references_equals_single_size_runs() {
    let trace = Trace::from_pages(zipf_pages(11, 64, 3000));
    assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
}

#[test]
fn test_opt_curve_on_mixed_loops_sweeps_and_random_references_equals_single_size_runs() {
    let mut next = xorshift(23);
    let mut pages = Vec::new();
    while pages.len() < 4000 {
        let start = next() % 60;
        let len = 1 + next() % 20;
        match next() % 4 {
            // A loop over a small region, several times.
            0 => (0..3).for_each(|_| pages.extend(start..start + len)),
            1 => pages.extend(start..start + len),
            2 => pages.extend((start..start + len).rev()),
            _ => pages.extend((0..len).map(|_| next() % 80)),
        }
    }
    let trace = Trace::from_pages(pages);
    assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
}

proptest! {
    #[test]
    fn test_opt_curve_on_zipf_traces_equals_single_size_runs(
        seed in any::<u64>(), pages in 2u64..40, len in 1usize..400
    ) {
        let trace = Trace::from_pages(zipf_pages(seed, pages, len));
        assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
    }

    #[test]
    fn test_opt_curve_on_loops_with_noise_equals_single_size_runs(
        pages in 2u64..30, rounds in 1usize..12, noise in prop::collection::vec(0u64..40, 0..60)
    ) {
        // A loop with noise references sprinkled in at fixed strides.
        let mut refs: Vec<u64> = (0..rounds).flat_map(|_| 0..pages).collect();
        for (k, &p) in noise.iter().enumerate() {
            let at = (k * 7) % (refs.len() + 1);
            refs.insert(at, p);
        }
        let trace = Trace::from_pages(refs);
        assert_curve_matches_single_runs(&trace, StackPolicy::Opt);
    }
}
