//! The NNEF tokenizer that feeds the lalrpop parser (`nnef.lalrpop`).
//!
//! It turns source text into `(start, Tok, end)` triples with byte offsets, skipping
//! whitespace and `#` comments. Lexical errors (a character outside the NNEF alphabet, an
//! unterminated string, an integer that does not fit in `i64`, a real that overflows
//! `f64`) come back as [`SyntaxError`] values with a byte range; the lexer never panics.
//!
//! One piece of context lives here rather than in the grammar: `<T>` with `T` one of
//! `integer scalar logical string ?` becomes a single [`Tok::TypeArg`]. Without it,
//! `name<` would be an LR(1) conflict between a generic invocation (`cast<integer>(x)`)
//! and a comparison (`a < b`). The merge is safe because a bare type keyword or `?`
//! is never an expression operand, so `< T >` can never be part of a comparison.
//! This lexer does not know about flat vs. compositional syntax; it accepts the union.

use crate::front::syntax::ast::PrimType;

/// A lexical or grammar-action error: a message and the byte range it is about.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    /// Short text shown under the caret (may be empty).
    pub label: String,
    pub start: usize,
    pub end: usize,
}

impl SyntaxError {
    pub fn new(
        message: impl Into<String>,
        label: impl Into<String>,
        start: usize,
        end: usize,
    ) -> Self {
        SyntaxError {
            message: message.into(),
            label: label.into(),
            start,
            end,
        }
    }
}

/// A real literal: the text as written (needed for `version 1.0`) and its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RealLit<'a> {
    pub text: &'a str,
    pub value: f64,
}

