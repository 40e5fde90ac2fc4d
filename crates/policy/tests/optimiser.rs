//! The load-time optimiser changes nothing observable: random verified
//! programs run with and without it give the same outcomes (budget stops
//! included), victims, variables, queues and referenced bits, event by event.

use std::sync::atomic::AtomicBool;

use pagepilot_policy::program::interp::{EventInput, Insn, Outcome, Vm};
use pagepilot_policy::program::translator::translate;
use pagepilot_policy::program::{verify, Command, EventDef, Operand, Program, Verified};
use proptest::prelude::*;

mod common;
use common::{Mem, SLOTS};

/// Runs the same events on an optimised and a plain copy and compares
/// everything observable after each. Returns how many events stopped on
/// their budget.
fn same_with_and_without(v: &Verified, seed: u64, budgets: &[u64]) -> Result<usize, TestCaseError> {
    let mut fast = Vm::new(v, SLOTS);
    let mut slow = Vm::with_optimiser(v, SLOTS, false);
    let mut mem = Mem::new(8);
    let stop = AtomicBool::new(false);
    let mut x = seed | 1;
    let mut stops = 0;
    for (round, &budget) in budgets.iter().enumerate() {
        if round % 3 == 0 {
            mem.scramble(&mut x, 1);
        }
        let event = round % v.program().events.len();
        let input = mem.event_input(round * 5, round);
        let mut mem2 = mem.clone();
        let a = fast.run(event, input, &mut mem, budget, &stop);
        let b = slow.run(event, input, &mut mem2, budget, &stop);
        prop_assert_eq!(a, b, "outcome, event {} round {}", event, round);
        prop_assert_eq!(&mem, &mem2, "memory, round {}", round);
        prop_assert_eq!(fast.victim(), slow.victim());
        prop_assert_eq!(fast.queued(), slow.queued(), "queues, round {}", round);
        prop_assert_eq!(
            fast.variables(),
            slow.variables(),
            "variables, round {}",
            round
        );
        if let Outcome::Budget { .. } = a {
            stops += 1;
        }
    }
    Ok(stops)
}

const BODY: &[&str] = &[
    "x = x + 1;",
    "x = 0;",
    "p = dequeue(q);",
    "enqueue(q, p);",
    "enqueue(q, fault);",
    "enqueue(r, fault);",
    "victim = lru(q);",
    "victim = p;",
    "victim = mru(q);",
    "victim = fifo(r);",
    "if (ref(p, 0)) {",
    "if (free > 0) {",
    "if (!empty(q) && x != 2) {",
    "} else {",
    "}",
    "}",
    "Aux();",
    "Scan();",
    "x -= count(q);",
    // Second-chance loops the optimiser fuses, and near misses it must not.
    "while (true) { p = dequeue(q); if (!ref(p, 0)) { break; } enqueue(q, p); }",
    "while (true) { p = dequeue(q); if (!ref(p, 1)) { break; } enqueue(q, p); }",
    "while (true) { p = dequeue(q); if (!ref(p, x)) { break; } enqueue(q, p); }",
    "while (true) { p = dequeue(q); if (!ref(p, 0)) { break; } enqueue(r, p); }",
    "while (true) { p = dequeue(r); if (ref(p, 0)) { break; } enqueue(r, p); }",
    "while (x < 9) { x += 1; p = dequeue(q); if (!ref(p, 0)) { break; } enqueue(q, p); }",
    // Guarded choices the optimiser runs as one instruction.
    "if (free == 0) { victim = lru(q); } enqueue(q, fault); return;",
    "if (free == 0) { victim = mru(q); } enqueue(q, fault); return;",
    "if (x < 2) { p = fifo(r); } enqueue(q, p); return;",
    "if (free != 0) { victim = lru(r); } enqueue(r, fault); return;",
];

const SCANS: &[&str] = &[
    "while (true) { p = dequeue(q); if (!ref(p, 0)) { return; } enqueue(q, p); }",
    "while (true) { p = dequeue(q); if (!ref(p, 1)) { return; } enqueue(q, p); }",
    "while (true) { p = dequeue(r); if (!ref(p, x)) { return; } enqueue(r, p); }",
    "x += 1;",
];

