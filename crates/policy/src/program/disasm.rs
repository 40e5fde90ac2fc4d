//! The disassembler: a program back to the textual command form that
//! [`super::asm::assemble`] accepts.

use std::collections::HashSet;
use std::fmt::Write;

use super::opcode::Opcode;
use super::operand::{Operand, Operator, SysVar};
use super::program::Program;

fn reserved(name: &str) -> bool {
    SysVar::by_name(name).is_some()
        || Operator::by_name(name).is_some()
        || Opcode::by_name(name).is_some()
        || matches!(name, "nil" | "event" | "int" | "const" | "page" | "queue")
}

/// Unique, assemblable names for declared operands.
fn names(p: &Program) -> Vec<String> {
    let mut used: HashSet<String> = p.events.iter().map(|e| e.name.clone()).collect();
    p.operands
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let given = p.names.get(i).cloned().unwrap_or_default();
            let ok = !given.is_empty()
                && given.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && given.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && !reserved(&given);
            let base = if ok {
                given
            } else {
                match op {
                    Operand::Int(_) => format!("i{i}"),
                    Operand::Page => format!("p{i}"),
                    Operand::Queue => format!("q{i}"),
                    _ => format!("c{i}"),
                }
            };
            let mut name = base.clone();
            let mut n = 1;
            while used.contains(&name) || name.starts_with('L') && name[1..].parse::<u32>().is_ok()
            {
                name = format!("{base}_{n}");
                n += 1;
            }
            used.insert(name.clone());
            name
        })
        .collect()
}

/// Renders a program as assembler text.
pub fn disassemble(p: &Program) -> String {
    let names = names(p);
    let mut out = String::new();
    for (i, op) in p.operands.iter().enumerate() {
        let n = &names[i];
        let _ = match op {
            Operand::Int(v) => writeln!(out, "int {n} = {v}"),
            Operand::Const(v)
                if p.names
                    .get(i)
                    .is_some_and(|g| g.parse::<i64>().is_err() && !g.is_empty()) =>
            {
                writeln!(out, "const {n} = {v}")
            }
            Operand::Page => writeln!(out, "page {n}"),
            Operand::Queue => writeln!(out, "queue {n}"),
            _ => Ok(()),
        };
    }
    for e in &p.events {
        let _ = writeln!(out, "\nevent {}", e.name);
        let start = e.start as usize;
        let end = (start + e.len as usize).min(p.code.len());
        let targets: HashSet<u16> = p.code[start..end]
            .iter()
            .filter(|c| c.code() == Opcode::Jump.code())
            .filter_map(|c| match p.operands.get(c.operands()[0] as usize) {
                Some(Operand::Label(t)) => Some(*t),
                _ => None,
            })
            .collect();
        for i in start..end {
            let rel = (i - start) as u16;
            if targets.contains(&rel) {
                let _ = writeln!(out, "L{rel}:");
            }
            let _ = writeln!(out, "    {}", command_text(p, &names, i));
        }
    }
    out
}

fn command_text(p: &Program, names: &[String], i: usize) -> String {
    let c = p.code[i];
    let Some(op) = Opcode::from_code(c.code()) else {
        return format!(".word {:#010x}", c.0);
    };
    let raw = c.operands();
    let count = raw.iter().take_while(|&&o| o != 0).count();
    if raw[count..].iter().any(|&o| o != 0) {
        return format!(".word {:#010x}", c.0);
    }
    let shown: Vec<String> = raw[..count]
        .iter()
        .map(|&ix| match p.operands.get(ix as usize) {
            None | Some(Operand::None) => format!("@{ix}"),
            Some(Operand::Int(_) | Operand::Page | Operand::Queue) => names[ix as usize].clone(),
            Some(Operand::Const(v)) => {
                if p.names
                    .get(ix as usize)
                    .is_some_and(|g| g.parse::<i64>().is_err() && !g.is_empty())
                {
                    names[ix as usize].clone()
                } else {
                    format!("#{v}")
                }
            }
            Some(Operand::Nil) => "nil".into(),
            Some(Operand::Label(t)) => format!("L{t}"),
            Some(Operand::Event(e)) => p
                .events
                .get(*e as usize)
                .map_or_else(|| format!("@{ix}"), |ev| ev.name.clone()),
            Some(Operand::Op(o)) => o.name().into(),
            Some(Operand::Sys(s)) => s.name().into(),
        })
        .collect();
    if shown.is_empty() {
        op.name().to_string()
    } else {
        format!("{:<8} {}", op.name(), shown.join(", "))
    }
}
