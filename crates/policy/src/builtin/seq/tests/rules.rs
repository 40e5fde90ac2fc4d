//! One test per SEQ rule of section 4.1.

use proptest::prelude::*;

use super::rig::{params, Mem, Rig};
use crate::builtin::seq::{Dir, Rule, Seq, SeqParams};
use crate::builtin::ExactLru;
use crate::registry::{self, Built, RegistryError, Setup};
use crate::{Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};

#[test]
fn test_faults_to_consecutive_pages_extend_a_sequence_upward() {
    let mut r = Rig::new(SeqParams::default());
    assert_eq!(r.fault(10), Rule::Created);
    assert_eq!(r.fault(11), Rule::Extended);
    assert_eq!(r.fault(12), Rule::Extended);
    assert_eq!(r.seqs(), vec![(10, 12, Dir::Up)]);
}

#[test]
fn test_faults_to_consecutive_pages_extend_a_sequence_downward() {
    let mut r = Rig::new(SeqParams::default());
    r.faults([12, 11, 10]);
    assert_eq!(r.seqs(), vec![(10, 12, Dir::Down)]);
}

#[test]
fn test_second_fault_sets_the_direction_and_only_the_head_grows() {
    let mut r = Rig::new(SeqParams::default());
    r.faults([10, 20]);
    assert_eq!(r.seqs(), vec![(10, 10, Dir::Nil), (20, 20, Dir::Nil)]);
    r.faults([11, 19]);
    assert_eq!(r.seqs(), vec![(10, 11, Dir::Up), (19, 20, Dir::Down)]);
    // Below an upward sequence's low end is not its head: a new sequence.
    assert_eq!(r.fault(9), Rule::Created);
    assert_eq!(r.fault(21), Rule::Created);
    assert_eq!(
        r.seqs(),
        vec![
            (9, 9, Dir::Nil),
            (10, 11, Dir::Up),
            (19, 20, Dir::Down),
            (21, 21, Dir::Nil)
        ]
    );
}

#[test]
fn test_fault_inside_an_upward_sequence_splits_it() {
    let mut r = Rig::new(SeqParams::default());
    r.faults(10..=15);
    assert_eq!(r.fault(12), Rule::Split);
    assert_eq!(r.seqs(), vec![(10, 11, Dir::Up), (12, 12, Dir::Nil)]);
    r.seq.table.check();
    // The new one-page sequence grows on; the kept part keeps its direction.
    r.faults([13, 14]);
    assert_eq!(r.seqs(), vec![(10, 11, Dir::Up), (12, 14, Dir::Up)]);
}

#[test]
fn test_fault_inside_a_downward_sequence_keeps_the_part_above() {
    let mut r = Rig::new(SeqParams::default());
    r.faults((10..=15).rev());
    assert_eq!(r.fault(12), Rule::Split);
    assert_eq!(r.seqs(), vec![(12, 12, Dir::Nil), (13, 15, Dir::Down)]);
    r.seq.table.check();
}

#[test]
fn test_fault_on_a_sequence_tail_leaves_only_the_new_page() {
    let mut r = Rig::new(SeqParams::default());
    r.faults(10..=15);
    assert_eq!(r.fault(10), Rule::Split);
    assert_eq!(r.seqs(), vec![(10, 10, Dir::Nil)]);
    r.seq.table.check();
}

#[test]
fn test_split_gives_the_kept_part_its_own_fault_times() {
    // L = 2, N = 2, M = 0: the kept part <10,12> ranks by the time of the
    // fault on page 11 (its own second most recent), not by the faults on
    // the pages cut off.
    let mut r = Rig::new(params(2, 0, 2, 200));
    r.faults(10..=13); // times 1..=4
    r.faults([100, 101, 102]); // times 5..=7: <100,102> ranks by time 6
    r.fault(13); // split: kept <10,12>, ranked by page 11's time 2
    assert_eq!(r.seqs()[0], (10, 12, Dir::Up));
    assert_eq!(r.victim(), Some(102));
    assert_eq!(
        r.seq
            .table
            .nth_recent(r.seq.table.containing(r.mem.named(11)).unwrap()),
        2
    );
}

