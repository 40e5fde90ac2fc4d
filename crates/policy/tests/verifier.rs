//! One negative test per checker rejection, matched on the error variant.

use pagepilot_policy::program::asm::assemble;
use pagepilot_policy::program::operand::{Operand, Operator, Rel};
use pagepilot_policy::program::program::{MAX_COMMANDS, MAX_EVENTS};
use pagepilot_policy::program::verifier::Site;
use pagepilot_policy::program::{verify, Command, EventDef, Opcode, Program, VerifyError};

/// Operands: 1 queue `q`, 2 page `p`, 3 victim, 4 label 0, 5 const 0, 6 event 0, 7 int, 8 rel eq.
fn base_operands() -> Vec<Operand> {
    use pagepilot_policy::program::operand::SysVar;
    vec![
        Operand::None,
        Operand::Queue,
        Operand::Page,
        Operand::Sys(SysVar::Victim),
        Operand::Label(0),
        Operand::Const(0),
        Operand::Event(0),
        Operand::Int(0),
        Operand::Op(Operator::Rel(Rel::Eq)),
    ]
}

fn cmd(op: Opcode, operands: &[u8]) -> Command {
    Command::new(op.code(), operands)
}

/// A valid program whose PageFault body is `body` followed by nothing else.
fn with_page_fault(body: Vec<Command>) -> Program {
    let len = body.len() as u16;
    let mut code = body;
    code.push(cmd(Opcode::Return, &[]));
    Program {
        operands: base_operands(),
        events: vec![
            EventDef {
                name: "PageFault".into(),
                start: 0,
                len,
            },
            EventDef {
                name: "ReclaimFrame".into(),
                start: len,
                len: 1,
            },
        ],
        code,
        lines: Vec::new(),
        names: Vec::new(),
    }
}

fn ok_body() -> Vec<Command> {
    vec![cmd(Opcode::Fifo, &[1, 3]), cmd(Opcode::Return, &[])]
}

#[test]
fn test_valid_program_is_accepted() {
    verify(with_page_fault(ok_body())).expect("valid program");
}

#[test]
fn test_unknown_opcode_is_rejected() {
    let mut body = ok_body();
    body.insert(0, Command::new(200, &[]));
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::UnknownOpcode {
                code: 200,
                at: Site { index: 0, .. }
            }
        ),
        "{err}"
    );
}

#[test]
fn test_wrong_operand_count_is_rejected() {
    let mut body = ok_body();
    body.insert(0, cmd(Opcode::EmptyQ, &[1, 2]));
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(err, VerifyError::OperandCount { found: 2, .. }),
        "{err}"
    );
}

#[test]
fn test_operand_gap_counts_as_wrong_count() {
    let mut body = ok_body();
    body.insert(0, Command::new(Opcode::InQ.code(), &[1, 0, 2]));
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(matches!(err, VerifyError::OperandCount { .. }), "{err}");
}

