//! Code generation: declarations become operand-array entries, statements
//! become commands. Conditions compile to Comp/flag-setting commands and
//! conditional jumps with short-circuit `&&`/`||`; integer expressions use
//! temporaries, reused from one statement to the next.

use std::collections::HashMap;

use super::parser::{Expr, Item, Pos, Stmt};
use super::{ErrorKind, TranslateError};
use crate::program::command::Command;
use crate::program::opcode::Opcode;
use crate::program::operand::{ArithOp, Operand, Operator, Rel, SysVar, MAX_OPERANDS};
use crate::program::program::{EventDef, Program, MAX_COMMANDS, MAX_EVENTS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    Page,
    Bool,
    Queue,
    Void,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Int => "an integer",
            Ty::Page => "a page",
            Ty::Bool => "a condition",
            Ty::Queue => "a queue",
            Ty::Void => "an event call (no value)",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Sym {
    Int(u8),
    Const(u8),
    Page(u8),
    Queue(u8),
    Event(u8),
}

#[derive(Clone, Copy, Debug)]
enum Arg {
    Op(u8),
    Label(usize),
}

struct Cmd {
    code: Opcode,
    args: Vec<Arg>,
    line: u32,
}

type R<T> = Result<T, TranslateError>;

fn err<T>(pos: Pos, kind: ErrorKind) -> R<T> {
    Err(TranslateError {
        line: pos.line,
        col: pos.col,
        kind,
    })
}

fn type_err<T>(pos: Pos, expected: &'static str, found: Ty) -> R<T> {
    err(
        pos,
        ErrorKind::Type {
            expected,
            found: found.name(),
        },
    )
}

#[derive(Default)]
struct Gen {
    ops: Vec<Operand>,
    names: Vec<String>,
    dedup: HashMap<Operand, u8>,
    syms: HashMap<String, Sym>,
    cmds: Vec<Cmd>,
    labels: Vec<Option<usize>>,
    loops: Vec<(usize, usize)>,
    int_temps: Vec<u8>,
    int_used: usize,
    page_temps: Vec<u8>,
    page_used: usize,
    line: u32,
    pos: Pos,
}

/// Builds the program from parsed items.
pub fn generate(items: &[Item]) -> R<Program> {
    let mut g = Gen {
        ops: vec![Operand::None],
        names: vec![String::new()],
        pos: Pos { line: 1, col: 1 },
        ..Gen::default()
    };
    let mut events = Vec::new();
    for item in items {
        match item {
            Item::Int(n, v, p) => g.declare(n, Operand::Int(*v), *p)?,
            Item::Const(n, v, p) => g.declare(n, Operand::Const(*v), *p)?,
            Item::Page(n, p) => g.declare(n, Operand::Page, *p)?,
            Item::Queue(n, p) => g.declare(n, Operand::Queue, *p)?,
            Item::Event(n, body, p) => {
                if g.syms.contains_key(n) || SysVar::by_name(n).is_some() {
                    return err(*p, ErrorKind::Duplicate(n.clone()));
                }
                if events.len() >= MAX_EVENTS {
                    return err(*p, ErrorKind::TooLarge("more than 64 events"));
                }
                g.syms.insert(n.clone(), Sym::Event(events.len() as u8));
                events.push((n.clone(), body, *p));
            }
        }
    }
    let mut program = Program::default();
    for (name, body, pos) in events {
        g.pos = pos;
        g.line = pos.line;
        g.cmds.clear();
        g.labels.clear();
        g.loops.clear();
        for s in body {
            g.stmt(s)?;
        }
        let end_label = g.labels.contains(&Some(g.cmds.len()));
        if end_label || g.cmds.last().is_none_or(|c| c.code != Opcode::Return) {
            g.emit(Opcode::Return, &[]);
        }
        let start = program.code.len();
        if start + g.cmds.len() > MAX_COMMANDS {
            return err(pos, ErrorKind::TooLarge("more than 4096 commands"));
        }
        let cmds = std::mem::take(&mut g.cmds);
        for c in &cmds {
            let mut raw = Vec::with_capacity(3);
            for a in &c.args {
                raw.push(match *a {
                    Arg::Op(o) => o,
                    Arg::Label(id) => {
                        let at = g.labels[id].unwrap_or(0) as u16;
                        g.operand(Operand::Label(at), format!("L{at}"))?
                    }
                });
            }
            program.code.push(Command::new(c.code.code(), &raw));
            program.lines.push(c.line);
        }
        program.events.push(EventDef {
            name,
            start: start as u16,
            len: cmds.len() as u16,
        });
    }
    program.operands = g.ops;
    program.names = g.names;
    Ok(program)
}

fn arith_op(op: &str) -> Option<ArithOp> {
    Some(match op {
        "+" => ArithOp::Add,
        "-" => ArithOp::Sub,
        "*" => ArithOp::Mul,
        "/" => ArithOp::Div,
        "%" => ArithOp::Mod,
        "&" => ArithOp::And,
        "|" => ArithOp::Or,
        "^" => ArithOp::Xor,
        _ => return None,
    })
}

fn rel_op(op: &str) -> Option<Rel> {
    Some(match op {
        "==" => Rel::Eq,
        "!=" => Rel::Ne,
        "<" => Rel::Lt,
        "<=" => Rel::Le,
        ">" => Rel::Gt,
        ">=" => Rel::Ge,
        _ => return None,
    })
}

/// Argument types and result of a built-in function.
fn builtin(name: &str) -> Option<(Opcode, &'static [&'static [Ty]], Ty)> {
    use Ty::*;
    Some(match name {
        "dequeue" | "dequeue_back" => (Opcode::DeQueue, &[&[Queue]], Page),
        "fifo" => (Opcode::Fifo, &[&[Queue]], Page),
        "lru" => (Opcode::Lru, &[&[Queue]], Page),
        "mru" => (Opcode::Mru, &[&[Queue]], Page),
        "find" => (Opcode::Find, &[&[Int]], Page),
        "vpn" => (Opcode::Vpn, &[&[Page]], Int),
        "count" => (Opcode::Count, &[&[Queue]], Int),
        "request" => (Opcode::Request, &[&[Int]], Int),
        "release" => (Opcode::Release, &[&[Int]], Int),
        "empty" => (Opcode::EmptyQ, &[&[Queue]], Bool),
        "inq" => (Opcode::InQ, &[&[Queue, Page]], Bool),
        "ref" => (Opcode::Ref, &[&[Page], &[Page, Int]], Bool),
        "mod" => (Opcode::Mod, &[&[Page]], Bool),
        "flush" => (Opcode::Flush, &[&[Page]], Bool),
        "enqueue" | "enqueue_front" => (Opcode::EnQueue, &[&[Queue, Page]], Bool),
        _ => return None,
    })
}

