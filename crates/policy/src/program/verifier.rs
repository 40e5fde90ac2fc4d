//! The checker: runs once when a program is loaded and decides whether the
//! interpreter may run it.
//!
//! It checks, for every command: the operator code exists; the operand
//! count matches one of the command's forms (absent operands are index 0 and
//! only trail); each operand index is inside the operand array; each operand
//! has the type its position needs and is writable where the command writes;
//! both operands of Set and Comp are of one kind (and pages are compared only
//! for (in)equality). For every event: its range lies inside the command
//! stream and overlaps no other; every jump stays inside the event; every
//! path from the event's first command ends in Return (control never falls
//! off the end); every Activate names a defined event; Activate never
//! recurses, so the call depth is bounded by the number of events. For the
//! program: PageFault and ReclaimFrame exist, event names are unique, and the
//! size limits hold (commands, events, operands).
//!
//! It does NOT check: that an event terminates (loops are legal; the
//! interpreter's instruction budget and the watchdog stop runaways); that a
//! named victim is a resident page of the region (checked at run time on every
//! decision, and rejected if not); that queues hold any page, or that
//! DeQueue/Find succeed (they leave nil and clear the flag); arithmetic
//! overflow (wrapping) or division by zero (gives 0); that Request/Release
//! are granted; that the policy is any good.

use thiserror::Error;

use super::opcode::{Arg, Opcode};
use super::operand::{Class, Operand, Operator, Rel, MAX_OPERANDS};
use super::program::{Program, MAX_COMMANDS, MAX_EVENTS, PAGE_FAULT, RECLAIM_FRAME};

/// Where a rejected command is: its index in the command stream and, for a
/// program compiled from source, the source line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Command index.
    pub index: usize,
    /// Source line, if known.
    pub line: Option<u32>,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "command {}", self.index)?;
        if let Some(l) = self.line {
            write!(f, " (line {l})")?;
        }
        Ok(())
    }
}

/// Why the checker rejected a program.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// No command has this operator code.
    #[error("{at}: unknown operator code {code}")]
    UnknownOpcode {
        /// Where.
        at: Site,
        /// The code.
        code: u8,
    },
    /// The number of operands matches none of the command's forms.
    #[error("{at}: `{op}` takes {expected} operand(s), found {found}")]
    OperandCount {
        /// Where.
        at: Site,
        /// The command.
        op: &'static str,
        /// Accepted counts, e.g. "1 or 2".
        expected: String,
        /// Count found.
        found: usize,
    },
    /// An operand index past the end of the operand array.
    #[error(
        "{at}: operand {position} is entry {operand}, but the operand array has {len} entries"
    )]
    OperandOutOfRange {
        /// Where.
        at: Site,
        /// Operand position (1-based).
        position: usize,
        /// The index.
        operand: u8,
        /// Operand array length.
        len: usize,
    },
    /// An operand of the wrong type.
    #[error("{at}: operand {position} of `{op}` must be {expected}, found {found}")]
    OperandType {
        /// Where.
        at: Site,
        /// The command.
        op: &'static str,
        /// Operand position (1-based).
        position: usize,
        /// What was needed.
        expected: &'static str,
        /// What the entry is.
        found: &'static str,
    },
    /// A command writes a read-only operand.
    #[error("{at}: operand {position} of `{op}` is written but is a read-only {found}")]
    ReadOnly {
        /// Where.
        at: Site,
        /// The command.
        op: &'static str,
        /// Operand position (1-based).
        position: usize,
        /// What the entry is.
        found: &'static str,
    },
    /// A jump whose target is outside its event's code.
    #[error("{at}: jump to {target} leaves event `{event}` ({len} commands)")]
    JumpOutsideEvent {
        /// Where.
        at: Site,
        /// Target, relative to the event start.
        target: u16,
        /// The event.
        event: String,
        /// Its length.
        len: u16,
    },
    /// A path through an event runs past its last command without Return.
    #[error("{at}: event `{event}` can run past its end without `return`")]
    MissingReturn {
        /// The last command on that path.
        at: Site,
        /// The event.
        event: String,
    },
    /// PageFault or ReclaimFrame is not defined.
    #[error("the program does not handle the `{0}` event")]
    MissingEvent(&'static str),
    /// Activate of an event the program does not define.
    #[error("{at}: activate of undefined event {event}")]
    UndefinedEvent {
        /// Where.
        at: Site,
        /// The event index.
        event: u8,
    },
    /// Activate that can reach itself again.
    #[error("{at}: activate of `{event}` recurses")]
    RecursiveActivate {
        /// Where.
        at: Site,
        /// The event.
        event: String,
    },
    /// An event's code range is empty, outside the stream, or overlaps another.
    #[error("event `{event}` has a bad code range {start}+{len}")]
    EventRange {
        /// The event.
        event: String,
        /// Its start.
        start: u16,
        /// Its length.
        len: u16,
    },
    /// Two events with one name.
    #[error("event `{0}` is defined twice")]
    DuplicateEvent(String),
    /// Operand array entry 0 is not the "no operand" entry.
    #[error("operand array entry 0 must be `none`")]
    NoneEntry,
    /// Over a size limit.
    #[error("program has {found} {what}, over the limit of {limit}")]
    TooLarge {
        /// What is counted.
        what: &'static str,
        /// The count.
        found: usize,
        /// The limit.
        limit: usize,
    },
}

