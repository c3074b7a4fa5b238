//! Diagnostics shared by every compiler stage: a stable code, a severity, a message, a primary label,
//! secondary labels for the evidence (a witness path, the other definition), and help that says the way
//! out. Rendering goes through miette; labels in other files than the primary's become related
//! diagnostics with their own source, so a witness path can cross files.
//!
//! Messages are lowercase, without a final period, with user names in backticks.

use std::fmt;
use std::sync::Arc;

use miette::{LabeledSpan, NamedSource, SourceSpan};

use crate::syntax::{FileId, Sources, Span};

pub mod codes;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Something worth a look; does not fail `check` unless `--deny-warnings`.
    Warning,
    /// The package does not compile.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A place in a source with what to say about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What (may be empty).
    pub message: String,
}

impl Label {
    /// A label at `span` saying `message`.
    pub fn new(span: Span, message: impl Into<String>) -> Label {
        Label { span, message: message.into() }
    }
}

/// One diagnostic of any stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The stable code, e.g. `permits::effects::understated` (see [`codes`]).
    pub code: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// The message: lowercase, no final period.
    pub message: String,
    /// The main place; `None` for a diagnostic about no place (an empty folder, an unreadable path).
    pub primary: Option<Label>,
    /// The evidence, in order (a witness path is walked hop by hop).
    pub secondary: Vec<Label>,
    /// The way out.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error with a code and message and nothing else yet.
    pub fn error(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { code, severity: Severity::Error, message: message.into(), primary: None, secondary: Vec::new(), help: None }
    }

    /// A warning with a code and message and nothing else yet.
    pub fn warning(code: &'static str, message: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, message) }
    }

    /// Sets the primary label.
    pub fn at(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.primary = Some(Label::new(span, message));
        self
    }

    /// Adds a secondary label.
    pub fn with(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label::new(span, message));
        self
    }

    /// Sets the help.
    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// A value miette can render, holding the sources it points into.
    pub fn to_report(&self, sources: &Sources) -> Report {
        let primary_file = self.primary.as_ref().map(|l| l.span.file);
        let mut own = Vec::new();
        let mut others: Vec<(FileId, Vec<&Label>)> = Vec::new();
        for (i, label) in self.primary.iter().chain(self.secondary.iter()).enumerate() {
            let primary = i == 0 && self.primary.is_some();
            if Some(label.span.file) == primary_file {
                own.push(labeled(label, primary));
            } else {
                match others.iter_mut().find(|(f, _)| *f == label.span.file) {
                    Some((_, v)) => v.push(label),
                    None => others.push((label.span.file, vec![label])),
                }
            }
        }
        let related = others
            .into_iter()
            .map(|(file, labels)| Related {
                message: format!("continued in `{}`", sources.display_name(file)),
                source: named_source(sources, file),
                labels: labels.into_iter().map(|l| labeled(l, false)).collect(),
            })
            .collect();
        Report {
            code: self.code,
            severity: self.severity,
            message: self.message.clone(),
            help: self.help.clone(),
            source: primary_file.map(|f| named_source(sources, f)),
            labels: own,
            related,
        }
    }
}

fn labeled(label: &Label, primary: bool) -> LabeledSpan {
    let span = SourceSpan::new((label.span.start as usize).into(), (label.span.end - label.span.start) as usize);
    let text = if label.message.is_empty() { None } else { Some(label.message.clone()) };
    if primary { LabeledSpan::new_primary_with_span(text, span) } else { LabeledSpan::new_with_span(text, span) }
}

fn named_source(sources: &Sources, file: FileId) -> NamedSource<Arc<str>> {
    NamedSource::new(sources.display_name(file), sources.text_arc(file)).with_language("permits")
}

/// A diagnostic ready for miette (see [`Diagnostic::to_report`]).
#[derive(Debug)]
pub struct Report {
    code: &'static str,
    severity: Severity,
    message: String,
    help: Option<String>,
    source: Option<NamedSource<Arc<str>>>,
    labels: Vec<LabeledSpan>,
    related: Vec<Related>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Report {}

impl miette::Diagnostic for Report {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() { None } else { Some(Box::new(self.labels.iter().cloned())) }
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(self.related.iter().map(|r| r as &dyn miette::Diagnostic)))
        }
    }
}

/// The part of a diagnostic that points into another file.
#[derive(Debug)]
struct Related {
    message: String,
    source: NamedSource<Arc<str>>,
    labels: Vec<LabeledSpan>,
}

impl fmt::Display for Related {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Related {}

impl miette::Diagnostic for Related {
    fn severity(&self) -> Option<miette::Severity> {
        Some(miette::Severity::Advice)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
}

/// Finds the name closest to `name` among `candidates` (edit distance at most a third of the name's
/// length, at least 1), for "did you mean" help. Ties go to the first in sorted order.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let d = edit_distance(&name.to_ascii_lowercase(), &candidate.to_ascii_lowercase());
        let better = match best {
            None => true,
            Some((bd, bc)) => d < bd || (d == bd && candidate < bc),
        };
        if d <= limit && better {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance over chars, two rows of memory.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_a_near_name_and_not_a_far_one() {
        let names = ["SetPrice", "PartsFor", "NoteRepair"];
        assert_eq!(closest("SetPrise", names), Some("SetPrice"));
        assert_eq!(closest("notereapir", names), Some("NoteRepair"));
        assert_eq!(closest("Deploy", names), None);
    }
}