fn is_condition(e: &Expr) -> bool {
    match e {
        Expr::Unary("!", _, _) => true,
        Expr::Binary(op, _, _, _) => matches!(*op, "&&" | "||") || rel_op(op).is_some(),
        Expr::Name(n, _) => n == "true" || n == "false",
        Expr::Call(n, _, _) => builtin(n).is_some_and(|b| b.2 == Ty::Bool),
        _ => false,
    }
}

impl Gen {
    fn operand(&mut self, op: Operand, name: String) -> R<u8> {
        let shared = !matches!(op, Operand::Int(_) | Operand::Page | Operand::Queue);
        if shared {
            if let Some(&i) = self.dedup.get(&op) {
                return Ok(i);
            }
        }
        if self.ops.len() >= MAX_OPERANDS {
            return err(self.pos, ErrorKind::TooLarge("more than 256 operands"));
        }
        let i = self.ops.len() as u8;
        self.ops.push(op);
        self.names.push(name);
        if shared {
            self.dedup.insert(op, i);
        }
        Ok(i)
    }

    fn declare(&mut self, name: &str, op: Operand, pos: Pos) -> R<()> {
        let reserved = ["nil", "true", "false", "if", "else", "while", "event"];
        if self.syms.contains_key(name)
            || SysVar::by_name(name).is_some()
            || builtin(name).is_some()
            || reserved.contains(&name)
        {
            return err(pos, ErrorKind::Duplicate(name.into()));
        }
        self.pos = pos;
        let i = self.operand(op, name.into())?;
        let sym = match op {
            Operand::Int(_) => Sym::Int(i),
            Operand::Const(_) => Sym::Const(i),
            Operand::Page => Sym::Page(i),
            _ => Sym::Queue(i),
        };
        self.syms.insert(name.into(), sym);
        Ok(())
    }

