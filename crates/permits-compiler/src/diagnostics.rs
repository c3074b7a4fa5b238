//! Diagnostics shared by every compiler stage: a stable code, a severity, a message, a primary label,
//! secondary labels for the evidence (a witness path, the other definition), and help that says the way
//! out. Rendering goes through miette; labels in other files than the primary's become related
//! diagnostics with their own source, so a witness path can cross files.
//!
//! Messages are lowercase, without a final period, with user names in backticks.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use miette::{LabeledSpan, MietteError, MietteSpanContents, NamedSource, SourceCode, SourceSpan, SpanContents};

use crate::syntax::{FileId, Source, Sources, Span};

pub mod codes;

pub use codes::Code;

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
    /// The stable code, e.g. `permits::effects::understated` ([`Code`]); it sets the severity.
    pub code: Code,
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
    /// A diagnostic with a code and message and nothing else yet; its severity is the code's.
    pub fn new(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            help: None,
        }
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
                own.push(labeled(sources, label, primary));
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
                labels: labels.into_iter().map(|l| labeled(sources, l, false)).collect(),
            })
            .collect();
        Report {
            code: self.code.as_str(),
            severity: self.severity,
            message: self.message.clone(),
            help: self.help.clone(),
            source: primary_file.map(|f| named_source(sources, f)),
            labels: own,
            related,
        }
    }
}

fn labeled(sources: &Sources, label: &Label, primary: bool) -> LabeledSpan {
    let span = shown_span(&sources.get(label.span.file).text, label.span);
    let text = if label.message.is_empty() { None } else { Some(label.message.clone()) };
    if primary { LabeledSpan::new_primary_with_span(text, span) } else { LabeledSpan::new_with_span(text, span) }
}

/// Where miette is to draw a label. A span in the whitespace at the end of a file (a truncated file's
/// "unexpected end of file" is at its very end) is on no line that miette shows, and miette would drop
/// the label without a word: it points at the last character before that whitespace instead.
fn shown_span(text: &str, span: Span) -> SourceSpan {
    let (start, end) = (span.start as usize, span.end as usize);
    let content_end = text.trim_end().len();
    match text.get(..content_end).and_then(|t| t.char_indices().next_back()) {
        Some((last, c)) if start >= content_end => SourceSpan::new(last.into(), c.len_utf8()),
        _ => SourceSpan::new(start.into(), end.saturating_sub(start)),
    }
}

fn named_source(sources: &Sources, file: FileId) -> NamedSource<SourceText> {
    NamedSource::new(sources.display_name(file), SourceText::new(sources.get(file))).with_language("permits")
}

/// A source's text for miette, with the line starts the source already has.
///
/// miette's own `SourceCode` for text finds a span's line by scanning from the start of the file, so
/// rendering n diagnostics of a file of size s cost O(n·s) (a third of `permitc check`'s time on a 17 MB
/// package). This one jumps by binary search to the line of the span and runs miette's own scan from
/// there, with the state the scan would have had on reaching that line, so what it returns is the same.
#[derive(Clone, Debug)]
pub struct SourceText {
    text: Arc<str>,
    line_starts: Arc<[u32]>,
    lone_cr: bool,
}

impl SourceText {
    /// The text and line starts of `source` (shared, not copied).
    pub fn new(source: &Source) -> SourceText {
        SourceText {
            text: source.text.clone(),
            line_starts: source.line_starts().clone(),
            lone_cr: source.has_lone_cr(),
        }
    }
}

impl SourceCode for SourceText {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        if self.lone_cr {
            // A lone `\r` is a line break to miette but not in the line starts: let miette scan.
            return <str as SourceCode>::read_span(&self.text, span, context_lines_before, context_lines_after);
        }
        let contents =
            context_info(self.text.as_bytes(), &self.line_starts, span, context_lines_before, context_lines_after)?;
        Ok(Box::new(contents))
    }
}

/// miette 7.6's `context_info` (`source_impls.rs`), started at the last line that begins at or before
/// both the span's start and its last byte instead of at the start of the text. Every line before that
/// one ends before the span, so the scan's state there is known: `line` lines counted, the last
/// `context_lines_before` line starts remembered, column 0, nothing seen of the span yet.
fn context_info<'a>(
    input: &'a [u8],
    line_starts: &[u32],
    span: &SourceSpan,
    context_lines_before: usize,
    context_lines_after: usize,
) -> Result<MietteSpanContents<'a>, MietteError> {
    let threshold = span.offset().min((span.offset() + span.len()).saturating_sub(1));
    let line = line_starts.partition_point(|&s| s as usize <= threshold).saturating_sub(1);
    let resume = line_starts.get(line).map_or(0, |&s| s as usize).min(input.len());
    let kept = line.min(context_lines_before);
    let mut offset = resume;
    let mut line_count = line;
    let mut start_line = line - kept;
    let mut start_column = 0usize;
    let mut before_lines_starts: VecDeque<usize> = line_starts[line - kept..line].iter().map(|&s| s as usize).collect();
    let mut current_line_start = resume;
    let mut end_lines = 0usize;
    let mut post_span = false;
    let mut post_span_got_newline = false;
    let mut iter = input[resume..].iter().copied().peekable();
    while let Some(char) = iter.next() {
        if matches!(char, b'\r' | b'\n') {
            line_count += 1;
            if char == b'\r' && iter.next_if_eq(&b'\n').is_some() {
                offset += 1;
            }
            if offset < span.offset() {
                // We're before the start of the span.
                start_column = 0;
                before_lines_starts.push_back(current_line_start);
                if before_lines_starts.len() > context_lines_before {
                    start_line += 1;
                    before_lines_starts.pop_front();
                }
            } else if offset >= span.offset() + span.len().saturating_sub(1) {
                // We're after the end of the span, but haven't necessarily started collecting end lines
                // yet (we might still be collecting context lines).
                if post_span {
                    start_column = 0;
                    if post_span_got_newline {
                        end_lines += 1;
                    } else {
                        post_span_got_newline = true;
                    }
                    if end_lines >= context_lines_after {
                        offset += 1;
                        break;
                    }
                }
            }
            current_line_start = offset + 1;
        } else if offset < span.offset() {
            start_column += 1;
        }

        if offset >= (span.offset() + span.len()).saturating_sub(1) {
            post_span = true;
            if end_lines >= context_lines_after {
                offset += 1;
                break;
            }
        }

        offset += 1;
    }

    if offset >= (span.offset() + span.len()).saturating_sub(1) {
        let starting_offset =
            before_lines_starts.front().copied().unwrap_or(if context_lines_before == 0 { span.offset() } else { 0 });
        Ok(MietteSpanContents::new(
            &input[starting_offset..offset],
            (starting_offset, offset - starting_offset).into(),
            start_line,
            if context_lines_before == 0 { start_column } else { 0 },
            line_count,
        ))
    } else {
        Err(MietteError::OutOfBounds)
    }
}