#[test]
fn test_fault_that_extends_two_sequences_deletes_the_older() {
    // <5,9,up> faulted last at time 5, <11,15,down> at time 10.
    let mut r = Rig::new(SeqParams::default());
    r.faults(5..=9);
    r.faults((11..=15).rev());
    assert_eq!(r.fault(10), Rule::ExtendedNewer);
    assert_eq!(r.seqs(), vec![(10, 15, Dir::Down)]);
    r.seq.table.check();

    // The other way round: the upward one is newer and wins.
    let mut r = Rig::new(SeqParams::default());
    r.faults((11..=15).rev());
    r.faults(5..=9);
    assert_eq!(r.fault(10), Rule::ExtendedNewer);
    assert_eq!(r.seqs(), vec![(5, 10, Dir::Up)]);
    r.seq.table.check();
}

#[test]
fn test_extension_into_another_sequence_deletes_that_sequence() {
    // <6,10,up> and then <1,5,up> (page 5 is not below 6's head, so it does
    // not extend it). Page 6 faults again: it extends <1,5,up>, which would
    // overlap <6,10,up>, so that one goes.
    let mut r = Rig::new(SeqParams::default());
    r.faults(6..=10);
    r.faults(1..=5);
    assert_eq!(r.seqs(), vec![(1, 5, Dir::Up), (6, 10, Dir::Up)]);
    assert_eq!(r.fault(6), Rule::ExtendedOverlapping);
    assert_eq!(r.seqs(), vec![(1, 6, Dir::Up)]);
    r.seq.table.check();

    // The same with a one-page sequence left by a split: <1,8,up> split at 6
    // leaves <1,5,up> and <6,6,nil>; 6 faulting again extends <1,5,up>.
    let mut r = Rig::new(SeqParams::default());
    r.faults(1..=8);
    r.fault(6);
    assert_eq!(r.seqs(), vec![(1, 5, Dir::Up), (6, 6, Dir::Nil)]);
    assert_eq!(r.fault(6), Rule::ExtendedOverlapping);
    assert_eq!(r.seqs(), vec![(1, 6, Dir::Up)]);
    r.seq.table.check();
}

#[test]
fn test_sequence_limit_deletes_oldest_shorter_than_l_first() {
    // L = 2, X = 3. The oldest sequence is long; a newer short one goes.
    let mut r = Rig::new(params(2, 20, 5, 3));
    r.faults(100..=107); // len 8, oldest
    r.faults([200]); // len 1 < L
    r.faults(300..=303); // len 4
    r.faults([400]);
    assert_eq!(
        r.seqs(),
        vec![
            (100, 107, Dir::Up),
            (300, 303, Dir::Up),
            (400, 400, Dir::Nil)
        ]
    );
}

#[test]
fn test_sequence_limit_then_deletes_oldest_up_to_2l_then_4l() {
    // L = 2, X = 3, nothing shorter than L: the oldest of length <= 2L goes,
    // not the older sequence of length 8.
    let mut r = Rig::new(params(2, 20, 5, 3));
    r.faults(100..=107); // len 8 (<= 4L), oldest
    r.faults(300..=303); // len 4 (<= 2L)
    r.faults(500..=502); // len 3 (<= 2L), newest
    r.faults(600..=601); // the new sequence <600> deletes <300,303>; grows to 2
    assert_eq!(
        r.seqs(),
        vec![
            (100, 107, Dir::Up),
            (500, 502, Dir::Up),
            (600, 601, Dir::Up)
        ]
    );
    // X = 2: a length-9 sequence (<= 8L) outlives a newer length-5 one (<= 4L).
    let mut r = Rig::new(params(2, 20, 5, 2));
    r.faults(100..=108);
    r.faults(300..=304);
    r.faults([700]);
    assert_eq!(r.seqs(), vec![(100, 108, Dir::Up), (700, 700, Dir::Nil)]);
    r.seq.table.check();
}

#[test]
fn test_sequence_limit_ranks_age_by_last_fault_not_creation() {
    // <100> was created first but faulted last: <200> is the older one.
    let mut r = Rig::new(params(5, 20, 5, 2));
    r.faults([100, 200, 101]);
    r.faults([300]);
    assert_eq!(r.seqs(), vec![(100, 101, Dir::Up), (300, 300, Dir::Nil)]);
}

#[test]
fn test_victim_sequence_is_the_one_with_the_most_recent_nth_fault() {
    // L = 3, M = 0, N = 3. A = <100..105> faulted at times 1..=5 and 11;
    // B = <200..204> at 6..=10. A's last fault is the latest, but its third
    // most recent (time 4) is older than B's (time 8): B is replaced from.
    let mut r = Rig::new(params(3, 0, 3, 200));
    r.faults(100..=104);
    r.faults(200..=204);
    r.faults([105]);
    assert_eq!(r.victim(), Some(204));
    // Once A's third most recent fault is newer than B's, A is chosen.
    r.faults([106, 107]);
    assert_eq!(r.victim(), Some(107));
    // A shorter sequence with newer faults is not eligible.
    r.faults([300, 301]);
    assert_eq!(r.victim(), Some(107));
    assert_eq!(r.seq.decisions().from_sequences, 3);
}