    fn konst(&mut self, v: i64) -> R<u8> {
        self.operand(Operand::Const(v), v.to_string())
    }

    fn sys(&mut self, s: SysVar) -> R<u8> {
        self.operand(Operand::Sys(s), s.name().into())
    }

    fn oper(&mut self, o: Operator) -> R<u8> {
        self.operand(Operand::Op(o), o.name().into())
    }

    fn nil(&mut self) -> R<u8> {
        self.operand(Operand::Nil, "nil".into())
    }

    fn emit(&mut self, code: Opcode, args: &[Arg]) {
        self.cmds.push(Cmd {
            code,
            args: args.to_vec(),
            line: self.line,
        });
    }

    fn new_label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn place(&mut self, l: usize) {
        self.labels[l] = Some(self.cmds.len());
    }

    fn jump(&mut self, l: usize) {
        self.emit(Opcode::Jump, &[Arg::Label(l)]);
    }

    fn jump_if(&mut self, l: usize, when: bool) -> R<()> {
        let c = self.konst(i64::from(when))?;
        self.emit(Opcode::Jump, &[Arg::Label(l), Arg::Op(c)]);
        Ok(())
    }

    fn int_temp(&mut self) -> R<u8> {
        if self.int_used == self.int_temps.len() {
            let n = self.int_temps.len();
            let t = self.operand(Operand::Int(0), format!("t{n}"))?;
            self.int_temps.push(t);
        }
        self.int_used += 1;
        Ok(self.int_temps[self.int_used - 1])
    }

    fn page_temp(&mut self) -> R<u8> {
        if self.page_used == self.page_temps.len() {
            let n = self.page_temps.len();
            let t = self.operand(Operand::Page, format!("pt{n}"))?;
            self.page_temps.push(t);
        }
        self.page_used += 1;
        Ok(self.page_temps[self.page_used - 1])
    }

    fn lookup(&mut self, name: &str, pos: Pos) -> R<(Ty, u8, bool)> {
        if let Some(s) = SysVar::by_name(name) {
            let i = self.sys(s)?;
            let ty = if s.is_page() { Ty::Page } else { Ty::Int };
            return Ok((ty, i, s.writable()));
        }
        match name {
            "nil" => return Ok((Ty::Page, self.nil()?, false)),
            "true" => return Ok((Ty::Int, self.konst(1)?, false)),
            "false" => return Ok((Ty::Int, self.konst(0)?, false)),
            _ => {}
        }
        match self.syms.get(name) {
            Some(Sym::Int(i)) => Ok((Ty::Int, *i, true)),
            Some(Sym::Const(i)) => Ok((Ty::Int, *i, false)),
            Some(Sym::Page(i)) => Ok((Ty::Page, *i, true)),
            Some(Sym::Queue(i)) => Ok((Ty::Queue, *i, false)),
            None => err(pos, ErrorKind::Unknown(name.into())),
            Some(Sym::Event(_)) => err(
                pos,
                ErrorKind::Type {
                    expected: "a value",
                    found: "an event (call it as `Name();`)",
                },
            ),
        }
    }