/// A program the checker accepted. Only this type reaches the interpreter.
#[derive(Clone, Debug)]
pub struct Verified {
    program: Program,
    page_fault: usize,
    reclaim_frame: usize,
}

impl Verified {
    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }
    /// Index of the PageFault event.
    pub fn page_fault(&self) -> usize {
        self.page_fault
    }
    /// Index of the ReclaimFrame event.
    pub fn reclaim_frame(&self) -> usize {
        self.reclaim_frame
    }
}

/// Checks `program`; see the module documentation for what is checked.
pub fn verify(program: Program) -> Result<Verified, VerifyError> {
    let p = &program;
    for (what, found, limit) in [
        ("commands", p.code.len(), MAX_COMMANDS),
        ("events", p.events.len(), MAX_EVENTS),
        ("operands", p.operands.len(), MAX_OPERANDS),
    ] {
        if found > limit {
            return Err(VerifyError::TooLarge { what, found, limit });
        }
    }
    if p.operands.first() != Some(&Operand::None) {
        return Err(VerifyError::NoneEntry);
    }
    check_events(p)?;
    let page_fault = p
        .event(PAGE_FAULT)
        .ok_or(VerifyError::MissingEvent(PAGE_FAULT))?;
    let reclaim_frame = p
        .event(RECLAIM_FRAME)
        .ok_or(VerifyError::MissingEvent(RECLAIM_FRAME))?;
    for index in 0..p.code.len() {
        check_command(p, index)?;
    }
    for e in 0..p.events.len() {
        check_flow(p, e)?;
    }
    check_recursion(p)?;
    Ok(Verified {
        program,
        page_fault,
        reclaim_frame,
    })
}

fn site(p: &Program, index: usize) -> Site {
    Site {
        index,
        line: p.line_of(index),
    }
}

fn check_events(p: &Program) -> Result<(), VerifyError> {
    let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(p.events.len());
    for (i, e) in p.events.iter().enumerate() {
        if p.events[..i].iter().any(|o| o.name == e.name) {
            return Err(VerifyError::DuplicateEvent(e.name.clone()));
        }
        let (s, end) = (e.start as usize, e.start as usize + e.len as usize);
        if e.len == 0 || end > p.code.len() || ranges.iter().any(|&(a, b)| s < b && a < end) {
            return Err(VerifyError::EventRange {
                event: e.name.clone(),
                start: e.start,
                len: e.len,
            });
        }
        ranges.push((s, end));
    }
    Ok(())
}

fn expected_counts(forms: &[&[Arg]]) -> String {
    let counts: Vec<String> = forms.iter().map(|f| f.len().to_string()).collect();
    counts.join(" or ")
}