/// The type inside a merged `<T>` token: a primitive type name, or `None` for `?`.
/// `start..end` is the byte range of the type name itself (without the brackets).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TypeArg {
    pub prim: Option<PrimType>,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Tok<'a> {
    Ident(&'a str),
    Integer(i64),
    Real(RealLit<'a>),
    /// String literal content, without quotes.
    Str(&'a str),
    TypeArg(TypeArg),
    // Keywords.
    Version,
    Extension,
    Fragment,
    Graph,
    Tensor,
    KwInteger,
    KwScalar,
    KwLogical,
    KwString,
    True,
    False,
    For,
    In,
    If,
    Else,
    Yield,
    LengthOf,
    ShapeOf,
    RangeOf,
    // Punctuation and operators.
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Lt,
    Gt,
    Le,
    Ge,
    EqEq,
    Ne,
    AndAnd,
    OrOr,
    Arrow,
    Assign,
    Colon,
    Comma,
    Semi,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    Bang,
    Question,
}

pub type Spanned<'a> = Result<(usize, Tok<'a>, usize), SyntaxError>;

/// How deep an expression may nest (see [`Nesting`]): a sum of ten thousand terms
/// written as one `a + b + ...` chain is that deep. Real and generated models stay far
/// below; the limit keeps every later recursive walk of the tree (evaluation, printing,
/// cloning) within the front end's stack (`front::FRONT_STACK_BYTES`). `Drop` does not
/// recurse (see `ast::Expr`).
pub const MAX_NESTING: usize = 10_000;

/// An upper bound on the depth of the expression being read, kept from tokens alone so
/// that a too-deep tree is refused *before* the parser builds it (the parser's own
/// reductions and error recovery then never see a deeper tree).
///
/// Every operator or keyword inside an expression and every closed `(...)`/`[...]` adds
/// at most one tree level to its bracket level; a `,` starts a new item; `;`, `{`, `}`
/// end the statement. The bound is the sum over the open levels.
#[derive(Default)]
struct Nesting {
    /// Levels counted at top level, outside any bracket.
    base: usize,
    /// One counter per open `(` or `[`.
    open: Vec<usize>,
}

impl Nesting {
    fn top(&mut self) -> &mut usize {
        self.open.last_mut().unwrap_or(&mut self.base)
    }

    /// Accounts for `tok`; returns the new depth bound.
    fn track(&mut self, tok: &Tok<'_>) -> usize {
        match tok {
            Tok::LParen | Tok::LBracket => self.open.push(0),
            Tok::RParen | Tok::RBracket => {
                self.open.pop();
                *self.top() += 1;
            }
            Tok::Comma => *self.top() = 0,
            Tok::Semi | Tok::LBrace | Tok::RBrace => *self = Nesting::default(),
            Tok::Plus
            | Tok::Minus
            | Tok::Star
            | Tok::Slash
            | Tok::Caret
            | Tok::Bang
            | Tok::Lt
            | Tok::Gt
            | Tok::Le
            | Tok::Ge
            | Tok::EqEq
            | Tok::Ne
            | Tok::AndAnd
            | Tok::OrOr
            | Tok::In
            | Tok::If
            | Tok::Else
            | Tok::For
            | Tok::Yield
            | Tok::Colon => *self.top() += 1,
            _ => {}
        }
        self.base + self.open.len() + self.open.iter().sum::<usize>()
    }
}

pub struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    nesting: Nesting,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str) -> Self {
        // Skip a UTF-8 byte order mark that some editors write; offsets stay byte offsets
        // into the original text.
        let pos = if text.starts_with('\u{feff}') {
            '\u{feff}'.len_utf8()
        } else {
            0
        };
        Lexer {
            text,
            pos,
            nesting: Nesting::default(),
        }
    }

    fn peek_byte(&self, at: usize) -> Option<u8> {
        self.text.as_bytes().get(at).copied()
    }

    fn skip_trivia(&mut self) {
        while let Some(b) = self.peek_byte(self.pos) {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => self.pos += 1,
                b'#' => {
                    while let Some(c) = self.peek_byte(self.pos) {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// End offset of the run of bytes starting at `from` that satisfy `pred`.
    fn scan_while(&self, from: usize, pred: impl Fn(u8) -> bool) -> usize {
        let mut i = from;
        while self.peek_byte(i).is_some_and(&pred) {
            i += 1;
        }
        i
    }

    /// If `<` at `self.pos` starts `< T >` with `T` a type name or `?`, returns the
    /// token and its end offset.
    fn try_type_arg(&self) -> Option<(TypeArg, usize)> {
        let is_ws = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
        let start = self.scan_while(self.pos + 1, is_ws);
        let (prim, end) = if self.peek_byte(start) == Some(b'?') {
            (None, start + 1)
        } else {
            let end = self.scan_while(start, is_ident_continue);
            let prim = match self.text.get(start..end)? {
                "integer" => PrimType::Integer,
                "scalar" => PrimType::Scalar,
                "logical" => PrimType::Logical,
                "string" => PrimType::String,
                _ => return None,
            };
            (Some(prim), end)
        };
        let close = self.scan_while(end, is_ws);
        if self.peek_byte(close) == Some(b'>') {
            Some((TypeArg { prim, start, end }, close + 1))
        } else {
            None
        }
    }

    fn lex_number(&mut self, start: usize) -> Spanned<'a> {
        let mut end = self.scan_while(start, |b| b.is_ascii_digit());
        let mut real = false;
        if self.peek_byte(end) == Some(b'.') {
            real = true;
            end = self.scan_while(end + 1, |b| b.is_ascii_digit());
        }
        if matches!(self.peek_byte(end), Some(b'e' | b'E')) {
            let mut digits = end + 1;
            let signed = matches!(self.peek_byte(digits), Some(b'+' | b'-'));
            if signed {
                digits += 1;
            }
            if self.peek_byte(digits).is_some_and(|b| b.is_ascii_digit()) {
                real = true;
                end = self.scan_while(digits, |b| b.is_ascii_digit());
            } else if signed || !self.peek_byte(end + 1).is_some_and(is_ident_continue) {
                // `1e`, `1e+`: an exponent without digits. (`1ex` is left to become a
                // number followed by an identifier, which the parser rejects.)
                self.pos = digits;
                return Err(SyntaxError::new(
                    format!("malformed real literal `{}`", &self.text[start..digits]),
                    "expected digits after the exponent",
                    start,
                    digits,
                ));
            }
        }
        // `1.0.5` (a version with a patch level) or `1..2`: say so instead of
        // reporting a stray `.`.
        if real && self.peek_byte(end) == Some(b'.') {
            let bad_end = self.scan_while(end, |b| b.is_ascii_digit() || b == b'.');
            self.pos = bad_end;
            return Err(SyntaxError::new(
                format!("malformed number `{}`", &self.text[start..bad_end]),
                "a number has at most one `.`",
                start,
                bad_end,
            ));
        }
        self.pos = end;
        let text = &self.text[start..end];
        if real {
            match text.parse::<f64>() {
                Ok(value) if value.is_finite() => {
                    Ok((start, Tok::Real(RealLit { text, value }), end))
                }
                _ => Err(SyntaxError::new(
                    format!("real literal `{text}` is out of range"),
                    "does not fit in a 64-bit float",
                    start,
                    end,
                )),
            }
        } else {
            match text.parse::<i64>() {
                Ok(v) => Ok((start, Tok::Integer(v), end)),
                Err(_) => Err(SyntaxError::new(
                    format!("integer literal `{text}` is too large"),
                    "does not fit in a 64-bit signed integer",
                    start,
                    end,
                )),
            }
        }
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn keyword(word: &str) -> Option<Tok<'static>> {
    Some(match word {
        "version" => Tok::Version,
        "extension" => Tok::Extension,
        "fragment" => Tok::Fragment,
        "graph" => Tok::Graph,
        "tensor" => Tok::Tensor,
        "integer" => Tok::KwInteger,
        "scalar" => Tok::KwScalar,
        "logical" => Tok::KwLogical,
        "string" => Tok::KwString,
        "true" => Tok::True,
        "false" => Tok::False,
        "for" => Tok::For,
        "in" => Tok::In,
        "if" => Tok::If,
        "else" => Tok::Else,
        "yield" => Tok::Yield,
        "length_of" => Tok::LengthOf,
        "shape_of" => Tok::ShapeOf,
        "range_of" => Tok::RangeOf,
        _ => return None,
    })
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Spanned<'a>;

    fn next(&mut self) -> Option<Spanned<'a>> {
        let item = self.next_token()?;
        if let Ok((start, tok, end)) = &item
            && self.nesting.track(tok) > MAX_NESTING
        {
            // Stop the token stream here: the parser sees the error and nothing after it.
            self.pos = self.text.len();
            return Some(Err(SyntaxError::new(
                format!("expression is nested too deeply (more than {MAX_NESTING} levels)"),
                "limit reached here",
                *start,
                *end,
            )));
        }
        Some(item)
    }
}

impl<'a> Lexer<'a> {
    fn next_token(&mut self) -> Option<Spanned<'a>> {
        self.skip_trivia();
        let start = self.pos;
        let b = self.peek_byte(start)?;
        let next = self.peek_byte(start + 1);
        let punct = |tok: Tok<'a>, len: usize| -> Option<(Tok<'a>, usize)> { Some((tok, len)) };
        let two = match (b, next) {
            (b'-', Some(b'>')) => punct(Tok::Arrow, 2),
            (b'<', Some(b'=')) => punct(Tok::Le, 2),
            (b'>', Some(b'=')) => punct(Tok::Ge, 2),
            (b'=', Some(b'=')) => punct(Tok::EqEq, 2),
            (b'!', Some(b'=')) => punct(Tok::Ne, 2),
            (b'&', Some(b'&')) => punct(Tok::AndAnd, 2),
            (b'|', Some(b'|')) => punct(Tok::OrOr, 2),
            _ => None,
        };
        if let Some((tok, len)) = two {
            self.pos += len;
            return Some(Ok((start, tok, self.pos)));
        }
        if b == b'<'
            && let Some((arg, end)) = self.try_type_arg()
        {
            self.pos = end;
            return Some(Ok((start, Tok::TypeArg(arg), end)));
        }
        let single = match b {
            b'(' => Some(Tok::LParen),
            b')' => Some(Tok::RParen),
            b'[' => Some(Tok::LBracket),
            b']' => Some(Tok::RBracket),
            b'{' => Some(Tok::LBrace),
            b'}' => Some(Tok::RBrace),
            b'<' => Some(Tok::Lt),
            b'>' => Some(Tok::Gt),
            b'=' => Some(Tok::Assign),
            b':' => Some(Tok::Colon),
            b',' => Some(Tok::Comma),
            b';' => Some(Tok::Semi),
            b'+' => Some(Tok::Plus),
            b'-' => Some(Tok::Minus),
            b'*' => Some(Tok::Star),
            b'/' => Some(Tok::Slash),
            b'^' => Some(Tok::Caret),
            b'!' => Some(Tok::Bang),
            b'?' => Some(Tok::Question),
            _ => None,
        };
        if let Some(tok) = single {
            self.pos += 1;
            return Some(Ok((start, tok, self.pos)));
        }
        if b.is_ascii_digit() {
            return Some(self.lex_number(start));
        }
        if is_ident_start(b) {
            let end = self.scan_while(start, is_ident_continue);
            self.pos = end;
            let word = &self.text[start..end];
            let tok = keyword(word).unwrap_or(Tok::Ident(word));
            return Some(Ok((start, tok, end)));
        }
        if b == b'\'' || b == b'"' {
            let body = start + 1;
            return Some(match self.text[body..].bytes().position(|c| c == b) {
                Some(len) => {
                    self.pos = body + len + 1;
                    Ok((start, Tok::Str(&self.text[body..body + len]), self.pos))
                }
                None => {
                    // Consume the rest so the parser sees end of input after the error.
                    self.pos = self.text.len();
                    Err(SyntaxError::new(
                        "unterminated string literal",
                        format!("this string has no closing {}", b as char),
                        start,
                        start + 1,
                    ))
                }
            });
        }
        // Anything else is outside the NNEF alphabet. Report the whole character so the
        // caret stays on a char boundary for non-ASCII input.
        let ch = self.text[start..].chars().next().unwrap_or('\u{fffd}');
        let end = start + ch.len_utf8().max(1);
        self.pos = end;
        Some(Err(SyntaxError::new(
            format!("invalid character {}", describe_char(ch)),
            "not valid in NNEF",
            start,
            end,
        )))
    }
}

fn describe_char(ch: char) -> String {
    if ch.is_ascii_graphic() {
        format!("`{ch}`")
    } else {
        format!("{:?} (U+{:04X})", ch, ch as u32)
    }
}
