//! The parser: tokens to declarations, events and statements.

use super::lexer::{Tok, Token};
use super::{ErrorKind, TranslateError};

/// Deepest nesting of statements or expressions accepted.
pub const MAX_DEPTH: usize = 64;

/// A source position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

/// A top-level item.
#[derive(Clone, Debug)]
pub enum Item {
    /// `int name = value;`
    Int(String, i64, Pos),
    /// `const name = value;`
    Const(String, i64, Pos),
    /// `page name;`
    Page(String, Pos),
    /// `queue name;`
    Queue(String, Pos),
    /// `event Name() { ... }`
    Event(String, Vec<Stmt>, Pos),
}

/// A statement.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `if (cond) then else`
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    /// `while (cond) body`
    While(Expr, Box<Stmt>, Pos),
    /// `break;`
    Break(Pos),
    /// `continue;`
    Continue(Pos),
    /// `return;`
    Return(Pos),
    /// `{ ... }`
    Block(Vec<Stmt>),
    /// `name = value;` or `name op= value;`
    Assign(String, Option<&'static str>, Expr, Pos),
    /// A call used as a statement.
    Expr(Expr),
}

/// An expression.
#[derive(Clone, Debug)]
pub enum Expr {
    /// Integer literal.
    Int(i64, Pos),
    /// A name (variable, constant, system value, `nil`, `true`, `false`).
    Name(String, Pos),
    /// `name(args)`.
    Call(String, Vec<Expr>, Pos),
    /// `!e`, `-e`, `~e`.
    Unary(&'static str, Box<Expr>, Pos),
    /// `l op r`.
    Binary(&'static str, Box<Expr>, Box<Expr>, Pos),
}

impl Expr {
    /// Where the expression starts.
    pub fn pos(&self) -> Pos {
        match self {
            Expr::Int(_, p) | Expr::Name(_, p) | Expr::Call(_, _, p) | Expr::Unary(_, _, p) => *p,
            Expr::Binary(_, _, _, p) => *p,
        }
    }
}

struct Parser<'t> {
    toks: &'t [Token],
    at: usize,
    depth: usize,
}

/// Parses a whole program.
pub fn parse(toks: &[Token]) -> Result<Vec<Item>, TranslateError> {
    let mut p = Parser {
        toks,
        at: 0,
        depth: 0,
    };
    let mut items = Vec::new();
    while p.peek().tok != Tok::Eof {
        p.item(&mut items)?;
    }
    Ok(items)
}

const BINARY: [(&str, u8); 16] = [
    ("||", 1),
    ("&&", 2),
    ("|", 3),
    ("^", 4),
    ("&", 5),
    ("==", 6),
    ("!=", 6),
    ("<", 7),
    ("<=", 7),
    (">", 7),
    (">=", 7),
    ("+", 8),
    ("-", 8),
    ("*", 9),
    ("/", 9),
    ("%", 9),
];

impl<'t> Parser<'t> {
    fn peek(&self) -> &'t Token {
        &self.toks[self.at.min(self.toks.len() - 1)]
    }

    fn pos(&self) -> Pos {
        let t = self.peek();
        Pos {
            line: t.line,
            col: t.col,
        }
    }

