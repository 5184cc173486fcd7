//! Parser for `graph.quant`, the optional quantization file of a model (spec §7.6).
//!
//! The file is a sequence of entries
//!
//! ```text
//! "tensor-name": fragment_name(arg = literal, ...);
//! ```
//!
//! with the lexical rules of `graph.nnef` (`#` comments, `'…'`/`"…"` strings without
//! escapes, integer vs. scalar literals). Literals are numbers (optionally negative),
//! strings, `true`/`false`, and nested arrays or tuples of those (1.0.5 allows arrays
//! for per-channel tensor parameters). The result is a typed list of entries with spans.
//!
//! Checked here: syntax, duplicate tensor keys, duplicate argument names. Not checked
//! here (that needs the graph and the fragment table, so sema does it): that the tensor
//! exists, that the fragment exists and takes these arguments with these types, and
//! that array arguments are rectangular and broadcast to the tensor.

use crate::diag::{Diagnostic, Diagnostics, FileId, Span};

/// A literal value in an argument.
#[derive(Clone, Debug, PartialEq)]
pub enum QuantValueKind {
    Integer(i64),
    Scalar(f64),
    Logical(bool),
    String(String),
    Array(Vec<QuantValue>),
    Tuple(Vec<QuantValue>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct QuantValue {
    pub kind: QuantValueKind,
    pub span: Span,
}

/// `name = value`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantArg {
    pub name: String,
    pub name_span: Span,
    pub value: QuantValue,
}

/// One line `"tensor": fragment(args);`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantEntry {
    /// The graph identifier the entry is about (not a variable label).
    pub tensor: String,
    pub tensor_span: Span,
    pub fragment: String,
    pub fragment_span: Span,
    pub args: Vec<QuantArg>,
    /// The whole entry, key to `;`.
    pub span: Span,
}

impl QuantEntry {
    /// The argument called `name`, if given.
    pub fn arg(&self, name: &str) -> Option<&QuantArg> {
        self.args.iter().find(|a| a.name == name)
    }
}

/// Deepest nesting of `[`/`(` accepted; deeper input is an error, not a stack overflow.
const MAX_DEPTH: usize = 32;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Real(f64),
    True,
    False,
    Punct(char),
    Eof,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier `{s}`"),
            Tok::Str(s) => format!("string '{s}'"),
            Tok::Int(i) => format!("number `{i}`"),
            Tok::Real(r) => format!("number `{r:?}`"),
            Tok::True => "`true`".into(),
            Tok::False => "`false`".into(),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Eof => "end of file".into(),
        }
    }
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    file: FileId,
}