#[test]
fn test_victim_is_first_resident_page_m_behind_head_skipping_disk_pages() {
    let mut r = Rig::new(params(3, 2, 5, 200));
    r.faults(100..=109); // head 109
    r.evict(107);
    r.evict(106);
    assert_eq!(r.replace(), Some(105));
    assert_eq!(r.replace(), Some(104));
    // Downward: head 10, so the search starts at 12 and goes up.
    let mut r = Rig::new(params(3, 2, 5, 200));
    r.faults((10..=19).rev());
    assert_eq!(r.replace(), Some(12));
    assert_eq!(r.replace(), Some(13));
}

#[test]
fn test_victim_search_skips_a_known_on_disk_range_in_one_step() {
    let mut r = Rig::new(params(20, 10, 5, 200));
    r.faults(0..1000); // head 999: the search starts at 989
    for v in (100..=989).rev() {
        r.evict(v);
    }
    r.mem.lookups.set(0);
    assert_eq!(r.replace(), Some(99));
    assert_eq!(r.replace(), Some(98));
    assert!(
        r.mem.lookups.get() <= 4,
        "{} residency tests",
        r.mem.lookups.get()
    );
}

#[test]
fn test_victim_comes_from_next_sequence_when_best_has_no_resident_page() {
    let mut r = Rig::new(params(3, 1, 2, 200));
    r.faults(200..=204); // older: B
    r.faults(100..=104); // newer: A, chosen first
    for v in 100..=103 {
        r.evict(v);
    }
    assert_eq!(r.replace(), Some(203));
    assert_eq!(r.replace(), Some(202));
}

#[test]
fn test_lru_fallback_when_no_sequence_reaches_l() {
    let mut r = Rig::new(SeqParams::default());
    r.faults([10, 20, 30, 40]);
    for (i, v) in [10u64, 30, 40].into_iter().enumerate() {
        let page = r.mem.named(v);
        r.seq.on_reference(page, 100 + i as u64);
    }
    assert_eq!(r.replace(), Some(20));
    assert_eq!(r.replace(), Some(10));
    assert_eq!(r.seq.decisions().from_fallback, 2);
    assert_eq!(r.seq.decisions().from_sequences, 0);
}

#[test]
fn test_live_variant_falls_back_to_second_chance() {
    let mut r = Rig {
        mem: Mem::default(),
        seq: Seq::live(SeqParams::default(), 0),
        time: 0,
    };
    r.faults([10, 20, 30]);
    // 10 is referenced again after its bit was cleared; 20 is not.
    for v in [10u64, 20, 30] {
        let s = r.mem.named(v).slot;
        r.mem.clear_referenced(s);
    }
    let s10 = r.mem.named(10).slot;
    r.mem.referenced[s10 as usize] = true;
    assert_eq!(r.replace(), Some(20));
    assert_eq!(r.seq.name(), "seq-live");
}

#[test]
fn test_minor_faults_do_not_form_sequences() {
    let mut r = Rig::new(SeqParams::default());
    r.faults([10]);
    let page = r.mem.named(11);
    r.mem.resident[page.slot as usize] = true;
    let minor = Fault {
        page,
        kind: FaultKind::Minor,
        write: false,
        time: 99,
    };
    r.seq.on_fault(minor, &mut r.mem);
    assert_eq!(r.seqs(), vec![(10, 10, Dir::Nil)]);
}

#[test]
fn test_sequences_never_join_pages_of_different_processes() {
    let mut r = Rig::new(SeqParams::default());
    let p0 = |p| Page::vpn_in(0, p);
    let p1 = |p| Page::vpn_in(1, p);
    // Interleaved upward scans by two processes over the same page numbers.
    for p in 0..30 {
        r.fault(p0(p));
        r.fault(p1(p));
    }
    assert_eq!(
        r.seqs(),
        vec![(p0(0), p0(29), Dir::Up), (p1(0), p1(29), Dir::Up)]
    );
    // Numerically adjacent across the boundary of two spaces: not a sequence.
    let top = p0((1 << crate::SPACE_SHIFT) - 1);
    let mut r = Rig::new(SeqParams::default());
    r.faults([top, top + 1]);
    assert_eq!(
        r.seqs(),
        vec![(top, top, Dir::Nil), (top + 1, top + 1, Dir::Nil)]
    );
    r.faults([top + 2]);
    assert_eq!(r.seqs()[1], (top + 1, top + 2, Dir::Up));
}

