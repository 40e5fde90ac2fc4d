//! Tokens of the pseudo-code, with their positions.

use super::{ErrorKind, TranslateError};

/// A token kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// A name or keyword.
    Ident(String),
    /// An integer literal.
    Int(i64),
    /// Punctuation or an operator.
    Punct(&'static str),
    /// End of input.
    Eof,
}

impl Tok {
    /// How the token reads in an error.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of input".into(),
        }
    }
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

const PUNCT: [&str; 33] = [
    "&&", "||", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "(", ")",
    "{", "}", ";", ",", "=", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^", "!", "~",
];

/// Splits source text into tokens; `//` and `/* */` comments are skipped.
pub fn lex(src: &str) -> Result<Vec<Token>, TranslateError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let err = |line, col, kind| TranslateError { line, col, kind };
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            let (l0, c0) = (line, col);
            i += 2;
            col += 2;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(err(
                            l0,
                            c0,
                            ErrorKind::Expected {
                                expected: "`*/` closing the comment".into(),
                                found: "end of input".into(),
                            },
                        ))
                    }
                    Some('*') if chars.get(i + 1) == Some(&'/') => {
                        i += 2;
                        col += 2;
                        break;
                    }
                    Some('\n') => {
                        i += 1;
                        line += 1;
                        col = 1;
                    }
                    Some(_) => {
                        i += 1;
                        col += 1;
                    }
                }
            }
            continue;
        }
        let (tl, tc) = (line, col);
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            col += (i - start) as u32;
            out.push(Token {
                tok: Tok::Ident(chars[start..i].iter().collect()),
                line: tl,
                col: tc,
            });
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                i += 1;
            }
            col += (i - start) as u32;
            let text: String = chars[start..i].iter().collect();
            let value = if let Some(hex) = text.strip_prefix("0x") {
                i64::from_str_radix(hex, 16)
            } else {
                text.parse::<i64>()
            };
            let value = value.map_err(|_| err(tl, tc, ErrorKind::IntRange))?;
            out.push(Token {
                tok: Tok::Int(value),
                line: tl,
                col: tc,
            });
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
        match PUNCT.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                i += p.len();
                col += p.len() as u32;
                out.push(Token {
                    tok: Tok::Punct(p),
                    line: tl,
                    col: tc,
                });
            }
            None => return Err(err(tl, tc, ErrorKind::BadChar(c))),
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    Ok(out)
}
