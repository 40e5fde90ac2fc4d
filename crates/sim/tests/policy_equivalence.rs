//! The simulator's built-in policies against plain, obviously correct
//! reference implementations on random traces, and every registered policy
//! in a multiprogrammed run.

use std::collections::{HashSet, VecDeque};

use pagepilot_policy::registry::{self, Setup};
use pagepilot_policy::Page;
use pagepilot_sim::{simulate, Counters, Machine, Trace};
use proptest::prelude::*;

/// Missing faults (first touches included) of LRU: a recency stack, most
/// recent last.
fn reference_lru(refs: &[u64], frames: usize) -> u64 {
    reference_stack(refs, frames, false)
}

/// MRU: a recency stack; a miss evicts the most recently used page.
fn reference_mru(refs: &[u64], frames: usize) -> u64 {
    reference_stack(refs, frames, true)
}

/// A recency stack, most recent last; a miss in full memory evicts the
/// bottom (least recent) or, if `evict_top`, the top (most recent).
fn reference_stack(refs: &[u64], frames: usize, evict_top: bool) -> u64 {
    let mut stack: Vec<u64> = Vec::new();
    let mut faults = 0;
    for &r in refs {
        if let Some(i) = stack.iter().position(|&p| p == r) {
            stack.remove(i);
        } else {
            faults += 1;
            if stack.len() == frames {
                if evict_top {
                    stack.pop();
                } else {
                    stack.remove(0);
                }
            }
        }
        stack.push(r);
    }
    faults
}

/// FIFO: a queue in load order; hits change nothing.
fn reference_fifo(refs: &[u64], frames: usize) -> u64 {
    let mut queue: VecDeque<u64> = VecDeque::new();
    let mut faults = 0;
    for &r in refs {
        if !queue.contains(&r) {
            faults += 1;
            if queue.len() == frames {
                queue.pop_front();
            }
            queue.push_back(r);
        }
    }
    faults
}

/// OPT: a miss evicts the resident page whose next use is furthest away,
/// found by scanning the future.
fn reference_opt(refs: &[u64], frames: usize) -> u64 {
    let mut resident: Vec<u64> = Vec::new();
    let mut faults = 0;
    for (i, &r) in refs.iter().enumerate() {
        if resident.contains(&r) {
            continue;
        }
        faults += 1;
        if resident.len() == frames {
            let next_use = |p: u64| {
                refs[i + 1..]
                    .iter()
                    .position(|&q| q == p)
                    .unwrap_or(usize::MAX)
            };
            let (victim, _) = resident
                .iter()
                .enumerate()
                .max_by_key(|&(_, &p)| next_use(p))
                .unwrap();
            resident.swap_remove(victim);
        }
        resident.push(r);
    }
    faults
}

/// CLOCK: frames in a circle with a hand; a miss advances the hand past
/// referenced frames (clearing them) and replaces the first unreferenced one.
fn reference_clock(refs: &[u64], frames: usize) -> u64 {
    let mut ring: Vec<(u64, bool)> = Vec::new();
    let mut hand = 0;
    let mut faults = 0;
    for &r in refs {
        if let Some(slot) = ring.iter_mut().find(|(p, _)| *p == r) {
            slot.1 = true;
            continue;
        }
        faults += 1;
        if ring.len() < frames {
            ring.push((r, true));
            continue;
        }
        while ring[hand].1 {
            ring[hand].1 = false;
            hand = (hand + 1) % frames;
        }
        ring[hand] = (r, true);
        hand = (hand + 1) % frames;
    }
    faults
}

