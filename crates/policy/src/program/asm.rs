//! The assembler: the textual command form to a program.
//!
//! ```text
//! ; FIFO: a comment runs from `;` to the end of the line
//! queue active          ; declarations: int NAME [= V], const NAME = V, page NAME, queue NAME
//! page  p
//! event PageFault       ; an event's commands follow, up to the next `event`
//!     comp    free, #0, gt
//!     jump    full, #0  ; jump to label `full` when the flag is false
//!     enqueue active, fault
//!     return
//! full:
//!     fifo    active, victim
//!     enqueue active, fault
//!     return
//! event ReclaimFrame
//!     fifo    active, victim
//!     return
//! ```
//!
//! Operands are declared names, `#N` integer constants, the system values
//! (`fault`, `victim`, `free`, ...), `nil`, operator names (`add`, `lt`,
//! `front`, ...), event names and the event's labels. For testing the checker,
//! `@N` names operand-array entry N as is, and `.word 0xWWWWWWWW` emits a raw
//! command word.

use std::collections::HashMap;

use thiserror::Error;

use super::command::Command;
use super::opcode::Opcode;
use super::operand::{Operand, Operator, SysVar, MAX_OPERANDS};
use super::program::{EventDef, Program};

/// An assembler error at a line and column.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{line}:{col}: {message}")]
pub struct AsmError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
    /// What was wrong and what was expected.
    pub message: String,
}

struct Line<'a> {
    no: u32,
    text: &'a str,
}

fn error<T>(line: u32, text: &str, at: &str, message: String) -> Result<T, AsmError> {
    let col = (at.as_ptr() as usize).saturating_sub(text.as_ptr() as usize) as u32 + 1;
    Err(AsmError { line, col, message })
}

fn strip(text: &str) -> &str {
    text.split(';').next().unwrap_or("").trim_end()
}

/// Assembles program text.
pub fn assemble(source: &str) -> Result<Program, AsmError> {
    let lines: Vec<Line> = source
        .lines()
        .enumerate()
        .map(|(i, t)| Line {
            no: i as u32 + 1,
            text: t,
        })
        .collect();
    let mut ops = vec![Operand::None];
    let mut names = vec![String::new()];
    let mut symbols: HashMap<String, u8> = HashMap::new();
    let mut dedup: HashMap<Operand, u8> = HashMap::new();
    let mut events: Vec<String> = Vec::new();
    // Pass 1: declarations and event names.
    for l in &lines {
        let body = strip(l.text);
        let mut words = body.split_whitespace();
        let Some(first) = words.next() else { continue };
        match first {
            "event" => {
                let Some(name) = words.next() else {
                    return error(
                        l.no,
                        l.text,
                        body,
                        "expected an event name after `event`".into(),
                    );
                };
                if events.iter().any(|e| e == name) {
                    return error(l.no, l.text, name, format!("event `{name}` defined twice"));
                }
                events.push(name.into());
            }
            "int" | "const" | "page" | "queue" => {
                let rest = body[first.len()..].trim();
                let (name, init) = match rest.split_once('=') {
                    Some((n, v)) => (n.trim(), Some(v.trim())),
                    None => (rest, None),
                };
                if name.is_empty() || name.contains(char::is_whitespace) {
                    return error(
                        l.no,
                        l.text,
                        rest,
                        format!("expected one name after `{first}`"),
                    );
                }
                let value = match init {
                    Some(v) => match v.parse::<i64>() {
                        Ok(v) => v,
                        Err(_) => return error(l.no, l.text, v, "expected an integer".into()),
                    },
                    None if first == "const" => {
                        return error(
                            l.no,
                            l.text,
                            rest,
                            "expected `= VALUE` after the constant's name".into(),
                        )
                    }
                    None => 0,
                };
                if init.is_some() && matches!(first, "page" | "queue") {
                    return error(
                        l.no,
                        l.text,
                        rest,
                        format!("a {first} takes no initial value"),
                    );
                }
                if symbols.contains_key(name) {
                    return error(l.no, l.text, name, format!("`{name}` declared twice"));
                }
                let op = match first {
                    "int" => Operand::Int(value),
                    "const" => Operand::Const(value),
                    "page" => Operand::Page,
                    _ => Operand::Queue,
                };
                if ops.len() >= MAX_OPERANDS {
                    return error(l.no, l.text, name, "more than 256 operands".into());
                }
                symbols.insert(name.into(), ops.len() as u8);
                ops.push(op);
                names.push(name.into());
            }
            _ => {}
        }
    }
    // Pass 2: commands.
    let mut program = Program::default();
    let mut current: Option<(String, usize)> = None;
    let mut event_lines: Vec<&Line> = Vec::new();
    let flush = |current: &mut Option<(String, usize)>,
                 event_lines: &mut Vec<&Line>,
                 program: &mut Program,
                 ops: &mut Vec<Operand>,
                 names: &mut Vec<String>,
                 dedup: &mut HashMap<Operand, u8>|
     -> Result<(), AsmError> {
        if let Some((name, _)) = current.take() {
            let start = program.code.len();
            let mut ctx = Ctx {
                ops,
                names,
                dedup,
                symbols: &symbols,
                events: &events,
                labels: HashMap::new(),
            };
            // Labels first, so forward jumps resolve.
            let mut n = 0u16;
            for l in event_lines.iter() {
                let body = strip(l.text).trim();
                if let Some(label) = body.strip_suffix(':') {
                    ctx.labels.insert(label.trim().to_string(), n);
                } else if !body.is_empty() {
                    n += 1;
                }
            }
            for l in event_lines.drain(..) {
                let body = strip(l.text).trim();
                if body.is_empty() || body.ends_with(':') {
                    continue;
                }
                let cmd = ctx.command(l, body)?;
                program.code.push(cmd);
                program.lines.push(l.no);
            }
            let len = program.code.len() - start;
            program.events.push(EventDef {
                name,
                start: start.min(u16::MAX as usize) as u16,
                len: len.min(u16::MAX as usize) as u16,
            });
        }
        Ok(())
    };
    for l in &lines {
        let body = strip(l.text).trim();
        let first = body.split_whitespace().next().unwrap_or("");
        match first {
            "" | "int" | "const" | "page" | "queue" => {}
            "event" => {
                flush(
                    &mut current,
                    &mut event_lines,
                    &mut program,
                    &mut ops,
                    &mut names,
                    &mut dedup,
                )?;
                let name = body.split_whitespace().nth(1).unwrap_or("").to_string();
                current = Some((name, l.no as usize));
            }
            _ if current.is_none() => {
                return error(
                    l.no,
                    l.text,
                    body,
                    "expected a declaration or `event NAME` before commands".into(),
                )
            }
            _ => event_lines.push(l),
        }
    }
    flush(
        &mut current,
        &mut event_lines,
        &mut program,
        &mut ops,
        &mut names,
        &mut dedup,
    )?;
    program.operands = ops;
    program.names = names;
    Ok(program)
}