#[test]
fn test_wrong_operand_type_is_rejected() {
    let mut body = ok_body();
    body.insert(0, cmd(Opcode::Ref, &[1])); // a queue where a page is needed
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::OperandType {
                position: 1,
                expected: "page",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn test_write_to_read_only_operand_is_rejected() {
    let mut body = ok_body();
    body.insert(0, cmd(Opcode::Set, &[5, 7])); // const = int
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(err, VerifyError::ReadOnly { position: 1, .. }),
        "{err}"
    );
}

#[test]
fn test_operand_index_outside_array_is_rejected() {
    let mut body = ok_body();
    body.insert(0, cmd(Opcode::EmptyQ, &[99]));
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::OperandOutOfRange {
                operand: 99,
                position: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn test_jump_outside_event_is_rejected() {
    let mut p = with_page_fault(ok_body());
    p.operands.push(Operand::Label(7)); // index 9
    p.code.insert(0, cmd(Opcode::Jump, &[9]));
    p.events[0].len += 1;
    p.events[1].start += 1;
    let err = verify(p).unwrap_err();
    assert!(
        matches!(err, VerifyError::JumpOutsideEvent { target: 7, .. }),
        "{err}"
    );
}

#[test]
fn test_path_not_ending_in_return_is_rejected() {
    // PageFault: `fifo q, victim` then falls into ReclaimFrame's code.
    let body = vec![cmd(Opcode::Fifo, &[1, 3])];
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(err, VerifyError::MissingReturn { ref event, at: Site { index: 0, .. } } if event == "PageFault"),
        "{err}"
    );
}

#[test]
fn test_conditional_jump_fallthrough_off_the_end_is_rejected() {
    let mut p = with_page_fault(vec![cmd(Opcode::Return, &[])]);
    p.operands.push(Operand::Const(1)); // 9
                                        // EmptyQ; jump-if-true to 0 (the EmptyQ); falls through off the end.
    p.code.splice(
        0..1,
        [cmd(Opcode::EmptyQ, &[1]), cmd(Opcode::Jump, &[4, 9])],
    );
    p.events[0].len = 2;
    p.events[1].start = 2;
    let err = verify(p).unwrap_err();
    assert!(matches!(err, VerifyError::MissingReturn { .. }), "{err}");
}

#[test]
fn test_missing_page_fault_is_rejected() {
    let mut p = with_page_fault(ok_body());
    p.events[0].name = "Other".into();
    assert_eq!(
        verify(p).unwrap_err(),
        VerifyError::MissingEvent("PageFault")
    );
}

#[test]
fn test_missing_reclaim_frame_is_rejected() {
    let mut p = with_page_fault(ok_body());
    p.events.pop();
    assert_eq!(
        verify(p).unwrap_err(),
        VerifyError::MissingEvent("ReclaimFrame")
    );
}

#[test]
fn test_activate_of_undefined_event_is_rejected() {
    let mut p = with_page_fault(ok_body());
    p.operands.push(Operand::Event(9)); // index 9
    p.code.insert(0, cmd(Opcode::Activate, &[9]));
    p.events[0].len += 1;
    p.events[1].start += 1;
    let err = verify(p).unwrap_err();
    assert!(
        matches!(err, VerifyError::UndefinedEvent { event: 9, .. }),
        "{err}"
    );
}

#[test]
fn test_recursive_activate_is_rejected() {
    let mut p = with_page_fault(ok_body());
    p.code.insert(0, cmd(Opcode::Activate, &[6])); // PageFault activates itself
    p.events[0].len += 1;
    p.events[1].start += 1;
    let err = verify(p).unwrap_err();
    assert!(
        matches!(err, VerifyError::RecursiveActivate { .. }),
        "{err}"
    );
}

#[test]
fn test_program_over_size_limit_is_rejected() {
    let body: Vec<Command> = (0..MAX_COMMANDS)
        .map(|_| cmd(Opcode::Return, &[]))
        .collect();
    let err = verify(with_page_fault(body)).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::TooLarge {
                what: "commands",
                ..
            }
        ),
        "{err}"
    );
    let mut p = with_page_fault(ok_body());
    for i in 0..MAX_EVENTS {
        p.events.push(EventDef {
            name: format!("E{i}"),
            start: 0,
            len: 1,
        });
    }
    let err = verify(p).unwrap_err();
    assert!(
        matches!(err, VerifyError::TooLarge { what: "events", .. }),
        "{err}"
    );
}

#[test]
fn test_pages_compared_by_order_are_rejected() {
    let mut p = with_page_fault(ok_body());
    p.operands.push(Operand::Op(Operator::Rel(Rel::Lt))); // 9
    p.code.insert(0, cmd(Opcode::Comp, &[2, 3, 9]));
    p.events[0].len += 1;
    p.events[1].start += 1;
    let err = verify(p).unwrap_err();
    assert!(
        matches!(err, VerifyError::OperandType { position: 3, .. }),
        "{err}"
    );
}

#[test]
fn test_rejection_of_assembled_program_names_its_source_line() {
    let src = "queue q\npage p\nevent PageFault\n    fifo q, victim\n    ref q\n    return\nevent ReclaimFrame\n    return\n";
    let err = verify(assemble(src).unwrap()).unwrap_err();
    match err {
        VerifyError::OperandType { at, .. } => assert_eq!(
            at,
            Site {
                index: 1,
                line: Some(5)
            }
        ),
        other => panic!("{other}"),
    }
    let src = "queue q\nevent PageFault\n    activate @77\n    return\nevent ReclaimFrame\n    .word 0xfe000000\n    return\n";
    let err = verify(assemble(src).unwrap()).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::OperandOutOfRange {
                at: Site {
                    index: 0,
                    line: Some(3)
                },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn test_rejection_of_translated_program_names_its_source_line() {
    use pagepilot_policy::program::translator::translate;
    // Translated code is well-formed by construction; drop the event's final
    // Return to show the line table reaches the checker.
    let src = "queue q;\nevent PageFault() {\n  victim = fifo(q);\n}\nevent ReclaimFrame() { victim = fifo(q); }\n";
    let mut p = translate(src).unwrap();
    p.code[1] = Command::new(99, &[]);
    let err = verify(p).unwrap_err();
    assert!(
        matches!(
            err,
            VerifyError::UnknownOpcode {
                at: Site {
                    index: 1,
                    line: Some(3)
                },
                ..
            }
        ),
        "{err}"
    );
}