/// ARC as Megiddo and Modha's pseudo-code states it (cases I-IV), lists
/// with the LRU end first.
fn reference_arc(refs: &[u64], c: usize) -> u64 {
    let (mut t1, mut t2, mut b1, mut b2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut p = 0usize;
    let mut faults = 0;
    let replace = |t1: &mut Vec<u64>,
                   t2: &mut Vec<u64>,
                   b1: &mut Vec<u64>,
                   b2: &mut Vec<u64>,
                   in_b2: bool,
                   p: usize| {
        if !t1.is_empty() && (t1.len() > p || (in_b2 && t1.len() == p)) {
            b1.push(t1.remove(0));
        } else {
            b2.push(t2.remove(0));
        }
    };
    for &x in refs {
        if let Some(i) = t1.iter().position(|&q| q == x) {
            t1.remove(i);
            t2.push(x);
            continue;
        }
        if let Some(i) = t2.iter().position(|&q| q == x) {
            t2.remove(i);
            t2.push(x);
            continue;
        }
        faults += 1;
        if b1.contains(&x) {
            p = (p + (b2.len() / b1.len()).max(1)).min(c);
            replace(&mut t1, &mut t2, &mut b1, &mut b2, false, p);
            b1.retain(|&q| q != x);
            t2.push(x);
        } else if b2.contains(&x) {
            p = p.saturating_sub((b1.len() / b2.len()).max(1));
            replace(&mut t1, &mut t2, &mut b1, &mut b2, true, p);
            b2.retain(|&q| q != x);
            t2.push(x);
        } else {
            let total = t1.len() + t2.len() + b1.len() + b2.len();
            if t1.len() + b1.len() == c {
                if t1.len() < c {
                    b1.remove(0);
                    replace(&mut t1, &mut t2, &mut b1, &mut b2, false, p);
                } else {
                    t1.remove(0);
                }
            } else if total >= c {
                if total == 2 * c {
                    b2.remove(0);
                }
                replace(&mut t1, &mut t2, &mut b1, &mut b2, false, p);
            }
            t1.push(x);
        }
    }
    faults
}

/// SIEVE as its paper states it: a queue (oldest first) of pages with a
/// visited bit set by hits, and a hand that only moves towards the newest.
fn reference_sieve(refs: &[u64], frames: usize) -> u64 {
    let mut queue: Vec<(u64, bool)> = Vec::new();
    let mut hand: Option<usize> = None;
    let mut faults = 0;
    for &x in refs {
        if let Some(e) = queue.iter_mut().find(|(q, _)| *q == x) {
            e.1 = true;
            continue;
        }
        faults += 1;
        if queue.len() == frames {
            loop {
                let h = hand.unwrap_or(0);
                if queue[h].1 {
                    queue[h].1 = false;
                    hand = (h + 1 < queue.len()).then_some(h + 1);
                } else {
                    queue.remove(h);
                    hand = (h < queue.len()).then_some(h);
                    break;
                }
            }
        }
        queue.push((x, false));
    }
    faults
}

/// CAR as Bansal and Modha's pseudo-code states it: two clocks (head
/// first) with reference bits set by hits, ghost lists with the LRU end
/// first.
fn reference_car(refs: &[u64], c: usize) -> u64 {
    let mut t1: Vec<(u64, bool)> = Vec::new();
    let mut t2: Vec<(u64, bool)> = Vec::new();
    let (mut b1, mut b2): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let mut p = 0usize;
    let mut faults = 0;
    for &x in refs {
        if let Some(e) = t1.iter_mut().chain(t2.iter_mut()).find(|(q, _)| *q == x) {
            e.1 = true;
            continue;
        }
        faults += 1;
        let (in_b1, in_b2) = (b1.contains(&x), b2.contains(&x));
        if t1.len() + t2.len() == c {
            loop {
                if t1.len() >= p.max(1) {
                    let (head, referenced) = t1.remove(0);
                    if !referenced {
                        b1.push(head);
                        break;
                    }
                    t2.push((head, false));
                } else {
                    let (head, referenced) = t2.remove(0);
                    if !referenced {
                        b2.push(head);
                        break;
                    }
                    t2.push((head, false));
                }
            }
            if !in_b1 && !in_b2 {
                if t1.len() + b1.len() == c {
                    b1.remove(0);
                } else if t1.len() + t2.len() + b1.len() + b2.len() == 2 * c {
                    b2.remove(0);
                }
            }
        }
        if in_b1 {
            p = (p + (b2.len() / b1.len()).max(1)).min(c);
            b1.retain(|&q| q != x);
            t2.push((x, false));
        } else if in_b2 {
            p = p.saturating_sub((b1.len() / b2.len()).max(1));
            b2.retain(|&q| q != x);
            t2.push((x, false));
        } else {
            t1.push((x, false));
        }
    }
    faults
}

/// 2Q (full version) as Johnson and Shasha's pseudo-code states it, with
/// Kin = 25% and Kout = 50% of the frames.
fn reference_2q(refs: &[u64], c: usize) -> u64 {
    let (kin, kout) = ((c / 4).max(1), (c / 2).max(1));
    let (mut a1in, mut a1out): (VecDeque<u64>, VecDeque<u64>) = (VecDeque::new(), VecDeque::new());
    let mut am: Vec<u64> = Vec::new();
    let mut faults = 0;
    for &x in refs {
        if let Some(i) = am.iter().position(|&q| q == x) {
            am.remove(i);
            am.push(x);
            continue;
        }
        if a1in.contains(&x) {
            continue;
        }
        faults += 1;
        let remembered = a1out.contains(&x);
        if a1in.len() + am.len() == c {
            if a1in.len() > kin || am.is_empty() {
                a1out.push_back(a1in.pop_front().unwrap());
                if a1out.len() > kout {
                    a1out.pop_front();
                }
            } else {
                am.remove(0);
            }
        }
        if remembered {
            a1out.retain(|&q| q != x);
            am.push(x);
        } else {
            a1in.push_back(x);
        }
    }
    faults
}

/// A reference implementation: fault count of a reference string with some frames.
type Reference = fn(&[u64], usize) -> u64;

/// Runs `spec` through the simulator with the trace's future available.
fn run(spec: &str, trace: &Trace, frames: usize) -> Counters {
    let setup = Setup {
        slots: trace.distinct(),
        frames,
        future: Some(&trace.refs),
    };
    let policy = registry::build(spec, &setup).unwrap();
    simulate(trace, policy, frames)
}

fn trace_strategy() -> impl Strategy<Value = (Vec<u64>, usize)> {
    (1u64..12, 1usize..9).prop_flat_map(|(universe, frames)| {
        (prop::collection::vec(0..universe, 1..300), Just(frames))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn test_builtins_match_reference_fault_counts((vpns, frames) in trace_strategy()) {
        let trace = Trace::from_pages(vpns.iter().copied());
        let cases: [(&str, Reference); 9] = [
            ("lru", reference_lru),
            ("fifo", reference_fifo),
            ("mru", reference_mru),
            ("opt", reference_opt),
            ("clock", reference_clock),
            ("arc", reference_arc),
            ("sieve", reference_sieve),
            ("car", reference_car),
            ("2q", reference_2q),
        ];
        for (spec, reference) in cases {
            let c = run(spec, &trace, frames);
            prop_assert_eq!(c.faults, reference(&vpns, frames), "{} with {} frames", spec, frames);
            prop_assert_eq!(c.overruled, 0, "{} named an invalid victim", spec);
            prop_assert_eq!(c.references, vpns.len() as u64);
            prop_assert_eq!(c.cold_faults, trace.distinct() as u64);
        }
    }

    /// Every registered policy, on random multiprogrammed traces, names only
    /// valid victims and never faults less than the distinct pages or more
    /// than the references.
    #[test]
    fn test_every_policy_is_sound_on_random_multiprogrammed_traces(
        refs in prop::collection::vec((0u16..3, 0u64..16), 1..400),
        frames in 1usize..24,
    ) {
        let trace = Trace::from_pages(refs.iter().map(|&(space, page)| Page::vpn_in(space, page)));
        for name in registry::available() {
            let c = run(name, &trace, frames);
            prop_assert_eq!(c.overruled, 0, "{} named an invalid victim", name);
            prop_assert!(c.faults >= trace.distinct() as u64, "{}: {:?}", name, c);
            prop_assert!(c.faults <= c.references, "{}: {:?}", name, c);
        }
    }
}

/// Three processes interleaved round-robin by a quantum of references: a
/// cyclic scan, a hot set, and a pseudo-random walk.
fn multiprogrammed_trace(quantum: usize, rounds: usize) -> Trace {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cursor = [0u64; 3];
    let mut trace = Trace::new();
    for _ in 0..rounds {
        for space in 0..3u16 {
            for _ in 0..quantum {
                let c = &mut cursor[space as usize];
                let page = match space {
                    0 => *c % 40,
                    1 => *c % 6,
                    _ => random() % 64,
                };
                *c += 1;
                trace.push(Page::vpn_in(space, page), random() % 4 == 0);
            }
        }
    }
    trace
}

#[test]
fn test_every_policy_runs_multiprogrammed_without_overruled_victims() {
    let trace = multiprogrammed_trace(7, 120);
    let spaces: HashSet<u16> = trace
        .pages
        .iter()
        .map(|&vpn| (vpn >> pagepilot_policy::SPACE_SHIFT) as u16)
        .collect();
    assert_eq!(spaces.len(), 3);
    for name in registry::available() {
        for frames in [1, 4, 16, 50, 200] {
            let c = run(name, &trace, frames);
            assert_eq!(c.overruled, 0, "{name} with {frames} frames: {c:?}");
            assert_eq!(c.references, trace.len() as u64);
            assert!(c.faults >= trace.distinct() as u64, "{name}: {c:?}");
            assert!(c.faults <= c.references, "{name}: {c:?}");
            assert_eq!(c.evictions, c.faults - c.faults.min(frames as u64));
            if frames >= trace.distinct() {
                assert_eq!(c.faults, trace.distinct() as u64, "{name} {c:?}");
            }
        }
    }
}

/// Frames taken back mid-run (ReclaimFrame) through each policy: pages it
/// did not choose leave, and it must still name only valid victims.
#[test]
fn test_every_policy_survives_reclaim_without_overruled_victims() {
    let trace = multiprogrammed_trace(5, 80);
    for name in registry::available() {
        let frames = 24;
        let setup = Setup {
            slots: trace.distinct(),
            frames,
            future: Some(&trace.refs),
        };
        let mut m = Machine::new(&trace, registry::build(name, &setup).unwrap(), frames, 0);
        for (i, &slot) in trace.refs.iter().enumerate() {
            if i == trace.len() / 3 || i == trace.len() / 2 {
                m.reclaim(6);
            }
            m.access(slot, trace.is_write(i), i as u64);
        }
        let c = m.finish();
        assert_eq!(c.overruled, 0, "{name}: {c:?}");
        assert!(c.faults >= trace.distinct() as u64 && c.faults <= c.references);
    }
}

#[test]
fn test_registry_runs_car_live_for_arc_and_checks_parameters() {
    let setup = Setup {
        slots: 8,
        frames: 4,
        future: None,
    };
    assert_eq!(registry::build_live("arc", &setup).unwrap().name(), "car");
    assert!(matches!(
        registry::build_live("2q", &setup),
        Err(registry::RegistryError::SimulatorOnly(_))
    ));
    for live in ["sieve", "s3fifo", "car"] {
        assert_eq!(registry::build_live(live, &setup).unwrap().name(), live);
    }
    assert!(registry::build("s3fifo:small=20", &setup).is_ok());
    assert!(registry::build("2q:kin=30,kout=60", &setup).is_ok());
    for bad in [
        "s3fifo:small=0",
        "s3fifo:small=95",
        "s3fifo:big=1",
        "2q:kin=0",
        "2q:kout=x",
    ] {
        assert!(
            matches!(
                registry::build(bad, &setup),
                Err(registry::RegistryError::BadParameter { .. })
            ),
            "{bad} accepted"
        );
    }
}