fn budgets() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![1u64..40, Just(10_000)], 12..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn test_optimiser_preserves_random_source_programs(
        pf in prop::collection::vec(prop::sample::select(BODY.to_vec()), 0..10),
        rf in prop::collection::vec(prop::sample::select(BODY.to_vec()), 0..4),
        scan in prop::sample::select(SCANS.to_vec()),
        seed in any::<u64>(),
        budgets in budgets(),
    ) {
        let src = format!(
            "queue q; queue r; page p; int x;\nevent Aux() {{ x += 1; }}\n\
             event Scan() {{ {scan} }}\n\
             event PageFault() {{\n{}\nif (free == 0) {{ Scan(); victim = p; }}\nenqueue(q, fault);\n}}\n\
             event ReclaimFrame() {{\n{}\nScan(); victim = p;\n}}\n",
            pf.join("\n"),
            rf.join("\n")
        );
        if let Ok(p) = translate(&src) {
            let v = verify(p).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
            same_with_and_without(&v, seed, &budgets)?;
        }
    }

    #[test]
    fn test_optimiser_preserves_random_command_streams(
        words in prop::collection::vec((0u8..24, 0u8..9, 0u8..9, 0u8..9, 0u8..4), 1..12),
        seed in any::<u64>(),
        budgets in budgets(),
    ) {
        // A fixed operand array whose types fit many commands, so many
        // random streams pass the checker.
        let operands = vec![
            Operand::None,
            Operand::Queue,
            Operand::Page,
            Operand::Const(0),
            Operand::Int(3),
            Operand::Label(0),
            Operand::Const(1),
            Operand::Label(2),
            Operand::Page,
        ];
        let mut p = Program { operands, ..Program::default() };
        for name in ["PageFault", "ReclaimFrame"] {
            let start = p.code.len() as u16;
            for &(code, a, b, c, n) in &words {
                p.code.push(Command::new(code, &[a, b, c][..n as usize]));
            }
            p.code.push(Command::new(0, &[]));
            p.events.push(EventDef { name: name.into(), start, len: words.len() as u16 + 1 });
        }
        if let Ok(v) = verify(p) {
            same_with_and_without(&v, seed, &budgets)?;
        }
    }
}

#[test]
fn test_library_page_fault_events_run_as_one_instruction() {
    for src in [
        include_str!("../../../policies/lru.hp"),
        include_str!("../../../policies/mru.hp"),
    ] {
        let v = verify(translate(src).unwrap()).unwrap();
        let vm = Vm::new(&v, SLOTS);
        let start = v.program().events[v.page_fault()].start as usize;
        assert!(matches!(vm.code()[start], Insn::Idiom { .. }), "{src}");
    }
}

/// Every budget from 1 up on a queue of referenced pages: the optimised and
/// the plain code stop after the same commands with the same effects.
fn stops_exactly_on_every_budget(src: &str) {
    let v = verify(translate(src).unwrap()).unwrap();
    for budget in 1..60 {
        let input = EventInput {
            fault: 15,
            ..EventInput::default()
        };
        let mut outcomes = Vec::new();
        for optimise in [true, false] {
            let mut vm = Vm::with_optimiser(&v, SLOTS, optimise);
            let mut mem = Mem {
                flags: [3; SLOTS],
                capacity: 8,
            };
            let stop = AtomicBool::new(false);
            for s in 0..8 {
                let fill = EventInput {
                    fault: s,
                    free: 1,
                    ..EventInput::default()
                };
                vm.run(v.page_fault(), fill, &mut mem, 100, &stop);
            }
            assert_eq!(vm.queued().len(), 8);
            let out = vm.run(v.page_fault(), input, &mut mem, budget, &stop);
            outcomes.push((out, vm.victim(), vm.queued(), mem.clone()));
        }
        assert_eq!(outcomes[0], outcomes[1], "budget {budget}\n{src}");
    }
}

#[test]
fn test_fifo2_scan_loop_becomes_one_instruction_and_stops_exactly_on_budget() {
    let src = include_str!("../../../policies/fifo2.hp");
    let v = verify(translate(src).unwrap()).unwrap();
    let vm = Vm::new(&v, SLOTS);
    assert!(vm.code().iter().any(|i| matches!(i, Insn::Scan { .. })));
    assert!(vm.code().iter().any(|i| matches!(i, Insn::Idiom { .. })));
    stops_exactly_on_every_budget(src);
}

#[test]
fn test_lru_mru_and_fifo_idioms_stop_exactly_on_budget() {
    stops_exactly_on_every_budget(include_str!("../../../policies/lru.hp"));
    stops_exactly_on_every_budget(include_str!("../../../policies/mru.hp"));
    stops_exactly_on_every_budget(
        "queue q;\nevent PageFault() { if (free == 0) { victim = fifo(q); } enqueue(q, fault); }\n\
         event ReclaimFrame() { victim = fifo(q); }\n",
    );
}