impl<'a> Lexer<'a> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn skip_trivia(&mut self) {
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if b.is_ascii_whitespace() {
                self.pos += 1;
            } else if b == b'#' {
                while bytes.get(self.pos).is_some_and(|&c| c != b'\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    /// The next token and its span, or a diagnostic for a malformed one.
    fn next(&mut self) -> Result<(Tok, Span), Diagnostic> {
        self.skip_trivia();
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let Some(&b) = bytes.get(start) else {
            return Ok((Tok::Eof, self.span(start, start)));
        };
        let take_while = |pos: &mut usize, f: fn(u8) -> bool| {
            while bytes.get(*pos).is_some_and(|&c| f(c)) {
                *pos += 1;
            }
        };
        if b.is_ascii_alphabetic() || b == b'_' {
            take_while(&mut self.pos, |c| c.is_ascii_alphanumeric() || c == b'_');
            let word = &self.text[start..self.pos];
            let tok = match word {
                "true" => Tok::True,
                "false" => Tok::False,
                _ => Tok::Ident(word.to_string()),
            };
            return Ok((tok, self.span(start, self.pos)));
        }
        if b.is_ascii_digit() {
            take_while(&mut self.pos, |c| c.is_ascii_digit());
            let mut real = false;
            if bytes.get(self.pos) == Some(&b'.') {
                real = true;
                self.pos += 1;
                take_while(&mut self.pos, |c| c.is_ascii_digit());
            }
            if matches!(bytes.get(self.pos), Some(b'e' | b'E')) {
                let mut p = self.pos + 1;
                if matches!(bytes.get(p), Some(b'+' | b'-')) {
                    p += 1;
                }
                if bytes.get(p).is_some_and(|c| c.is_ascii_digit()) {
                    real = true;
                    self.pos = p;
                    take_while(&mut self.pos, |c| c.is_ascii_digit());
                }
            }
            let span = self.span(start, self.pos);
            let lit = &self.text[start..self.pos];
            let tok = if real {
                match lit.parse::<f64>() {
                    Ok(v) if v.is_finite() => Tok::Real(v),
                    _ => return Err(Diagnostic::error("number out of range").at(span, "too large")),
                }
            } else {
                match lit.parse::<i64>() {
                    Ok(v) => Tok::Int(v),
                    Err(_) => {
                        return Err(
                            Diagnostic::error("integer literal out of range").at(span, "too large")
                        );
                    }
                }
            };
            return Ok((tok, span));
        }
        if b == b'\'' || b == b'"' {
            let body = start + 1;
            return match self.text[body..].find(b as char) {
                Some(len) => {
                    self.pos = body + len + 1;
                    Ok((
                        Tok::Str(self.text[body..body + len].to_string()),
                        self.span(start, self.pos),
                    ))
                }
                None => {
                    self.pos = self.text.len();
                    Err(Diagnostic::error("unterminated string")
                        .at(self.span(start, start + 1), "starts here"))
                }
            };
        }
        if b":(),;=[]-".contains(&b) {
            self.pos += 1;
            return Ok((Tok::Punct(b as char), self.span(start, self.pos)));
        }
        // Step over a whole (possibly multi-byte) character so spans stay on boundaries.
        let c = self.text[start..].chars().next().unwrap_or('\u{fffd}');
        self.pos += c.len_utf8();
        Err(Diagnostic::error(format!("unexpected character {c:?}"))
            .at(self.span(start, self.pos), ""))
    }
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    tok: Tok,
    span: Span,
}

impl<'a> Parser<'a> {
    fn bump(&mut self) -> Result<(Tok, Span), Diagnostic> {
        let (next, span) = self.lexer.next()?;
        let prev = std::mem::replace(&mut self.tok, next);
        let prev_span = std::mem::replace(&mut self.span, span);
        Ok((prev, prev_span))
    }

    fn unexpected(&self, wanted: &str) -> Diagnostic {
        Diagnostic::error(format!("expected {wanted}, found {}", self.tok.describe()))
            .at(self.span, format!("expected {wanted}"))
    }

    fn expect_punct(&mut self, c: char) -> Result<Span, Diagnostic> {
        if self.tok == Tok::Punct(c) {
            Ok(self.bump()?.1)
        } else {
            Err(self.unexpected(&format!("`{c}`")))
        }
    }

    fn ident(&mut self, what: &str) -> Result<(String, Span), Diagnostic> {
        match &self.tok {
            Tok::Ident(_) => match self.bump()? {
                (Tok::Ident(s), span) => Ok((s, span)),
                (_, span) => Err(Diagnostic::error("internal parser error").at(span, "")),
            },
            _ => Err(self.unexpected(what)),
        }
    }

    fn entry(&mut self) -> Result<QuantEntry, Diagnostic> {
        let (tensor, tensor_span) = match &self.tok {
            Tok::Str(_) => match self.bump()? {
                (Tok::Str(s), span) => (s, span),
                (_, span) => return Err(Diagnostic::error("internal parser error").at(span, "")),
            },
            _ => return Err(self.unexpected("a quoted tensor name")),
        };
        self.expect_punct(':')?;
        let (fragment, fragment_span) = self.ident("a quantization fragment name")?;
        self.expect_punct('(')?;
        let mut args: Vec<QuantArg> = Vec::new();
        if self.tok != Tok::Punct(')') {
            loop {
                let (name, name_span) =
                    self.ident("an argument name (arguments in graph.quant are named)")?;
                self.expect_punct('=')?;
                let value = self.value(0)?;
                if let Some(first) = args.iter().find(|a| a.name == name) {
                    return Err(Diagnostic::error(format!("argument `{name}` given twice"))
                        .at(name_span, "again here")
                        .with_label(first.name_span, "first here"));
                }
                args.push(QuantArg {
                    name,
                    name_span,
                    value,
                });
                if self.tok == Tok::Punct(',') {
                    self.bump()?;
                } else {
                    break;
                }
            }
        }
        self.expect_punct(')')?;
        let end = self.expect_punct(';')?;
        Ok(QuantEntry {
            tensor,
            tensor_span,
            fragment,
            fragment_span,
            args,
            span: tensor_span.to(end),
        })
    }

    fn value(&mut self, depth: usize) -> Result<QuantValue, Diagnostic> {
        if depth > MAX_DEPTH {
            return Err(Diagnostic::error(format!(
                "literal nested deeper than {MAX_DEPTH} levels"
            ))
            .at(self.span, "too deep"));
        }
        let start = self.span;
        let kind = match &self.tok {
            Tok::Int(_) | Tok::Real(_) | Tok::Str(_) | Tok::True | Tok::False => {
                match self.bump()?.0 {
                    Tok::Int(i) => QuantValueKind::Integer(i),
                    Tok::Real(r) => QuantValueKind::Scalar(r),
                    Tok::Str(s) => QuantValueKind::String(s),
                    Tok::True => QuantValueKind::Logical(true),
                    _ => QuantValueKind::Logical(false),
                }
            }
            Tok::Punct('-') => {
                self.bump()?;
                let span = start.to(self.span);
                match self.tok {
                    Tok::Int(i) => {
                        self.bump()?;
                        // `i` is non-negative, so its negation cannot overflow.
                        return Ok(QuantValue {
                            kind: QuantValueKind::Integer(-i),
                            span,
                        });
                    }
                    Tok::Real(r) => {
                        self.bump()?;
                        return Ok(QuantValue {
                            kind: QuantValueKind::Scalar(-r),
                            span,
                        });
                    }
                    _ => return Err(self.unexpected("a number after `-`")),
                }
            }
            Tok::Punct('[') => {
                self.bump()?;
                let mut items = Vec::new();
                if self.tok != Tok::Punct(']') {
                    loop {
                        items.push(self.value(depth + 1)?);
                        if self.tok == Tok::Punct(',') {
                            self.bump()?;
                        } else {
                            break;
                        }
                    }
                }
                let end = self.expect_punct(']')?;
                return Ok(QuantValue {
                    kind: QuantValueKind::Array(items),
                    span: start.to(end),
                });
            }
            Tok::Punct('(') => {
                self.bump()?;
                let mut items = vec![self.value(depth + 1)?];
                while self.tok == Tok::Punct(',') {
                    self.bump()?;
                    items.push(self.value(depth + 1)?);
                }
                let end = self.expect_punct(')')?;
                if items.len() < 2 {
                    return Err(Diagnostic::error("a tuple needs at least two items")
                        .at(start.to(end), "parentheses are only for tuples here"));
                }
                return Ok(QuantValue {
                    kind: QuantValueKind::Tuple(items),
                    span: start.to(end),
                });
            }
            Tok::Ident(_) => {
                return Err(self.unexpected("a literal").with_note(
                    "graph.quant arguments must be literals, not identifiers or expressions",
                ));
            }
            _ => return Err(self.unexpected("a literal")),
        };
        Ok(QuantValue { kind, span: start })
    }

    /// After an error: skip to just past the next `;` so later entries are still checked.
    fn recover(&mut self) {
        loop {
            match self.bump() {
                Ok((Tok::Punct(';'), _)) | Ok((Tok::Eof, _)) => return,
                _ if self.tok == Tok::Eof => return,
                _ => {}
            }
        }
    }
}

/// Parses a `graph.quant` text. `file` is its id in the caller's `SourceMap`.
pub fn parse_quant(text: &str, file: FileId) -> Result<Vec<QuantEntry>, Diagnostics> {
    let mut diags = Vec::new();
    let mut lexer = Lexer { text, pos: 0, file };
    // A bad first token: report it and start from the next good one.
    let first = loop {
        match lexer.next() {
            Ok(t) => break t,
            Err(d) => diags.push(d),
        }
    };
    let mut p = Parser {
        lexer,
        tok: first.0,
        span: first.1,
    };
    let mut entries: Vec<QuantEntry> = Vec::new();
    while p.tok != Tok::Eof {
        match p.entry() {
            Ok(e) => {
                if let Some(first) = entries.iter().find(|f| f.tensor == e.tensor) {
                    diags.push(
                        Diagnostic::error(format!("tensor '{}' is quantized twice", e.tensor))
                            .at(e.tensor_span, "again here")
                            .with_label(first.tensor_span, "first here"),
                    );
                } else {
                    entries.push(e);
                }
            }
            Err(d) => {
                diags.push(d);
                // Lexer errors leave the current token in place: make progress anyway.
                if p.tok == Tok::Punct(';') {
                    let _ = p.bump();
                } else {
                    p.recover();
                }
            }
        }
    }
    if diags.is_empty() {
        Ok(entries)
    } else {
        Err(Diagnostics(diags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceMap;
    use expect_test::{Expect, expect};
    use proptest::prelude::*;

    fn show_value(v: &QuantValue) -> String {
        let list =
            |items: &[QuantValue]| items.iter().map(show_value).collect::<Vec<_>>().join(", ");
        match &v.kind {
            QuantValueKind::Integer(i) => format!("{i}"),
            QuantValueKind::Scalar(s) => format!("{s:?}"),
            QuantValueKind::Logical(b) => format!("{b}"),
            QuantValueKind::String(s) => format!("'{s}'"),
            QuantValueKind::Array(items) => format!("[{}]", list(items)),
            QuantValueKind::Tuple(items) => format!("({})", list(items)),
        }
    }

    /// Entries one per line with spans, or the rendered diagnostics.
    fn check(text: &str, expected: Expect) {
        let mut sources = SourceMap::new();
        let file = sources.add("graph.quant", text);
        let out = match parse_quant(text, file) {
            Ok(entries) => entries
                .iter()
                .map(|e| {
                    let args: Vec<String> = e
                        .args
                        .iter()
                        .map(|a| format!("{} = {}", a.name, show_value(&a.value)))
                        .collect();
                    format!(
                        "{}@{}..{} -> {}({}) @{}..{}\n",
                        e.tensor,
                        e.tensor_span.start,
                        e.tensor_span.end,
                        e.fragment,
                        args.join(", "),
                        e.span.start,
                        e.span.end
                    )
                })
                .collect(),
            Err(d) => d.render(&sources),
        };
        expected.assert_eq(&out);
    }

    #[test]
    fn spec_examples() {
        check(
            r#"# quantization of a small net
"input":   zero_point_linear_quantize(zero_point = 128, scale = 0.0078125, bits = 8, signed = false, symmetric = false);
"filter1": linear_quantize(min = -1.0, max = 1.0, bits = 8);
'w2':      zero_point_linear_quantize(zero_point = [0, 0, 0], scale = [0.01, 0.02, 1.5e-2], bits = 8, signed = true, symmetric = true);
"x": my_quant(mode = 'fast', grid = [[1, 2], [3, 4]], pair = (1, -2), empty = [], big = 1E3);
"y": identity_quant();
"#,
            expect![[r#"
                input@30..37 -> zero_point_linear_quantize(zero_point = 128, scale = 0.0078125, bits = 8, signed = false, symmetric = false) @30..150
                filter1@151..160 -> linear_quantize(min = -1.0, max = 1.0, bits = 8) @151..211
                w2@212..216 -> zero_point_linear_quantize(zero_point = [0, 0, 0], scale = [0.01, 0.02, 0.015], bits = 8, signed = true, symmetric = true) @212..347
                x@348..351 -> my_quant(mode = 'fast', grid = [[1, 2], [3, 4]], pair = (1, -2), empty = [], big = 1000.0) @348..441
                y@442..445 -> identity_quant() @442..464
            "#]],
        );
        check("", expect![[""]]);
        check("# only a comment", expect![[""]]);
    }

    #[test]
    fn syntax_errors() {
        check(
            "\"a\": linear_quantize(min = 0.0, max = 1.0, bits = 8)\n\"b\" linear_quantize(bits = 8);\n",
            expect![[r#"
                error: expected `;`, found string 'b'
                  ┌─ graph.quant:2:1
                  │
                2 │ "b" linear_quantize(bits = 8);
                  │ ^^^ expected `;`

            "#]],
        );
        check(
            "\"a\": q(bits = x);\n\"b\": q(8);\n\"c\": q(bits = 1 + 2);\n\"d\": q(s = 'open\n",
            expect![[r#"
                error: expected a literal, found identifier `x`
                  ┌─ graph.quant:1:15
                  │
                1 │ "a": q(bits = x);
                  │               ^ expected a literal
                  │
                  = graph.quant arguments must be literals, not identifiers or expressions

                error: expected an argument name (arguments in graph.quant are named), found number `8`
                  ┌─ graph.quant:2:8
                  │
                2 │ "b": q(8);
                  │        ^ expected an argument name (arguments in graph.quant are named)

                error: unexpected character '+'
                  ┌─ graph.quant:3:17
                  │
                3 │ "c": q(bits = 1 + 2);
                  │                 ^

                error: unterminated string
                  ┌─ graph.quant:4:12
                  │
                4 │ "d": q(s = 'open
                  │            ^ starts here

            "#]],
        );
        check(
            "\"a\": q(bits = 8, bits = 4);\n\"a\": q();\nx: q();\n\"e\": q(v = (1));\n\"f\": q(v = 99999999999999999999);\n",
            expect![[r#"
                error: argument `bits` given twice
                  ┌─ graph.quant:1:18
                  │
                1 │ "a": q(bits = 8, bits = 4);
                  │        ----      ^^^^ again here
                  │        │          
                  │        first here

                error: expected a quoted tensor name, found identifier `x`
                  ┌─ graph.quant:3:1
                  │
                3 │ x: q();
                  │ ^ expected a quoted tensor name

                error: a tuple needs at least two items
                  ┌─ graph.quant:4:12
                  │
                4 │ "e": q(v = (1));
                  │            ^^^ parentheses are only for tuples here

                error: integer literal out of range
                  ┌─ graph.quant:5:12
                  │
                5 │ "f": q(v = 99999999999999999999);
                  │            ^^^^^^^^^^^^^^^^^^^^ too large

            "#]],
        );
        check(
            "\"a\": q(x = 1);\n\"a\": q(x = 2);\n\"é\": q(v = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]);",
            expect![[r#"
                error: tensor 'a' is quantized twice
                  ┌─ graph.quant:2:1
                  │
                1 │ "a": q(x = 1);
                  │ --- first here
                2 │ "a": q(x = 2);
                  │ ^^^ again here

                error: literal nested deeper than 32 levels
                  ┌─ graph.quant:3:45
                  │
                3 │ "é": q(v = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]);
                  │                                             ^ too deep

            "#]],
        );
    }

    proptest! {
        #[test]
        fn never_panics(text in "[\"'a-z0-9_:(),;=\\[\\]\\-.eE# \n+é]{0,80}") {
            let _ = parse_quant(&text, FileId(0));
        }

        #[test]
        fn never_panics_on_any_string(text in any::<String>()) {
            let _ = parse_quant(&text, FileId(0));
        }
    }
}