    /// Emits a call; a value result goes to `dst` or a temporary.
    fn call(&mut self, name: &str, args: &[Expr], pos: Pos, dst: Option<u8>) -> R<(Ty, u8)> {
        if let Some(Sym::Event(e)) = self.syms.get(name).copied() {
            if !args.is_empty() {
                return err(
                    pos,
                    ErrorKind::Arity {
                        name: name.into(),
                        expected: "0",
                        found: args.len(),
                    },
                );
            }
            let ev = self.operand(Operand::Event(e), name.into())?;
            self.emit(Opcode::Activate, &[Arg::Op(ev)]);
            return Ok((Ty::Void, 0));
        }
        let Some((code, forms, ret)) = builtin(name) else {
            return err(pos, ErrorKind::Unknown(name.into()));
        };
        let Some(form) = forms.iter().find(|f| f.len() == args.len()) else {
            let expected = if forms.len() == 2 {
                "1 or 2"
            } else if forms[0].len() == 2 {
                "2"
            } else {
                "1"
            };
            return err(
                pos,
                ErrorKind::Arity {
                    name: name.into(),
                    expected,
                    found: args.len(),
                },
            );
        };
        let mut ops = Vec::with_capacity(3);
        for (want, a) in form.iter().zip(args) {
            let (ty, i) = self.value(a)?;
            if ty != *want {
                return type_err(a.pos(), want.name(), ty);
            }
            ops.push(i);
        }
        let out = match ret {
            Ty::Int => Some(match dst {
                Some(d) => d,
                None => self.int_temp()?,
            }),
            Ty::Page => Some(match dst {
                Some(d) => d,
                None => self.page_temp()?,
            }),
            _ => None,
        };
        let args: Vec<Arg> = match code {
            Opcode::DeQueue if name == "dequeue_back" => {
                let back = self.oper(Operator::End(true))?;
                vec![Arg::Op(ops[0]), Arg::Op(out.unwrap_or(0)), Arg::Op(back)]
            }
            Opcode::EnQueue if name == "enqueue_front" => {
                let front = self.oper(Operator::End(false))?;
                vec![Arg::Op(ops[0]), Arg::Op(ops[1]), Arg::Op(front)]
            }
            Opcode::DeQueue | Opcode::Fifo | Opcode::Lru | Opcode::Mru => {
                vec![Arg::Op(ops[0]), Arg::Op(out.unwrap_or(0))]
            }
            Opcode::Find | Opcode::Vpn | Opcode::Count => {
                vec![Arg::Op(out.unwrap_or(0)), Arg::Op(ops[0])]
            }
            Opcode::Request | Opcode::Release => vec![Arg::Op(ops[0]), Arg::Op(out.unwrap_or(0))],
            _ => ops.iter().map(|&o| Arg::Op(o)).collect(),
        };
        self.emit(code, &args);
        Ok((ret, out.unwrap_or(0)))
    }

    /// Evaluates an expression to an operand holding its value.
    fn value(&mut self, e: &Expr) -> R<(Ty, u8)> {
        if is_condition(e) && !matches!(e, Expr::Name(..)) {
            let t = self.int_temp()?;
            let (zero, one) = (self.konst(0)?, self.konst(1)?);
            self.emit(Opcode::Set, &[Arg::Op(t), Arg::Op(zero)]);
            let skip = self.new_label();
            self.cond(e, false, skip)?;
            self.emit(Opcode::Set, &[Arg::Op(t), Arg::Op(one)]);
            self.place(skip);
            return Ok((Ty::Int, t));
        }
        match e {
            Expr::Int(v, _) => Ok((Ty::Int, self.konst(*v)?)),
            Expr::Name(n, p) => {
                let (ty, i, _) = self.lookup(n, *p)?;
                Ok((ty, i))
            }
            Expr::Call(n, args, p) => {
                let (ty, i) = self.call(n, args, *p, None)?;
                if ty == Ty::Void {
                    return type_err(*p, "a value", ty);
                }
                Ok((ty, i))
            }
            Expr::Unary(op, inner, p) => {
                let (ty, v) = self.value(inner)?;
                if ty != Ty::Int {
                    return type_err(inner.pos(), "an integer", ty);
                }
                let t = self.int_temp()?;
                self.pos = *p;
                if *op == "-" {
                    let zero = self.konst(0)?;
                    let sub = self.oper(Operator::Arith(ArithOp::Sub))?;
                    self.emit(Opcode::Set, &[Arg::Op(t), Arg::Op(zero)]);
                    self.emit(Opcode::Arith, &[Arg::Op(t), Arg::Op(v), Arg::Op(sub)]);
                } else {
                    let all = self.konst(-1)?;
                    let xor = self.oper(Operator::Arith(ArithOp::Xor))?;
                    self.emit(Opcode::Set, &[Arg::Op(t), Arg::Op(v)]);
                    self.emit(Opcode::Logic, &[Arg::Op(t), Arg::Op(all), Arg::Op(xor)]);
                }
                Ok((Ty::Int, t))
            }
            Expr::Binary(op, l, r, _) => {
                let Some(a) = arith_op(op) else {
                    return type_err(e.pos(), "an integer operator", Ty::Bool);
                };
                let (lt, lv) = self.value(l)?;
                if lt != Ty::Int {
                    return type_err(l.pos(), "an integer", lt);
                }
                let t = self.int_temp()?;
                self.emit(Opcode::Set, &[Arg::Op(t), Arg::Op(lv)]);
                self.apply(t, a, r)?;
                Ok((Ty::Int, t))
            }
        }
    }