/// A diagnostic ready for miette (see [`Diagnostic::to_report`]).
#[derive(Debug)]
pub struct Report {
    code: &'static str,
    severity: Severity,
    message: String,
    help: Option<String>,
    source: Option<NamedSource<SourceText>>,
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
    source: NamedSource<SourceText>,
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

/// Renders diagnostics as miette does on a terminal, without colour (for tests, logs and
/// [`crate::compile::compile_path`]).
pub fn render_plain(diagnostics: &[Diagnostic], sources: &Sources) -> String {
    render(diagnostics, sources, false)
}

/// Renders diagnostics as miette does on a terminal, with colour when `colour` is on.
pub fn render(diagnostics: &[Diagnostic], sources: &Sources, colour: bool) -> String {
    let theme = if colour { miette::GraphicalTheme::unicode() } else { miette::GraphicalTheme::unicode_nocolor() };
    let handler = miette::GraphicalReportHandler::new_themed(theme).with_width(100).with_links(false);
    let mut out = String::new();
    for d in diagnostics {
        let report = d.to_report(sources);
        if handler.render_report(&mut out, &report).is_err() {
            out.push_str(&format!("{}: {} [{}]\n", d.severity.as_str(), d.message, d.code));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line-start source gives miette exactly what miette's own scan gives, for every span of a few
    /// texts (empty spans, spans over line breaks, `\r\n`, a lone `\r`, the end of the text) and
    /// several context sizes.
    #[test]
    fn source_text_reads_spans_as_miette_does() {
        let texts = [
            "",
            "a",
            "\n",
            "ab\ncd\n\nef",
            "x\r\ny\r\n\r\nzz\r\n",
            "a\rb\nc",
            "tool T {\n  reads X\n}\n\n\nagent A {}\nlast",
        ];
        for text in texts {
            let source = Source::new("t.permits", text.as_bytes().to_vec());
            let ours = SourceText::new(&source);
            let theirs: &str = text;
            // Spans inside the text, as every diagnostic's (miette's scan panics past the end).
            for start in 0..=text.len() {
                for len in 0..=text.len() - start {
                    for (before, after) in [(0, 0), (1, 1), (2, 0), (0, 3), (5, 5)] {
                        let span = SourceSpan::new(start.into(), len);
                        let a = ours.read_span(&span, before, after);
                        let b = theirs.read_span(&span, before, after);
                        match (a, b) {
                            (Ok(a), Ok(b)) => {
                                let what = format!("{text:?} {start}+{len} ({before}, {after})");
                                assert_eq!(a.data(), b.data(), "{what}");
                                assert_eq!(a.span(), b.span(), "{what}");
                                assert_eq!(
                                    (a.line(), a.column(), a.line_count()),
                                    (b.line(), b.column(), b.line_count()),
                                    "{what}"
                                );
                            }
                            (Err(_), Err(_)) => {}
                            (a, b) => panic!("{text:?} {start}+{len}: {:?} vs {:?}", a.is_ok(), b.is_ok()),
                        }
                    }
                }
            }
        }
    }

    /// A label at the very end of a file (a truncated file's "unexpected end of file") is on no line
    /// miette shows, so miette dropped it; it now points at the file's last character that is not a
    /// line break or a space, whether or not the file ends in a line break.
    #[test]
    fn a_label_at_the_end_of_the_file_is_shown() {
        for (text, line) in [
            ("role A\nrole", " 2 │ role"),
            ("role A\nrole\n", " 2 │ role"),
            ("role A\nrole \r\n\n  \n", " 2 │ role"),
            ("role", " 1 │ role"),
        ] {
            let mut sources = Sources::default();
            let file = sources.add(Source::new("t.permits", text.as_bytes().to_vec()));
            let end = u32::try_from(text.len()).expect("a short text");
            let diagnostic = Diagnostic::new(Code::SyntaxParse, "unexpected end of file")
                .at(Span { file, start: end, end }, "expected a name");
            let out = render_plain(&[diagnostic], &sources);
            assert!(out.contains("expected a name"), "{text:?}:\n{out}");
            assert!(out.contains(line), "{text:?}:\n{out}");
        }
    }

    #[test]
    fn closest_finds_a_near_name_and_not_a_far_one() {
        let names = ["SetPrice", "PartsFor", "NoteRepair"];
        assert_eq!(closest("SetPrise", names), Some("SetPrice"));
        assert_eq!(closest("notereapir", names), Some("NoteRepair"));
        assert_eq!(closest("Deploy", names), None);
    }
}
