//! NNEF syntax: the AST, the tokenizer, the lalrpop parser that builds the AST, and a
//! printer that writes an AST back as canonical NNEF text.
//!
//! Two entry points: [`parse_document`] for a `graph.nnef` (version and graph required)
//! and [`parse_library`] for the stdlib (fragments only). A syntax error inside a graph
//! or fragment body skips that statement up to its `;`, and one elsewhere in a
//! `version`, `extension`, `fragment` or `graph` item skips the rest of that item up to
//! the next of those keywords; parsing goes on, so several errors are reported at once
//! (at most [`MAX_SYNTAX_ERRORS`]), each a [`Diagnostic`] pointing at the offending
//! token; a malformed version number or generic declaration is recorded the same way.
//! Text outside any item, or a lexical error (an invalid character, a malformed number,
//! an unterminated string), ends the parse.
//! Expressions nested deeper than [`MAX_NESTING`] levels are refused, so later recursive
//! passes cannot overflow the stack. Nothing here resolves names, checks types or knows
//! which extensions a document enabled (compositional syntax is accepted everywhere).

pub mod ast;
mod lexer;
pub mod print;

#[cfg(test)]
mod tests;

use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use lalrpop_util::{ErrorRecovery, ParseError};
use lexer::{Lexer, SyntaxError, Tok};

pub use lexer::MAX_NESTING;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, unused_parens, unused_imports, dead_code)]
    grammar,
    "/front/syntax/nnef.rs"
);

/// How many syntax errors one parse reports before it says "and more".
pub const MAX_SYNTAX_ERRORS: usize = 20;

/// Parses a `graph.nnef`: `version`, `extension`s, `fragment`s, then exactly one `graph`.
pub fn parse_document(file: FileId, text: &str) -> Result<ast::Document, Diagnostics> {
    let mut recovered = Vec::new();
    let result = grammar::DocumentFileParser::new().parse(file, &mut recovered, Lexer::new(text));
    finish(file, text, result, recovered)
}

/// Parses a fragment library such as `stdlib.nnef`: fragment definitions and
/// declarations only, no `version`, `extension` or `graph`.
pub fn parse_library(file: FileId, text: &str) -> Result<ast::Document, Diagnostics> {
    let mut recovered = Vec::new();
    let result = grammar::LibraryFileParser::new().parse(file, &mut recovered, Lexer::new(text));
    finish(file, text, result, recovered)
}

type Recovered<'a> = Vec<ErrorRecovery<usize, Tok<'a>, SyntaxError>>;

/// A grammar action's own error (a malformed version number, an invalid generic
/// declaration) as a recovered error, so that the action can record it and parsing goes on.
fn user_error<'a>(error: SyntaxError) -> ErrorRecovery<usize, Tok<'a>, SyntaxError> {
    ErrorRecovery {
        error: ParseError::User { error },
        dropped_tokens: Vec::new(),
    }
}

/// The document, or every syntax error in source order: those the parser recovered
/// from, then the one that ended the parse (if any).
fn finish<'a>(
    file: FileId,
    text: &str,
    result: Result<ast::Document, ParseError<usize, Tok<'a>, SyntaxError>>,
    recovered: Recovered<'a>,
) -> Result<ast::Document, Diagnostics> {
    // After a recovery, an unexpected end of file is usually a consequence, not a mistake
    // of its own: skipping to a `;` can pop a `}` that was already read (text after the
    // graph's body), and a body given up at the end of the file was never closed. It is
    // reported only when it is the first error; whether the parse then ended or was
    // recovered at the top level makes no difference.
    let mut errors: Vec<Diagnostic> = Vec::new();
    for r in recovered {
        if matches!(r.error, ParseError::UnrecognizedEof { .. }) && !errors.is_empty() {
            continue;
        }
        errors.push(to_diagnostic(file, text, r.error));
    }
    match result {
        Ok(doc) if errors.is_empty() => return Ok(doc),
        Ok(_) => {}
        Err(ParseError::UnrecognizedEof { .. }) if !errors.is_empty() => {}
        Err(e) => errors.push(to_diagnostic(file, text, e)),
    }
    if errors.len() > MAX_SYNTAX_ERRORS {
        let more = errors.len() - MAX_SYNTAX_ERRORS;
        errors.truncate(MAX_SYNTAX_ERRORS);
        if let Some(last) = errors.last_mut() {
            *last = last.clone().with_note(format!(
                "{more} more syntax error{} not shown",
                if more == 1 { "" } else { "s" }
            ));
        }
    }
    Err(Diagnostics(errors))
}

