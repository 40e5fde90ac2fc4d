//! Belady's anomaly: FIFO can fault more with more frames; stack algorithms
//! (LRU, OPT) cannot.

use pagepilot_policy::registry::{self, Setup};
use pagepilot_sim::{simulate, Counters, Trace};

/// The reference string of Belady, Nelson and Shedler (1969).
const ANOMALY: [u64; 12] = [1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5];

fn run(spec: &str, frames: usize) -> Counters {
    let trace = Trace::from_pages(ANOMALY);
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    let c = simulate(&trace, registry::build(spec, &setup).unwrap(), frames);
    assert_eq!(c.overruled, 0, "{spec} named an invalid victim");
    assert_eq!(c.cold_faults, 5);
    c
}

#[test]
fn test_fifo_shows_beladys_anomaly() {
    assert_eq!(run("fifo", 3).faults, 9);
    assert_eq!(run("fifo", 4).faults, 10);
}

#[test]
fn test_lru_and_opt_fault_less_with_more_frames_on_anomaly_string() {
    // Worked by hand: LRU 10 then 8, OPT 7 then 6.
    assert_eq!(run("lru", 3).faults, 10);
    assert_eq!(run("lru", 4).faults, 8);
    assert_eq!(run("opt", 3).faults, 7);
    assert_eq!(run("opt", 4).faults, 6);
    for frames in 1..6 {
        assert!(run("lru", frames + 1).faults <= run("lru", frames).faults);
        assert!(run("opt", frames + 1).faults <= run("opt", frames).faults);
    }
}
