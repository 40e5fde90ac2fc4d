//! Random command streams, random container bytes and random source text fed
//! to the checker, the translator and the interpreter: nothing panics, and
//! every accepted program's events end in Return or are stopped by the
//! instruction budget.

use std::sync::atomic::AtomicBool;

use pagepilot_policy::program::interp::{Outcome, Vm};
use pagepilot_policy::program::operand::{ArithOp, Operand, Operator, Rel, SysVar};
use pagepilot_policy::program::translator::translate;
use pagepilot_policy::program::{verify, Command, EventDef, Program, Verified};
use proptest::prelude::*;

mod common;
use common::{Mem, SLOTS};

const BUDGET: u64 = 2_000;

/// Runs every event of an accepted program a few times on changing memory.
fn run_all(v: &Verified, seed: u64) {
    let mut vm = Vm::new(v, SLOTS);
    let mut mem = Mem::new(8);
    let stop = AtomicBool::new(false);
    let mut x = seed | 1;
    for round in 0..6 {
        mem.scramble(&mut x, 0);
        for event in 0..v.program().events.len() {
            let input = mem.event_input(round * 3, round);
            match vm.run(event, input, &mut mem, BUDGET, &stop) {
                Outcome::Returned { steps } => assert!(steps <= BUDGET),
                Outcome::Budget { steps } => assert_eq!(steps, BUDGET),
                Outcome::Stopped { .. } => panic!("no watchdog here"),
            }
        }
    }
}

fn operand() -> impl Strategy<Value = Operand> {
    prop_oneof![
        any::<i8>().prop_map(|v| Operand::Int(v.into())),
        any::<i8>().prop_map(|v| Operand::Const(v.into())),
        Just(Operand::Page),
        Just(Operand::Nil),
        Just(Operand::Queue),
        (0u16..8).prop_map(Operand::Label),
        (0u8..4).prop_map(Operand::Event),
        prop::sample::select(ArithOp::ALL.to_vec()).prop_map(|a| Operand::Op(Operator::Arith(a))),
        prop::sample::select(Rel::ALL.to_vec()).prop_map(|r| Operand::Op(Operator::Rel(r))),
        any::<bool>().prop_map(|b| Operand::Op(Operator::End(b))),
        prop::sample::select(SysVar::ALL.to_vec()).prop_map(Operand::Sys),
    ]
}

fn program() -> impl Strategy<Value = Program> {
    (
        prop::collection::vec(operand(), 1..24),
        prop::collection::vec(
            prop::collection::vec((0u8..24, 0u8..26, 0u8..26, 0u8..26, 0u8..4), 1..7),
            2..4,
        ),
    )
        .prop_map(|(ops, events)| {
            let mut operands = vec![Operand::None];
            operands.extend(ops);
            let mut p = Program {
                operands,
                ..Program::default()
            };
            let names = ["PageFault", "ReclaimFrame", "Aux"];
            for (e, cmds) in events.iter().enumerate() {
                let start = p.code.len() as u16;
                for &(code, a, b, c, n) in cmds {
                    let ops = [a, b, c];
                    p.code.push(Command::new(code, &ops[..n as usize]));
                }
                // Most events end in Return, so some streams pass the checker.
                p.code.push(Command::new(0, &[]));
                p.events.push(EventDef {
                    name: names[e].into(),
                    start,
                    len: cmds.len() as u16 + 1,
                });
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn test_random_command_streams_never_panic_and_stay_in_budget(p in program(), seed in any::<u64>()) {
        let bytes = p.to_bytes();
        let decoded = Program::from_bytes(&bytes);
        prop_assert_eq!(decoded.as_ref(), Ok(&p));
        if let Ok(v) = verify(p) {
            run_all(&v, seed);
        }
    }

    #[test]
    fn test_random_container_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..200), valid in any::<bool>()) {
        if valid && bytes.len() > 6 {
            bytes[..4].copy_from_slice(b"HPEC");
            bytes[4] = 1;
            bytes[5] = 0;
        }
        if let Ok(p) = Program::from_bytes(&bytes) {
            if let Ok(v) = verify(p) {
                run_all(&v, 7);
            }
        }
    }
}

const TOKENS: &[&str] = &[
    "queue",
    "q",
    ";",
    "page",
    "p",
    "int",
    "x",
    "=",
    "1",
    "event",
    "PageFault",
    "ReclaimFrame",
    "(",
    ")",
    "{",
    "}",
    "while",
    "true",
    "if",
    "else",
    "victim",
    "fault",
    "dequeue",
    "enqueue",
    "ref",
    "lru",
    "fifo",
    "mru",
    ",",
    "+",
    "-",
    "==",
    "<",
    "!",
    "&&",
    "||",
    "break",
    "continue",
    "return",
    "free",
    "0",
    "nil",
    "count",
    "vpn",
    "find",
    "x",
    "p",
    "q",
    "=",
    ";",
    "Aux",
    "*",
    "/",
    "%",
];

const BODY: &[&str] = &[
    "x = x + 1;",
    "x = 0;",
    "p = dequeue(q);",
    "enqueue(q, p);",
    "enqueue(q, fault);",
    "victim = lru(q);",
    "victim = p;",
    "victim = mru(q);",
    "while (true) {",
    "while (x < 3) {",
    "if (ref(p, 0)) {",
    "if (free > 0) {",
    "if (!empty(q) && x != 2) {",
    "} else {",
    "}",
    "}",
    "break;",
    "continue;",
    "return;",
    "x = vpn(fault) % 7;",
    "p = find(x + 100);",
    "Aux();",
    "x -= count(q);",
    "if (p == nil || mod(p)) {",
    "flush(p);",
    "x = (x * 3) / (x - 1);",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn test_random_token_soup_never_panics(toks in prop::collection::vec(prop::sample::select(TOKENS.to_vec()), 0..80)) {
        if let Ok(p) = translate(&toks.join(" ")) {
            if let Ok(v) = verify(p) {
                run_all(&v, 3);
            }
        }
    }

    #[test]
    fn test_random_text_never_panics(text in "\\PC{0,200}") {
        let _ = translate(&text);
        let _ = pagepilot_policy::program::asm::assemble(&text);
    }

    #[test]
    fn test_random_event_bodies_translate_verify_and_run_within_budget(
        pf in prop::collection::vec(prop::sample::select(BODY.to_vec()), 0..14),
        rf in prop::collection::vec(prop::sample::select(BODY.to_vec()), 0..6),
        seed in any::<u64>(),
    ) {
        let src = format!(
            "queue q; page p; int x;\nevent Aux() {{ x += 1; }}\nevent PageFault() {{\n{}\n}}\nevent ReclaimFrame() {{\n{}\n}}\n",
            pf.join("\n"),
            rf.join("\n")
        );
        if let Ok(p) = translate(&src) {
            // Whatever the translator emits, the checker accepts.
            let v = verify(p).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
            run_all(&v, seed);
        }
    }
}