#[test]
fn test_registry_builds_seq_with_parameters_and_checks_them() {
    let setup = Setup {
        slots: 8,
        frames: 4,
        future: None,
    };
    assert!(matches!(
        registry::build("seq", &setup),
        Ok(Built::Reference(p)) if p.name() == "seq"
    ));
    assert!(matches!(
        registry::build("seq-live", &setup),
        Ok(Built::Live(p)) if p.name() == "seq-live"
    ));
    let live = registry::build_live("seq:L=50,m=10", &setup).unwrap();
    assert_eq!(live.name(), "seq-live:L=50,M=10,N=5,X=200");
    for bad in [
        "seq:L=0",
        "seq:N=0",
        "seq:X=0",
        "seq:Q=1",
        "seq:L=x",
        "seq:N=5000",
    ] {
        assert!(
            matches!(
                registry::build(bad, &setup),
                Err(RegistryError::BadParameter { .. })
            ),
            "{bad}"
        );
    }
}

proptest! {
    /// Any mix of faults and evictions keeps the list disjoint, within X,
    /// and its indexes consistent; victims are resident.
    #[test]
    fn test_table_invariants_hold_under_random_faults(
        events in proptest::collection::vec((0u64..60, 0u8..4), 1..400),
        x in 1usize..8,
        l in 1u64..5,
    ) {
        let mut r = Rig::new(params(l, 1, 2, x));
        for (vpn, what) in events {
            let slot = r.mem.named(vpn).slot as usize;
            match what {
                0 if r.mem.resident[slot] => r.evict(vpn),
                1 => {
                    if let Some(v) = r.victim() {
                        let s = r.mem.named(v).slot as usize;
                        prop_assert!(r.mem.resident[s], "victim {} is not resident", v);
                        r.evict(v);
                    }
                }
                _ if !r.mem.resident[slot] => {
                    r.fault(vpn);
                }
                _ => {}
            }
            r.seq.table.check();
        }
    }
}

/// Runs `refs` through `r` with `frames` frames, as the simulator's engine
/// does; returns the faults per pass of `per_pass` references.
fn run_passes(r: &mut Rig<ExactLru>, refs: &[u64], frames: usize, per_pass: usize) -> Vec<u64> {
    let mut faults = vec![0; refs.len().div_ceil(per_pass)];
    for (i, &vpn) in refs.iter().enumerate() {
        let page = r.mem.named(vpn);
        r.seq.on_reference(page, i as u64);
        if r.mem.resident[page.slot as usize] {
            continue;
        }
        faults[i / per_pass] += 1;
        if r.mem.resident() == frames {
            r.replace().expect("a victim when memory is full");
        }
        r.fault(vpn);
    }
    faults
}

#[test]
fn test_repeated_sweeps_keep_the_bottom_resident_and_replace_behind_the_head() {
    // The paper's es example: one region twice the memory swept upward.
    let (pages, frames) = (400u64, 200usize);
    let (l, m) = (20, 20);
    let mut r = Rig::new(SeqParams::default());
    let first: Vec<u64> = (0..pages).collect();
    run_passes(&mut r, &first, frames, pages as usize);
    // After the first pass the bottom of the region is in memory and the
    // pages behind the head, up to M from it, were replaced.
    let resident: Vec<u64> = (0..pages)
        .filter(|v| r.mem.resident[r.mem.index[v] as usize])
        .collect();
    let expected: Vec<u64> = (0..(frames as u64 - m - 1))
        .chain(pages - m - 1..pages)
        .collect();
    assert_eq!(resident, expected);
    assert_eq!(r.seq.decisions().from_fallback, 0);
    // Later passes fault on the pages that do not fit (OPT's pages - frames
    // + 1) plus at most about 2L: the new sequence must reach length L before
    // it is replaced from, and pages left by the previous one are paged out.
    let more: Vec<u64> = (0..10).flat_map(|_| 0..pages).collect();
    let faults = run_passes(&mut r, &more, frames, pages as usize);
    for &f in &faults {
        assert!(f <= pages - frames as u64 + 1 + 2 * (l + 1), "{faults:?}");
    }
    let d = r.seq.decisions();
    // Most page-outs come from sequences.
    assert!(d.from_fallback * 5 < d.from_sequences, "{d:?}");
    r.seq.table.check();
}
