//! Source files, spans and diagnostics shared by every stage of the compiler.
//!
//! A [`Diagnostic`] names a primary [`Span`] (file, byte range), a message, optional
//! secondary labels (e.g. "in fragment `foo` called from here") and notes. Rendering to
//! text goes through `codespan-reporting`, so every error shows file, line and column,
//! the offending source line and a caret. This module does not decide *what* is an
//! error; each stage builds its own diagnostics.

use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term;
use std::fmt;

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file. `start..end`, `end` exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: start as u32,
            end: end as u32,
        }
    }
    /// The smallest span covering both (same file assumed; `self`'s file wins).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// All source texts the compiler has seen: the model's `graph.nnef`, our `stdlib.nnef`,
/// `graph.quant`. Diagnostics refer to them by [`FileId`].
#[derive(Default, Clone, Debug)]
pub struct SourceMap {
    files: Vec<(String, String)>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.files.push((name.into(), text.into()));
        FileId(self.files.len() as u32 - 1)
    }
    pub fn name(&self, id: FileId) -> &str {
        &self.files[id.0 as usize].0
    }
    pub fn text(&self, id: FileId) -> &str {
        &self.files[id.0 as usize].1
    }
    /// 1-based (line, column) of a byte offset; columns count chars.
    pub fn line_col(&self, id: FileId, offset: u32) -> (usize, usize) {
        let text = self.text(id);
        let offset = (offset as usize).min(text.len());
        let before = &text[..floor_char_boundary(text, offset)];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit('\n')
            .next()
            .map(|l| l.chars().count())
            .unwrap_or(0)
            + 1;
        (line, col)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

/// One secondary label: a span with a short message.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// A user-facing message about the input.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    /// Where the problem is. `None` only for errors that have no source position
    /// (e.g. a missing file); those name the path in `message`.
    pub primary: Option<Label>,
    pub secondary: Vec<Label>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }
    pub fn warning(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message)
        }
    }
    /// Sets the primary span and its label text (may be empty).
    pub fn at(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.primary = Some(Label {
            span,
            message: label.into(),
        });
        self
    }
    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label {
            span,
            message: label.into(),
        });
        self
    }
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Renders with file:line:col, the source line and a caret (no colours).
    pub fn render(&self, sources: &SourceMap) -> String {
        render_all(std::slice::from_ref(self), sources)
    }
}

/// Renders diagnostics as plain text, in order.
pub fn render_all(diags: &[Diagnostic], sources: &SourceMap) -> String {
    let mut files = SimpleFiles::new();
    for (name, text) in &sources.files {
        files.add(name.clone(), text.clone());
    }
    let config = term::Config::default();
    let mut out = String::new();
    for d in diags {
        let sev = match d.severity {
            Severity::Error => cs::Severity::Error,
            Severity::Warning => cs::Severity::Warning,
            Severity::Note => cs::Severity::Note,
        };
        let mut labels = Vec::new();
        if let Some(p) = &d.primary {
            labels.push(
                cs::Label::primary(
                    p.span.file.0 as usize,
                    p.span.start as usize..p.span.end as usize,
                )
                .with_message(p.message.clone()),
            );
        }
        for s in &d.secondary {
            labels.push(
                cs::Label::secondary(
                    s.span.file.0 as usize,
                    s.span.start as usize..s.span.end as usize,
                )
                .with_message(s.message.clone()),
            );
        }
        let cd = cs::Diagnostic::new(sev)
            .with_message(d.message.clone())
            .with_labels(labels)
            .with_notes(d.notes.clone());
        let mut writer = term::termcolor::NoColor::new(Vec::<u8>::new());
        if term::emit(&mut writer, &config, &files, &cd).is_err() {
            // Rendering failed (span out of range): fall back to the bare message so the
            // user still learns what went wrong.
            out.push_str(&format!("error: {}\n", d.message));
        } else {
            out.push_str(&String::from_utf8_lossy(&writer.into_inner()));
        }
    }
    out
}

/// A list of diagnostics that together make a stage fail. Returned in `Err` by every
/// user-facing entry point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn render(&self, sources: &SourceMap) -> String {
        render_all(&self.0, sources)
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "error: {}", d.message)?;
        }
        Ok(())
    }
}
