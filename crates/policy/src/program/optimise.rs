//! The load-time optimiser: after the checker has accepted a program and it
//! has been decoded, rewrites the decoded code so common command sequences
//! run as one instruction.
//!
//! - Pairs and triples: `ref; jump-if` (the clock hand's test), `comp; jump-if`
//!   over integers, `enqueue back; jump`, and `dequeue front; ref; jump-if`.
//! - Loop idioms: the second-chance scan `L: dequeue q, p; ref p, v;
//!   jump R, #1; ...; R: enqueue q, p; jump L` (what `while (true) { p =
//!   dequeue(q); if (!ref(p, 0)) ...; enqueue(q, p); }` compiles to) becomes
//!   one [`Insn::Scan`] that rotates the queue natively; an `activate` of an
//!   event that is such a loop followed by Return becomes one
//!   [`Insn::CallScan`] that runs it without a call.
//! - Event tails: `enqueue back; return` and `set page; enqueue back; return`.
//! - Whole event bodies of the form `if (free == 0) { victim = CHOICE; }
//!   enqueue(q, fault);` with CHOICE `fifo`, `mru`, `lru` or a scan event
//!   (any integer guard): one [`Insn::Idiom`], so the usual PageFault runs
//!   in a single dispatch.
//!
//! Every rewrite replaces only the instruction at the sequence's first
//! command and leaves the rest in place, so jumps into the middle of a
//! sequence still land on the plain commands. The rewrites preserve meaning
//! exactly: the same effects on queues, variables and memory, the same flag,
//! and the same budget charge (one unit per command the sequence stands
//! for). When an event has less budget left than a fused instruction needs,
//! the interpreter finishes it on the plain code, so even budget stops are
//! identical (`crates/policy/tests/optimiser.rs` checks all of this against
//! the unoptimised code on random programs).

use super::interp::{Choice, Idiom, Insn};

/// Rewrites `code` in place; `code` is one program's decoded commands.
/// Returns the table that [`Insn::Idiom`]s index.
pub fn optimise(code: &mut [Insn]) -> Vec<Idiom> {
    fuse(code);
    scans(code);
    calls(code);
    idioms(code)
}

/// Fuses pairs (and a triple) into one instruction that does both and skips
/// the rest. Back to front, so a pair's second half is already fused.
fn fuse(code: &mut [Insn]) {
    for i in (0..code.len().saturating_sub(1)).rev() {
        let fused = match (code[i], code[i + 1]) {
            (Insn::RefSet { p, v }, Insn::JumpIf { to, when }) => {
                Insn::RefSetJump { p, v, to, when }
            }
            (Insn::EnQueue { q, p, front: false }, Insn::Return) => Insn::EnQueueReturn { q, p },
            (Insn::SetPage { dst, src }, Insn::EnQueueReturn { q, p }) => {
                Insn::SetPageEnQueueReturn { dst, src, q, p }
            }
            (Insn::CompInt { rel, a, b }, Insn::JumpIf { to, when }) => Insn::CompIntJump {
                rel,
                a,
                b,
                to,
                when,
            },
            (Insn::EnQueue { q, p, front: false }, Insn::Jump { to }) => {
                Insn::EnQueueJump { q, p, to }
            }
            (
                Insn::DeQueue {
                    q,
                    dst,
                    back: false,
                },
                Insn::RefSetJump { p, v, to, when },
            ) if p == dst => Insn::DeQueueRefJump { q, p, v, to, when },
            _ => continue,
        };
        code[i] = fused;
    }
}

/// Finds second-chance loops among the fused instructions.
fn scans(code: &mut [Insn]) {
    for i in 0..code.len() {
        let Insn::DeQueueRefJump {
            q,
            p,
            v,
            to,
            when: true,
        } = code[i]
        else {
            continue;
        };
        // The referenced branch must put the same page at the back of the
        // same queue and jump straight back to the dequeue.
        let back = code.get(to as usize).copied();
        if back == Some(Insn::EnQueueJump { q, p, to: i as u16 }) {
            code[i] = Insn::Scan {
                q,
                p,
                v,
                exit: i as u16 + 3,
            };
        }
    }
}

/// Inlines calls of events that are a scan loop ending in Return.
fn calls(code: &mut [Insn]) {
    for i in 0..code.len() {
        let Insn::Activate { start } = code[i] else {
            continue;
        };
        let Some(&Insn::Scan { q, p, v, exit }) = code.get(start as usize) else {
            continue;
        };
        if code.get(exit as usize) == Some(&Insn::Return) {
            code[i] = Insn::CallScan {
                start,
                q,
                p,
                v,
                exit,
            };
        }
    }
}

/// Finds guarded-choice bodies (see [`Idiom`]) among the fused instructions.
fn idioms(code: &mut [Insn]) -> Vec<Idiom> {
    let mut table = Vec::new();
    for i in 0..code.len() {
        let Insn::CompIntJump {
            rel,
            a,
            b,
            to,
            when,
        } = code[i]
        else {
            continue;
        };
        let at = i + 2;
        let tail = to as usize;
        let (choice, tail_at) = match code.get(at) {
            Some(&Insn::Fifo { q, dst }) => (Choice::Fifo { q, dst }, at + 1),
            Some(&Insn::Mru { q, dst }) => (Choice::Mru { q, dst }, at + 1),
            Some(&Insn::Lru { q, dst }) => (Choice::Lru { q, dst }, at + 1),
            Some(&Insn::CallScan {
                start,
                q,
                p,
                v,
                exit,
            }) => match code.get(at + 1) {
                Some(&Insn::SetPageEnQueueReturn {
                    dst,
                    src,
                    q: q2,
                    p: p2,
                }) if code.get(at + 2) == Some(&Insn::EnQueueReturn { q: q2, p: p2 }) => (
                    Choice::Scan {
                        start,
                        q,
                        p,
                        v,
                        exit,
                        dst,
                        src,
                    },
                    at + 2,
                ),
                _ => continue,
            },
            _ => continue,
        };
        let Some(&Insn::EnQueueReturn { q, p }) = code.get(tail) else {
            continue;
        };
        if tail != tail_at || table.len() > usize::from(u16::MAX) {
            continue;
        }
        code[i] = Insn::Idiom {
            index: table.len() as u16,
        };
        table.push(Idiom {
            rel,
            a,
            b,
            when,
            choice,
            at: at as u16,
            tail: tail as u16,
            q,
            p,
        });
    }
    table
}
