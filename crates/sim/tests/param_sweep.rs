//! Parameter sweeps: every point of a `seq:L=...` grid counts exactly what a
//! separate run of that point's spec counts.

use pagepilot_policy::registry::{self, Setup};
use pagepilot_sim::param_sweep::{self, ParamSweep};
use pagepilot_sim::sweep::{sweep, Parallelism};
use pagepilot_sim::{simulate, Counters, Trace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn run(trace: &Trace, spec: &str, frames: usize) -> Counters {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    simulate(trace, registry::build(spec, &setup).unwrap(), frames)
}

/// Runs of consecutive pages of many lengths (2 to 60) up and down a region,
/// between random references: SEQ's counts depend on L and M here.
fn runs_of_many_lengths() -> Trace {
    let mut rng = StdRng::seed_from_u64(18);
    let mut pages = Vec::new();
    for _ in 0..400 {
        let len = rng.gen_range(2..60u64);
        let start = rng.gen_range(0..1500u64);
        if rng.gen_bool(0.5) {
            pages.extend(start..start + len);
        } else {
            pages.extend((start..start + len).rev());
        }
        pages.extend((0..rng.gen_range(0..20)).map(|_| rng.gen_range(0..1600u64)));
    }
    Trace::from_pages(pages)
}

#[test]
fn test_sweep_points_count_what_separate_runs_of_their_specs_count() {
    let trace = runs_of_many_lengths();
    let grid = ParamSweep::parse("seq:L=2..40:6,M=10,40").unwrap();
    let points = grid.points().unwrap();
    assert_eq!(points.len(), 7 * 2);
    let specs: Vec<String> = points.iter().map(|p| p.spec.clone()).collect();
    let frames = [200, 700];
    let mut rows = sweep(&trace, &specs, &frames, Parallelism::AllCores, &|_| {}).unwrap();
    param_sweep::label_rows(&points, &mut rows);
    assert_eq!(rows.len(), points.len() * frames.len());
    for (i, row) in rows.iter().enumerate() {
        let point = &points[i / frames.len()];
        assert_eq!(row.policy, point.spec);
        assert_eq!(row.params, point.values);
        assert_eq!(row.frames, frames[i % frames.len()]);
        let c = run(&trace, &point.spec, row.frames);
        assert_eq!(
            (row.faults, row.cold_faults),
            (c.faults, c.cold_faults),
            "{}",
            point.spec
        );
    }
    // The parameter matters on this trace: the sweep is not one count repeated.
    let mut counts: Vec<u64> = rows.iter().map(|r| r.faults).collect();
    counts.sort_unstable();
    counts.dedup();
    assert!(counts.len() > 2, "{counts:?}");
}