struct Ctx<'a> {
    ops: &'a mut Vec<Operand>,
    names: &'a mut Vec<String>,
    dedup: &'a mut HashMap<Operand, u8>,
    symbols: &'a HashMap<String, u8>,
    events: &'a [String],
    labels: HashMap<String, u16>,
}

impl Ctx<'_> {
    fn shared(&mut self, op: Operand, name: String, l: &Line, at: &str) -> Result<u8, AsmError> {
        if let Some(&i) = self.dedup.get(&op) {
            return Ok(i);
        }
        if self.ops.len() >= MAX_OPERANDS {
            return error(l.no, l.text, at, "more than 256 operands".into());
        }
        let i = self.ops.len() as u8;
        self.ops.push(op);
        self.names.push(name);
        self.dedup.insert(op, i);
        Ok(i)
    }

    fn operand(&mut self, l: &Line, word: &str) -> Result<u8, AsmError> {
        if let Some(raw) = word.strip_prefix('@') {
            return match raw.parse::<u8>() {
                Ok(i) => Ok(i),
                Err(_) => error(
                    l.no,
                    l.text,
                    word,
                    "expected an operand index 0..=255 after `@`".into(),
                ),
            };
        }
        if let Some(v) = word.strip_prefix('#') {
            return match v.parse::<i64>() {
                Ok(v) => self.shared(Operand::Const(v), v.to_string(), l, word),
                Err(_) => error(l.no, l.text, word, "expected an integer after `#`".into()),
            };
        }
        if let Some(&at) = self.labels.get(word) {
            return self.shared(Operand::Label(at), format!("L{at}"), l, word);
        }
        if let Some(&i) = self.symbols.get(word) {
            return Ok(i);
        }
        if let Some(e) = self.events.iter().position(|e| e == word) {
            return self.shared(Operand::Event(e as u8), word.into(), l, word);
        }
        if let Some(s) = SysVar::by_name(word) {
            return self.shared(Operand::Sys(s), word.into(), l, word);
        }
        if word == "nil" {
            return self.shared(Operand::Nil, word.into(), l, word);
        }
        if let Some(o) = Operator::by_name(word) {
            return self.shared(Operand::Op(o), word.into(), l, word);
        }
        error(
            l.no,
            l.text,
            word,
            format!("`{word}` is not a declared name, label, event, system value, operator, `#N` or `@N`"),
        )
    }

    fn command(&mut self, l: &Line, body: &str) -> Result<Command, AsmError> {
        let (mnemonic, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        if mnemonic == ".word" {
            let w = rest.trim();
            let v = w
                .strip_prefix("0x")
                .map_or_else(|| w.parse::<u32>(), |h| u32::from_str_radix(h, 16));
            return match v {
                Ok(v) => Ok(Command(v)),
                Err(_) => error(l.no, l.text, rest, "expected a 32-bit word".into()),
            };
        }
        let Some(op) = Opcode::by_name(mnemonic) else {
            return error(
                l.no,
                l.text,
                mnemonic,
                format!("unknown command `{mnemonic}`"),
            );
        };
        let mut operands = Vec::new();
        for word in rest.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if operands.len() == 3 {
                return error(l.no, l.text, word, "expected at most three operands".into());
            }
            operands.push(self.operand(l, word)?);
        }
        Ok(Command::new(op.code(), &operands))
    }
}