    fn bump(&mut self) -> &'t Token {
        let t = self.peek();
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        t
    }

    fn error<T>(&self, expected: &str) -> Result<T, TranslateError> {
        let t = self.peek();
        Err(TranslateError {
            line: t.line,
            col: t.col,
            kind: ErrorKind::Expected {
                expected: expected.into(),
                found: t.tok.describe(),
            },
        })
    }

    fn is(&self, p: &str) -> bool {
        matches!(&self.peek().tok, Tok::Punct(x) if *x == p)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(x) if x == w)
    }

    fn expect(&mut self, p: &str) -> Result<(), TranslateError> {
        if self.is(p) {
            self.bump();
            Ok(())
        } else {
            self.error(&format!("`{p}`"))
        }
    }

    fn name(&mut self, what: &str) -> Result<String, TranslateError> {
        match &self.peek().tok {
            Tok::Ident(s) => {
                let s = s.clone();
                self.bump();
                Ok(s)
            }
            _ => self.error(what),
        }
    }

    fn deeper(&mut self) -> Result<(), TranslateError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let p = self.pos();
            return Err(TranslateError {
                line: p.line,
                col: p.col,
                kind: ErrorKind::TooDeep(MAX_DEPTH),
            });
        }
        Ok(())
    }

    fn signed_int(&mut self) -> Result<i64, TranslateError> {
        let neg = self.is("-");
        if neg {
            self.bump();
        }
        match self.peek().tok {
            Tok::Int(v) => {
                self.bump();
                Ok(if neg { v.wrapping_neg() } else { v })
            }
            _ => self.error("an integer"),
        }
    }

    fn item(&mut self, items: &mut Vec<Item>) -> Result<(), TranslateError> {
        let pos = self.pos();
        let word = match &self.peek().tok {
            Tok::Ident(w) => w.as_str(),
            _ => return self.error("a declaration (`int`, `const`, `page`, `queue`) or `event`"),
        };
        match word {
            "int" | "page" | "queue" => {
                self.bump();
                loop {
                    let pos = self.pos();
                    let name = self.name("a name")?;
                    items.push(match word {
                        "int" => {
                            let init = if self.is("=") {
                                self.bump();
                                self.signed_int()?
                            } else {
                                0
                            };
                            Item::Int(name, init, pos)
                        }
                        "page" => Item::Page(name, pos),
                        _ => Item::Queue(name, pos),
                    });
                    if self.is(",") {
                        self.bump();
                    } else {
                        break;
                    }
                }
                self.expect(";")
            }
            "const" => {
                self.bump();
                let pos = self.pos();
                let name = self.name("a name")?;
                self.expect("=")?;
                let v = self.signed_int()?;
                items.push(Item::Const(name, v, pos));
                self.expect(";")
            }
            "event" => {
                self.bump();
                let name = self.name("an event name")?;
                self.expect("(")?;
                self.expect(")")?;
                let body = self.block()?;
                items.push(Item::Event(name, body, pos));
                Ok(())
            }
            _ => self.error("a declaration (`int`, `const`, `page`, `queue`) or `event`"),
        }
    }

    fn block(&mut self) -> Result<Vec<Stmt>, TranslateError> {
        self.expect("{")?;
        let mut out = Vec::new();
        while !self.is("}") {
            if self.peek().tok == Tok::Eof {
                return self.error("`}`");
            }
            out.push(self.stmt()?);
        }
        self.bump();
        Ok(out)
    }

    fn stmt(&mut self) -> Result<Stmt, TranslateError> {
        self.deeper()?;
        let s = self.stmt_inner();
        self.depth -= 1;
        s
    }

    fn stmt_inner(&mut self) -> Result<Stmt, TranslateError> {
        let pos = self.pos();
        if self.is("{") {
            return Ok(Stmt::Block(self.block()?));
        }
        if self.is_word("if") {
            self.bump();
            self.expect("(")?;
            let cond = self.expr(1)?;
            self.expect(")")?;
            let then = Box::new(self.stmt()?);
            let els = if self.is_word("else") {
                self.bump();
                Some(Box::new(self.stmt()?))
            } else {
                None
            };
            return Ok(Stmt::If(cond, then, els));
        }
        if self.is_word("while") {
            self.bump();
            self.expect("(")?;
            let cond = self.expr(1)?;
            self.expect(")")?;
            let body = Box::new(self.stmt()?);
            return Ok(Stmt::While(cond, body, pos));
        }
        for (w, make) in [
            ("break", Stmt::Break as fn(Pos) -> Stmt),
            ("continue", Stmt::Continue),
            ("return", Stmt::Return),
        ] {
            if self.is_word(w) {
                self.bump();
                self.expect(";")?;
                return Ok(make(pos));
            }
        }
        if let (Tok::Ident(name), Some(Tok::Punct(op))) =
            (&self.peek().tok, self.toks.get(self.at + 1).map(|t| &t.tok))
        {
            let compound = match *op {
                "=" => Some(None),
                "+=" => Some(Some("+")),
                "-=" => Some(Some("-")),
                "*=" => Some(Some("*")),
                "/=" => Some(Some("/")),
                "%=" => Some(Some("%")),
                "&=" => Some(Some("&")),
                "|=" => Some(Some("|")),
                "^=" => Some(Some("^")),
                _ => None,
            };
            if let Some(op) = compound {
                let name = name.clone();
                self.bump();
                self.bump();
                let value = self.expr(1)?;
                self.expect(";")?;
                return Ok(Stmt::Assign(name, op, value, pos));
            }
        }
        let e = self.expr(1)?;
        if !self.is(";") {
            return self.error("`;` or an assignment operator");
        }
        self.bump();
        Ok(Stmt::Expr(e))
    }

    fn expr(&mut self, min: u8) -> Result<Expr, TranslateError> {
        self.deeper()?;
        let e = self.expr_inner(min);
        self.depth -= 1;
        e
    }

    fn expr_inner(&mut self, min: u8) -> Result<Expr, TranslateError> {
        let mut left = self.unary()?;
        // A chain `a + b + c ...` nests to the left; bound it like nesting.
        let mut chain = 0;
        loop {
            let op = match &self.peek().tok {
                Tok::Punct(p) => BINARY.iter().find(|(o, _)| o == p),
                _ => None,
            };
            let Some(&(op, prec)) = op else {
                return Ok(left);
            };
            if prec < min {
                return Ok(left);
            }
            let pos = self.pos();
            chain += 1;
            if chain > MAX_DEPTH {
                return Err(TranslateError {
                    line: pos.line,
                    col: pos.col,
                    kind: ErrorKind::TooDeep(MAX_DEPTH),
                });
            }
            self.bump();
            let right = self.expr(prec + 1)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right), pos);
        }
    }

    fn unary(&mut self) -> Result<Expr, TranslateError> {
        let pos = self.pos();
        for op in ["!", "-", "~"] {
            if self.is(op) {
                self.bump();
                self.deeper()?;
                let inner = self.unary();
                self.depth -= 1;
                return Ok(Expr::Unary(op, Box::new(inner?), pos));
            }
        }
        match &self.peek().tok {
            Tok::Int(v) => {
                let v = *v;
                self.bump();
                Ok(Expr::Int(v, pos))
            }
            Tok::Ident(name) => {
                let name = name.clone();
                self.bump();
                if !self.is("(") {
                    return Ok(Expr::Name(name, pos));
                }
                self.bump();
                let mut args = Vec::new();
                if !self.is(")") {
                    loop {
                        args.push(self.expr(1)?);
                        if self.is(",") {
                            self.bump();
                        } else {
                            break;
                        }
                    }
                }
                self.expect(")")?;
                Ok(Expr::Call(name, args, pos))
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr(1)?;
                self.expect(")")?;
                Ok(e)
            }
            _ => self.error("an expression"),
        }
    }
}
