//! A policy program: operand array, event table, command stream, and its
//! binary container.
//!
//! Container (little endian): magic `HPEC`, version `u16`, flags `u16` (bit 0:
//! a source-line table follows the commands), `u16` operand count and the
//! operands (a tag byte and its payload), `u8` event count and the events
//! (name, start, length), `u32` command count and the command words, the
//! optional line table (`u32` per command), and a `u16` count of operand
//! names followed by the names (debug information for the disassembler).
//! Every count is checked against the bytes that remain before anything is
//! allocated, and the whole file is bounded by [`MAX_FILE_BYTES`].

use thiserror::Error;

use super::command::Command;
use super::operand::{ArithOp, Operand, Operator, Rel, SysVar};

/// File magic of compiled programs.
pub const MAGIC: &[u8; 4] = b"HPEC";
/// Container version written and accepted.
pub const VERSION: u16 = 1;
/// Largest compiled program file accepted.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Most commands a program may hold (the verifier's size limit).
pub const MAX_COMMANDS: usize = 4096;
/// Most events a program may define.
pub const MAX_EVENTS: usize = 64;
/// The event run to obtain a frame for a faulting page.
pub const PAGE_FAULT: &str = "PageFault";
/// The event run when the frame manager takes a frame back.
pub const RECLAIM_FRAME: &str = "ReclaimFrame";

/// An event: a named, contiguous range of the command stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventDef {
    /// Event name (`PageFault`, `ReclaimFrame`, or the program's own).
    pub name: String,
    /// Index of its first command.
    pub start: u16,
    /// Number of commands.
    pub len: u16,
}

/// A policy program as loaded, before verification.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Program {
    /// The operand array; entry 0 must be [`Operand::None`].
    pub operands: Vec<Operand>,
    /// The event table.
    pub events: Vec<EventDef>,
    /// The command stream.
    pub code: Vec<Command>,
    /// Source line of each command, when compiled from source (else empty).
    pub lines: Vec<u32>,
    /// Names of operands, for the disassembler (empty, or one per operand).
    pub names: Vec<String>,
}

impl Program {
    /// The source line of command `index`, if known.
    pub fn line_of(&self, index: usize) -> Option<u32> {
        self.lines.get(index).copied()
    }

    /// Index of the event called `name`.
    pub fn event(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e.name == name)
    }

    /// Whether `bytes` start with the compiled-program magic.
    pub fn is_compiled(bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }

    /// Encodes the program in the container format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let with_lines = !self.lines.is_empty() && self.lines.len() == self.code.len();
        out.extend_from_slice(&u16::from(with_lines).to_le_bytes());
        out.extend_from_slice(&(self.operands.len() as u16).to_le_bytes());
        for op in &self.operands {
            encode_operand(*op, &mut out);
        }
        out.push(self.events.len() as u8);
        for e in &self.events {
            push_name(&e.name, &mut out);
            out.extend_from_slice(&e.start.to_le_bytes());
            out.extend_from_slice(&e.len.to_le_bytes());
        }
        out.extend_from_slice(&(self.code.len() as u32).to_le_bytes());
        for c in &self.code {
            out.extend_from_slice(&c.0.to_le_bytes());
        }
        if with_lines {
            for l in &self.lines {
                out.extend_from_slice(&l.to_le_bytes());
            }
        }
        let names = if self.names.len() == self.operands.len() {
            &self.names[..]
        } else {
            &[]
        };
        out.extend_from_slice(&(names.len() as u16).to_le_bytes());
        for n in names {
            push_name(n, &mut out);
        }
        out
    }

    /// Decodes a container. Only the format is checked here; what the
    /// commands mean is the verifier's job.
    pub fn from_bytes(bytes: &[u8]) -> Result<Program, FormatError> {
        if bytes.len() > MAX_FILE_BYTES {
            return Err(FormatError::TooLarge {
                bytes: bytes.len(),
                limit: MAX_FILE_BYTES,
            });
        }
        let mut r = Reader { bytes, at: 0 };
        if r.take(4)? != MAGIC {
            return Err(FormatError::BadMagic);
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(FormatError::Version { found: version });
        }
        let with_lines = r.u16()? & 1 != 0;
        let n_ops = r.u16()? as usize;
        r.need(n_ops)?;
        let mut operands = Vec::with_capacity(n_ops);
        for _ in 0..n_ops {
            operands.push(decode_operand(&mut r)?);
        }
        let n_events = r.u8()? as usize;
        let mut events = Vec::with_capacity(n_events);
        for _ in 0..n_events {
            let name = r.name()?;
            let start = r.u16()?;
            let len = r.u16()?;
            events.push(EventDef { name, start, len });
        }
        let n_code = r.u32()? as usize;
        r.need(n_code.saturating_mul(4))?;
        let code = (0..n_code)
            .map(|_| r.u32().map(Command))
            .collect::<Result<Vec<_>, _>>()?;
        let lines = if with_lines {
            r.need(n_code.saturating_mul(4))?;
            (0..n_code)
                .map(|_| r.u32())
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        let n_names = r.u16()? as usize;
        r.need(n_names)?;
        let names = (0..n_names)
            .map(|_| r.name())
            .collect::<Result<Vec<_>, _>>()?;
        if r.at != bytes.len() {
            return Err(FormatError::Trailing { at: r.at });
        }
        Ok(Program {
            operands,
            events,
            code,
            lines,
            names,
        })
    }
}