fn to_diagnostic(
    file: FileId,
    text: &str,
    err: ParseError<usize, Tok<'_>, SyntaxError>,
) -> Diagnostic {
    match err {
        ParseError::User { error } => Diagnostic::error(error.message)
            .at(Span::new(file, error.start, error.end), error.label),
        ParseError::UnrecognizedToken {
            token: (start, tok, end),
            expected,
        } => {
            let found = describe_token(&tok, text.get(start..end).unwrap_or(""));
            let diag = Diagnostic::error(format!(
                "unexpected {found}; {}",
                describe_expected(&expected)
            ))
            .at(Span::new(file, start, end), "");
            if expected.iter().any(|e| e == "\";\"") && starts_line(text, start) {
                diag.with_note("is a `;` missing at the end of the previous line?")
            } else {
                diag
            }
        }
        ParseError::UnrecognizedEof { location, expected } => Diagnostic::error(format!(
            "unexpected end of file; {}",
            describe_expected(&expected)
        ))
        .at(Span::new(file, location, location), ""),
        ParseError::ExtraToken {
            token: (start, tok, end),
        } => {
            let found = describe_token(&tok, text.get(start..end).unwrap_or(""));
            Diagnostic::error(format!("unexpected {found}; expected end of file"))
                .at(Span::new(file, start, end), "")
        }
        ParseError::InvalidToken { location } => {
            // Only lalrpop's built-in lexer produces this; ours reports `User` errors.
            Diagnostic::error("invalid token").at(Span::new(file, location, location), "")
        }
    }
}

/// How a token is named in "unexpected ..." messages.
fn describe_token(tok: &Tok<'_>, source: &str) -> String {
    match tok {
        Tok::Ident(name) => format!("identifier `{name}`"),
        Tok::Integer(_) | Tok::Real(_) => format!("number `{source}`"),
        Tok::Str(_) => "string literal".to_string(),
        Tok::TypeArg(_) => format!("type argument `{source}`"),
        Tok::Version
        | Tok::Extension
        | Tok::Fragment
        | Tok::Graph
        | Tok::Tensor
        | Tok::KwInteger
        | Tok::KwScalar
        | Tok::KwLogical
        | Tok::KwString
        | Tok::True
        | Tok::False
        | Tok::For
        | Tok::In
        | Tok::If
        | Tok::Else
        | Tok::Yield
        | Tok::LengthOf
        | Tok::ShapeOf
        | Tok::RangeOf => format!("keyword `{source}`"),
        _ => format!("`{source}`"),
    }
}

/// Terminals that can start an expression. When all are expected, the message says
/// "expression" instead of listing eighteen tokens.
const EXPRESSION_START: &[&str] = &[
    "IDENT",
    "INTEGER",
    "REAL",
    "STRING",
    "\"true\"",
    "\"false\"",
    "\"(\"",
    "\"[\"",
    "\"-\"",
    "\"+\"",
    "\"!\"",
    "\"length_of\"",
    "\"range_of\"",
    "\"shape_of\"",
    "\"integer\"",
    "\"scalar\"",
    "\"logical\"",
    "\"string\"",
];

/// Terminals that can continue an expression (binary operators and `[`). When all
/// are expected, the message says "operator" instead of listing them.
const OPERATOR: &[&str] = &[
    "\"in\"", "\"[\"", "\"<\"", "\">\"", "\"<=\"", "\">=\"", "\"==\"", "\"!=\"", "\"&&\"",
    "\"||\"", "\"+\"", "\"-\"", "\"*\"", "\"/\"", "\"^\"",
];

/// Turns lalrpop's terminal names (`"\"(\""`, `IDENT`) into "expected one of: ..." text.
fn describe_expected(expected: &[String]) -> String {
    let has_all = |group: &[&str]| group.iter().all(|t| expected.iter().any(|e| e == t));
    let mut groups: Vec<(&str, &[&str])> = Vec::new();
    if has_all(EXPRESSION_START) {
        groups.push(("expression", EXPRESSION_START));
    }
    if has_all(OPERATOR) {
        groups.push(("operator", OPERATOR));
    }
    let mut names: Vec<String> = groups.iter().map(|(name, _)| name.to_string()).collect();
    for e in expected {
        if groups
            .iter()
            .any(|(_, members)| members.contains(&e.as_str()))
        {
            continue;
        }
        names.push(terminal_name(e));
    }
    match names.as_slice() {
        [] => "expected end of file".to_string(),
        [one] => format!("expected {one}"),
        _ => format!("expected one of: {}", names.join(", ")),
    }
}

/// True when only whitespace separates `offset` from an earlier line, i.e. the token at
/// `offset` starts a line and the statement before it was probably not terminated.
fn starts_line(text: &str, offset: usize) -> bool {
    let before = text.get(..offset).unwrap_or("");
    let trimmed = before.trim_end_matches([' ', '\t', '\r']);
    trimmed.ends_with('\n') && !trimmed.trim().is_empty()
}

fn terminal_name(terminal: &str) -> String {
    match terminal {
        "IDENT" => "identifier".to_string(),
        "INTEGER" => "integer literal".to_string(),
        "REAL" => "real literal".to_string(),
        "STRING" => "string literal".to_string(),
        "TYPEARG" => "type argument `<T>`".to_string(),
        quoted => format!("`{}`", quoted.trim_matches('"')),
    }
}