fn check_command(p: &Program, index: usize) -> Result<(), VerifyError> {
    let at = site(p, index);
    let cmd = p.code[index];
    let op = Opcode::from_code(cmd.code()).ok_or(VerifyError::UnknownOpcode {
        at,
        code: cmd.code(),
    })?;
    let raw = cmd.operands();
    let count = raw.iter().take_while(|&&o| o != 0).count();
    let forms = op.forms();
    let form = forms.iter().find(|f| f.len() == count);
    let form = match form {
        Some(f) if raw[count..].iter().all(|&o| o == 0) => *f,
        _ => {
            return Err(VerifyError::OperandCount {
                at,
                op: op.name(),
                expected: expected_counts(forms),
                found: raw.iter().filter(|&&o| o != 0).count(),
            })
        }
    };
    let mut kinds = [Operand::None; 3];
    for (i, (arg, &ix)) in form.iter().zip(&raw).enumerate() {
        let operand = *p
            .operands
            .get(ix as usize)
            .ok_or(VerifyError::OperandOutOfRange {
                at,
                position: i + 1,
                operand: ix,
                len: p.operands.len(),
            })?;
        if !operand.is(arg.class) {
            return Err(VerifyError::OperandType {
                at,
                op: op.name(),
                position: i + 1,
                expected: arg.class.name(),
                found: operand.kind(),
            });
        }
        if arg.write && !operand.writable() {
            return Err(VerifyError::ReadOnly {
                at,
                op: op.name(),
                position: i + 1,
                found: operand.kind(),
            });
        }
        kinds[i] = operand;
    }
    if matches!(op, Opcode::Set | Opcode::Comp) {
        let page = kinds[0].is(Class::Page);
        if kinds[1].is(Class::Page) != page {
            return Err(VerifyError::OperandType {
                at,
                op: op.name(),
                position: 2,
                expected: if page { "page" } else { "integer" },
                found: kinds[1].kind(),
            });
        }
        if op == Opcode::Comp
            && page
            && !matches!(kinds[2], Operand::Op(Operator::Rel(Rel::Eq | Rel::Ne)))
        {
            return Err(VerifyError::OperandType {
                at,
                op: op.name(),
                position: 3,
                expected: "`eq` or `ne` (pages are not ordered)",
                found: "an ordering relation",
            });
        }
    }
    Ok(())
}

fn check_flow(p: &Program, e: usize) -> Result<(), VerifyError> {
    let ev = &p.events[e];
    let (start, len) = (ev.start as usize, ev.len);
    let mut seen = vec![false; len as usize];
    let mut work = vec![0u16];
    while let Some(rel) = work.pop() {
        if std::mem::replace(&mut seen[rel as usize], true) {
            continue;
        }
        let index = start + rel as usize;
        let cmd = p.code[index];
        let op = Opcode::from_code(cmd.code()).unwrap_or(Opcode::Return);
        let raw = cmd.operands();
        let operand = |i: usize| p.operands.get(raw[i] as usize).copied();
        let mut falls = !op.ends_flow();
        match op {
            Opcode::Jump => {
                if let Some(Operand::Label(target)) = operand(0) {
                    if target >= len {
                        return Err(VerifyError::JumpOutsideEvent {
                            at: site(p, index),
                            target,
                            event: ev.name.clone(),
                            len,
                        });
                    }
                    work.push(target);
                }
                falls = raw[1] != 0;
            }
            Opcode::Activate => {
                if let Some(Operand::Event(target)) = operand(0) {
                    if target as usize >= p.events.len() {
                        return Err(VerifyError::UndefinedEvent {
                            at: site(p, index),
                            event: target,
                        });
                    }
                }
            }
            _ => {}
        }
        if falls {
            if rel + 1 >= len {
                return Err(VerifyError::MissingReturn {
                    at: site(p, index),
                    event: ev.name.clone(),
                });
            }
            work.push(rel + 1);
        }
    }
    Ok(())
}

/// Events each event activates, with the site of the (first) activation.
fn calls(p: &Program, e: usize) -> Vec<(usize, usize)> {
    let ev = &p.events[e];
    let range = ev.start as usize..ev.start as usize + ev.len as usize;
    range
        .filter_map(|i| {
            let c = p.code[i];
            if c.code() != Opcode::Activate.code() {
                return None;
            }
            match p.operands.get(c.operands()[0] as usize) {
                Some(Operand::Event(t)) => Some((*t as usize, i)),
                _ => None,
            }
        })
        .collect()
}

fn check_recursion(p: &Program) -> Result<(), VerifyError> {
    // 0 unvisited, 1 on the current path, 2 done.
    let mut state = vec![0u8; p.events.len()];
    fn visit(p: &Program, e: usize, state: &mut [u8]) -> Result<(), VerifyError> {
        state[e] = 1;
        for (t, i) in calls(p, e) {
            match state[t] {
                1 => {
                    return Err(VerifyError::RecursiveActivate {
                        at: site(p, i),
                        event: p.events[t].name.clone(),
                    })
                }
                0 => visit(p, t, state)?,
                _ => {}
            }
        }
        state[e] = 2;
        Ok(())
    }
    for e in 0..p.events.len() {
        if state[e] == 0 {
            visit(p, e, &mut state)?;
        }
    }
    Ok(())
}