    /// `dst = dst op r`.
    fn apply(&mut self, dst: u8, a: ArithOp, r: &Expr) -> R<()> {
        let (rt, rv) = self.value(r)?;
        if rt != Ty::Int {
            return type_err(r.pos(), "an integer", rt);
        }
        let code = if a.is_logic() {
            Opcode::Logic
        } else {
            Opcode::Arith
        };
        let o = self.oper(Operator::Arith(a))?;
        self.emit(code, &[Arg::Op(dst), Arg::Op(rv), Arg::Op(o)]);
        Ok(())
    }

    /// Jumps to `target` when `e`'s truth equals `when`, else falls through.
    fn cond(&mut self, e: &Expr, when: bool, target: usize) -> R<()> {
        match e {
            Expr::Name(n, _) if n == "true" || n == "false" => {
                if (n == "true") == when {
                    self.jump(target);
                }
                Ok(())
            }
            Expr::Unary("!", inner, _) => self.cond(inner, !when, target),
            Expr::Binary(op @ ("&&" | "||"), l, r, _) => {
                let and = *op == "&&";
                if and != when {
                    self.cond(l, when, target)?;
                    self.cond(r, when, target)
                } else {
                    let skip = self.new_label();
                    self.cond(l, !when, skip)?;
                    self.cond(r, when, target)?;
                    self.place(skip);
                    Ok(())
                }
            }
            Expr::Binary(op, l, r, p) if rel_op(op).is_some() => {
                let rel = rel_op(op).unwrap_or(Rel::Eq);
                let (lt, lv) = self.value(l)?;
                let (rt, rv) = self.value(r)?;
                match (lt, rt) {
                    (Ty::Int, Ty::Int) => {}
                    (Ty::Page, Ty::Page) if matches!(rel, Rel::Eq | Rel::Ne) => {}
                    (Ty::Page, Ty::Page) => {
                        return err(
                            *p,
                            ErrorKind::Type {
                                expected: "`==` or `!=` between pages",
                                found: "an ordering",
                            },
                        )
                    }
                    (Ty::Int | Ty::Page, _) => {
                        return type_err(
                            r.pos(),
                            if lt == Ty::Int {
                                "an integer"
                            } else {
                                "a page"
                            },
                            rt,
                        )
                    }
                    _ => return type_err(l.pos(), "an integer or a page", lt),
                }
                let o = self.oper(Operator::Rel(rel))?;
                self.emit(Opcode::Comp, &[Arg::Op(lv), Arg::Op(rv), Arg::Op(o)]);
                self.jump_if(target, when)
            }
            Expr::Call(n, args, p)
                if builtin(n).is_some_and(|b| matches!(b.2, Ty::Bool | Ty::Page)) =>
            {
                self.call(n, args, *p, None)?;
                self.jump_if(target, when)
            }
            other => {
                let (ty, v) = self.value(other)?;
                let (zero, rel) = match ty {
                    Ty::Int => (self.konst(0)?, Rel::Ne),
                    Ty::Page => (self.nil()?, Rel::Ne),
                    _ => return type_err(other.pos(), "a condition", ty),
                };
                let o = self.oper(Operator::Rel(rel))?;
                self.emit(Opcode::Comp, &[Arg::Op(v), Arg::Op(zero), Arg::Op(o)]);
                self.jump_if(target, when)
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) -> R<()> {
        self.int_used = 0;
        self.page_used = 0;
        match s {
            Stmt::Block(body) => {
                for s in body {
                    self.stmt(s)?;
                }
            }
            Stmt::If(c, then, None) if self.loop_exit(then).is_some() => {
                // `if (c) break;` is one conditional jump.
                self.at(c.pos());
                let target = self.loop_exit(then).unwrap_or(0);
                self.cond(c, true, target)?;
            }
            Stmt::If(c, then, els) => {
                self.at(c.pos());
                let else_l = self.new_label();
                self.cond(c, false, else_l)?;
                self.stmt(then)?;
                match els {
                    None => self.place(else_l),
                    Some(e) => {
                        let end = self.new_label();
                        self.jump(end);
                        self.place(else_l);
                        self.stmt(e)?;
                        self.place(end);
                    }
                }
            }
            Stmt::While(c, body, p) => {
                self.at(*p);
                let (top, end) = (self.new_label(), self.new_label());
                self.place(top);
                self.cond(c, false, end)?;
                self.loops.push((top, end));
                self.stmt(body)?;
                self.loops.pop();
                self.at(*p);
                self.jump(top);
                self.place(end);
            }
            Stmt::Break(p) | Stmt::Continue(p) => {
                self.at(*p);
                let brk = matches!(s, Stmt::Break(_));
                let Some(&(top, end)) = self.loops.last() else {
                    return err(
                        *p,
                        ErrorKind::OutsideLoop(if brk { "break" } else { "continue" }),
                    );
                };
                self.jump(if brk { end } else { top });
            }
            Stmt::Return(p) => {
                self.at(*p);
                self.emit(Opcode::Return, &[]);
            }
            Stmt::Assign(name, op, value, p) => {
                self.at(*p);
                self.assign(name, *op, value, *p)?;
            }
            Stmt::Expr(e) => {
                self.at(e.pos());
                match e {
                    Expr::Call(n, args, p) => {
                        self.call(n, args, *p, None)?;
                    }
                    _ => return err(e.pos(), ErrorKind::NoEffect),
                }
            }
        }
        Ok(())
    }

    /// The jump target of a `break` or `continue` that is all of `s`.
    fn loop_exit(&self, s: &Stmt) -> Option<usize> {
        let (top, end) = *self.loops.last()?;
        match s {
            Stmt::Break(_) => Some(end),
            Stmt::Continue(_) => Some(top),
            Stmt::Block(b) if b.len() == 1 => self.loop_exit(&b[0]),
            _ => None,
        }
    }

    fn at(&mut self, p: Pos) {
        self.pos = p;
        self.line = p.line;
    }

    fn assign(&mut self, name: &str, op: Option<&str>, value: &Expr, p: Pos) -> R<()> {
        let (ty, dst, writable) = self.lookup(name, p)?;
        if !writable {
            return err(p, ErrorKind::ReadOnly(name.into()));
        }
        if let Some(op) = op {
            if ty != Ty::Int {
                return type_err(p, "an integer variable", ty);
            }
            let a = arith_op(op).unwrap_or(ArithOp::Add);
            return self.apply(dst, a, value);
        }
        if let Expr::Call(n, args, cp) = value {
            if builtin(n).is_some_and(|b| b.2 == ty) {
                self.call(n, args, *cp, Some(dst))?;
                return Ok(());
            }
        }
        if let Expr::Binary(op, l, r, _) = value {
            if let (Some(a), Expr::Name(ln, _)) = (arith_op(op), l.as_ref()) {
                if ln == name && ty == Ty::Int {
                    return self.apply(dst, a, r);
                }
            }
        }
        let (vt, v) = self.value(value)?;
        if vt != ty {
            return type_err(value.pos(), ty.name(), vt);
        }
        self.emit(Opcode::Set, &[Arg::Op(dst), Arg::Op(v)]);
        Ok(())
    }
}