/// Why a compiled program could not be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The file does not start with `HPEC`.
    #[error("not a compiled policy program (no HPEC magic)")]
    BadMagic,
    /// Another container version.
    #[error("container version {found} is not supported (expected {VERSION})")]
    Version {
        /// The version found.
        found: u16,
    },
    /// The file ends inside a field.
    #[error("truncated at byte {at}")]
    Truncated {
        /// Offset of the missing field.
        at: usize,
    },
    /// An operand tag or operator code that does not exist.
    #[error("unknown operand tag {tag:#04x} at byte {at}")]
    BadOperand {
        /// Offset of the operand.
        at: usize,
        /// The tag or code.
        tag: u8,
    },
    /// A name that is not UTF-8.
    #[error("name at byte {at} is not UTF-8")]
    BadName {
        /// Offset of the name.
        at: usize,
    },
    /// Bytes after the last field.
    #[error("trailing bytes after offset {at}")]
    Trailing {
        /// Offset of the first extra byte.
        at: usize,
    },
    /// The file is over the size limit.
    #[error("file of {bytes} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// File size.
        bytes: usize,
        /// Limit.
        limit: usize,
    },
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn need(&self, n: usize) -> Result<(), FormatError> {
        if self.bytes.len().saturating_sub(self.at) < n {
            Err(FormatError::Truncated { at: self.at })
        } else {
            Ok(())
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        self.need(n)?;
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, FormatError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, FormatError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_le_bytes(a))
    }
    fn name(&mut self) -> Result<String, FormatError> {
        let at = self.at;
        let n = self.u8()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| FormatError::BadName { at })
    }
}

fn push_name(name: &str, out: &mut Vec<u8>) {
    let mut end = name.len().min(255);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    out.push(end as u8);
    out.extend_from_slice(&name.as_bytes()[..end]);
}

fn operator_code(op: Operator) -> u8 {
    match op {
        Operator::Arith(a) => ArithOp::ALL.iter().position(|x| *x == a).unwrap_or(0) as u8,
        Operator::Rel(r) => 16 + Rel::ALL.iter().position(|x| *x == r).unwrap_or(0) as u8,
        Operator::End(back) => 32 + u8::from(back),
    }
}

fn operator_of(code: u8) -> Option<Operator> {
    match code {
        0..=15 => ArithOp::ALL
            .get(code as usize)
            .copied()
            .map(Operator::Arith),
        16..=31 => Rel::ALL.get(code as usize - 16).copied().map(Operator::Rel),
        32 => Some(Operator::End(false)),
        33 => Some(Operator::End(true)),
        _ => None,
    }
}

fn encode_operand(op: Operand, out: &mut Vec<u8>) {
    match op {
        Operand::None => out.push(0),
        Operand::Int(v) => {
            out.push(1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Operand::Const(v) => {
            out.push(2);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Operand::Page => out.push(3),
        Operand::Nil => out.push(4),
        Operand::Queue => out.push(5),
        Operand::Label(l) => {
            out.push(6);
            out.extend_from_slice(&l.to_le_bytes());
        }
        Operand::Event(e) => out.extend_from_slice(&[7, e]),
        Operand::Op(o) => out.extend_from_slice(&[8, operator_code(o)]),
        Operand::Sys(s) => {
            let i = SysVar::ALL.iter().position(|x| *x == s).unwrap_or(0);
            out.extend_from_slice(&[9, i as u8]);
        }
    }
}

fn decode_operand(r: &mut Reader) -> Result<Operand, FormatError> {
    let at = r.at;
    let tag = r.u8()?;
    Ok(match tag {
        0 => Operand::None,
        1 => Operand::Int(r.i64()?),
        2 => Operand::Const(r.i64()?),
        3 => Operand::Page,
        4 => Operand::Nil,
        5 => Operand::Queue,
        6 => Operand::Label(r.u16()?),
        7 => Operand::Event(r.u8()?),
        8 => {
            let code = r.u8()?;
            Operand::Op(operator_of(code).ok_or(FormatError::BadOperand { at, tag: code })?)
        }
        9 => {
            let code = r.u8()?;
            Operand::Sys(
                SysVar::ALL
                    .get(code as usize)
                    .copied()
                    .ok_or(FormatError::BadOperand { at, tag: code })?,
            )
        }
        _ => return Err(FormatError::BadOperand { at, tag }),
    })
}
