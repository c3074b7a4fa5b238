//! `permitc fmt`: one canonical layout for `.permits` files.
//!
//! [`format_file`] parses one file and prints its syntax tree back. A file that does not parse (or has a
//! lexical error, such as a bad string escape) is refused with its diagnostics: we never rewrite what we
//! cannot read. Formatting changes layout only, so no decision, `entry_digest` or `definition_digest`
//! moves (the tests in `tests/fmt.rs` compile every policy before and after to prove it).
//!
//! # The layout
//!
//! It follows how `policies/workshop/` is written:
//!
//! - 4-space indentation, LF line endings, one final newline, no trailing spaces (except inside a doc
//!   comment line that ends in spaces: its text travels into the table, so it is kept byte for byte).
//!   A byte-order mark is dropped.
//! - One declaration per paragraph, with a blank line between declarations. Consecutive one-line
//!   declarations of the same kind (`role`, `person`, `entity`, `queue`, authority statements,
//!   lifetimes) stay together without blank lines, and their bodies are aligned:
//!   `person Mia  { roles [Mechanic] }`, `supervises        [Manager]`. A blank line the author wrote
//!   between two of them is kept and starts a new group.
//! - `tool Name "label" (a: T, b: U) : c + d {` with the body one statement per line. When the header
//!   is longer than 100 columns the claim moves to the next line (`    : c + d`) with `{` on its own
//!   line; when even `tool Name "label" (…)` is too long, the parameters go one per line.
//! - `may {`, `agent … {`, `skill … {` blocks hold one statement per line; an empty block is `{}`.
//!   Inside blocks, one blank line the author wrote between statements is kept (never more than one).
//! - Lists are `[A, B, C]` on one line when the line fits in 100 columns; otherwise one item per line
//!   with a trailing comma. Entity fields and parameters follow the same rule with `{ }` and `( )`.
//!   A list with a comment inside is always written one item per line, so the comment keeps its place.
//! - Conditions are printed with single spaces and the parentheses that precedence needs (`not` binds
//!   tighter than `and`, `and` tighter than `or`), plus those that keep a nested `a or (b or c)` in
//!   the shape it was written, so the condition tree in the table is unchanged. A condition too long
//!   for its line breaks before each top-level `or` (or `and`) with one more indent, and the `and`s
//!   inside an `or` part with two more.
//! - `person P { roles [A] }` and `queue Q { decided_by [A] }` on one line; `person P` without roles.
//! - Strings are re-escaped: `\"`, `\\`, `\n`, `\t`, and control or invisible characters (bidi
//!   controls, zero-width characters) as `\u{…}`.
//!
//! # Comments
//!
//! Every `//` comment is kept, in order. A comment on its own line goes above the node that follows
//! it, at that node's indentation; a comment at the end of a line stays at the end of the line of the
//! node before it. Comments after the last node of a block go before the closing brace, and comments at
//! the end of the file stay at the end. A comment written in the middle of something printed on one
//! line (`route T // x` ⏎ `to role R`) moves above that line, with one exception: a comment between a
//! tool's or function's `)` and the end of its claim puts the claim on a line of its own (`    : c + d`,
//! `{` on the next line), and an extern tool's `pinned "…"` on another when the comment is before it, so
//! the comment stays between the parts it was written between. Doc comments (`///`) stay above their
//! declaration, in order, interleaved with ordinary comments as written.
//!
//! # What is normalized
//!
//! The tree drops a few written details, so formatting normalizes them without changing meaning: a run
//! of `not`s becomes its parity, redundant parentheses go, numbers lose leading zeros, an empty
//! `{ roles [] }` becomes nothing, and `///text` becomes `/// text` (the doc text is the same).

use crate::diagnostics::Diagnostic;
use crate::syntax::ast::*;
use crate::syntax::{Source, Sources, parse_sources};
use crate::table::Literal as Value;

/// The widest a line may be before a list or a condition is broken over several lines.
pub const MAX_WIDTH: usize = 100;

/// Formats one file's text.
///
/// Errors: the file's diagnostics when it does not parse or has a lexical error (a reserved name, a bad
/// escape…); nothing is rewritten then. The diagnostics point into a one-file package whose only file
/// has `FileId(0)`: render them against `Sources` holding `Source::new(path, bytes)`.
pub fn format_file(text: &str) -> Result<String, Vec<Diagnostic>> {
    let mut sources = Sources::default();
    sources.add(Source::new("input.permits", text.as_bytes().to_vec()));
    let loaded = parse_sources(sources);
    if loaded.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(loaded.diagnostics);
    }
    let Some(file) = loaded.package.files.first() else {
        return Err(loaded.diagnostics);
    };
    let src = loaded.sources.text_arc(file.id);
    Ok(Printer::new(&src, file).print_file(file))
}

/// Whether formatting would change `text`: `Ok(true)` when [`format_file`] gives a different text.
///
/// Errors: as [`format_file`].
pub fn needs_formatting(text: &str) -> Result<bool, Vec<Diagnostic>> {
    format_file(text).map(|formatted| formatted != text)
}

// ---------------------------------------------------------------------------------------------
// The printer: output lines that remember which source bytes they print, so comments find their place.

/// Whether a line may be preceded by a blank line the author wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// Keep one blank line written before it in the source.
    Keep,
    /// Never a blank line before it.
    Never,
}

/// One output line.
struct Line {
    indent: usize,
    text: String,
    /// The end of the source the line prints, for a trailing comment; `None` for comments and blanks.
    hi: Option<u32>,
}

/// A comment as written (the text trimmed at the end).
struct Cmt {
    start: u32,
    end: u32,
    text: String,
}

/// One printed piece of a list item: extra indent, the source range it prints, the text.
struct Piece {
    extra: usize,
    lo: u32,
    hi: u32,
    text: String,
}

/// One item of a list: its possible layouts, flattest first; `alts[0]` is one piece.
struct Item {
    alts: Vec<Vec<Piece>>,
}

impl Item {
    fn flat(lo: u32, hi: u32, text: String) -> Item {
        Item { alts: vec![vec![Piece { extra: 0, lo, hi, text }]] }
    }

    fn flat_text(&self) -> &str {
        &self.alts[0][0].text
    }
}

/// The delimiters of a list and where they are written.
struct Delims {
    open: &'static str,
    close: &'static str,
    /// `{ a, b }` rather than `{a, b}`.
    spaced: bool,
    open_pos: u32,
    close_pos: u32,
}

/// A declaration that prints on one line and may be aligned with its neighbours.
struct OneLiner {
    key: u8,
    /// The part padded to the group's width (`person Mia`).
    head: String,
    /// The rest, starting with a space, or empty (`person P` with no roles is not padded).
    tail: String,
}

struct Printer<'s> {
    src: &'s str,
    comments: Vec<Cmt>,
    next: usize,
    lines: Vec<Line>,
    /// The end of the last source printed (a node or a comment).
    last_end: u32,
}

fn width(indent: usize, text: &str) -> usize {
    indent * 4 + text.chars().count()
}

fn fits(indent: usize, text: &str) -> bool {
    width(indent, text) <= MAX_WIDTH
}

impl<'s> Printer<'s> {
    fn new(src: &'s str, file: &File) -> Printer<'s> {
        let comments = file
            .comments
            .iter()
            .map(|c| {
                // Trailing spaces are not part of the comment we print; its end is where its text ends.
                let text = src.get(c.span.start as usize..c.span.end as usize).unwrap_or("").trim_end().to_string();
                Cmt { start: c.span.start, end: c.span.start + text.len() as u32, text }
            })
            .collect();
        Printer { src, comments, next: 0, lines: Vec::new(), last_end: 0 }
    }

    fn slice(&self, lo: u32, hi: u32) -> &'s str {
        self.src.get(lo as usize..hi as usize).unwrap_or("")
    }

    /// The position of the next token at or after `pos`: whitespace and `//` comments skipped.
    fn skip_trivia(&self, mut pos: u32) -> u32 {
        let bytes = self.src.as_bytes();
        loop {
            while (pos as usize) < bytes.len() && bytes[pos as usize].is_ascii_whitespace() {
                pos += 1;
            }
            if self.src.get(pos as usize..).is_some_and(|r| r.starts_with("//")) {
                while (pos as usize) < bytes.len() && bytes[pos as usize] != b'\n' {
                    pos += 1;
                }
            } else {
                return pos;
            }
        }
    }

    /// The closing delimiter after a list's last item (or after its opening delimiter): trivia and one
    /// trailing comma skipped.
    fn close_after(&self, pos: u32) -> u32 {
        let p = self.skip_trivia(pos);
        if self.src.as_bytes().get(p as usize) == Some(&b',') { self.skip_trivia(p + 1) } else { p }
    }

    /// `hi` moved back over whitespace and comments. A rule that ends in an optional or repeated part
    /// (`read X`, `a or b`, `person P`) has a span that runs over the trivia after it, where pest looked
    /// for the optional part.
    fn tight(&self, lo: u32, mut hi: u32) -> u32 {
        let bytes = self.src.as_bytes();
        loop {
            while hi > lo && bytes.get(hi as usize - 1).is_some_and(u8::is_ascii_whitespace) {
                hi -= 1;
            }
            match self.comments.binary_search_by_key(&hi, |c| c.end) {
                Ok(i) if self.comments[i].start >= lo && hi > lo => hi = self.comments[i].start,
                _ => return hi,
            }
        }
    }

    /// Whether a comment starts in `[lo, hi)`.
    fn has_comment(&self, lo: u32, hi: u32) -> bool {
        let first = self.comments.partition_point(|c| c.start < lo);
        self.comments.get(first).is_some_and(|c| c.start < hi)
    }

    /// Whether the source between two positions holds an empty line.
    fn blank_between(&self, lo: u32, hi: u32) -> bool {
        if hi <= lo {
            return false;
        }
        let gap = self.slice(lo, hi);
        let parts: Vec<&str> = gap.split('\n').collect();
        parts.len() > 2 && parts[1..parts.len() - 1].iter().any(|l| l.trim().is_empty())
    }

    fn last_is_blank_or_opener(&self) -> bool {
        match self.lines.last() {
            None => true,
            Some(l) => l.text.is_empty() || l.text.ends_with('{') || l.text.ends_with('[') || l.text.ends_with('('),
        }
    }

    fn blank(&mut self) {
        if !self.last_is_blank_or_opener() {
            self.lines.push(Line { indent: 0, text: String::new(), hi: None });
        }
    }

    fn gap_before(&mut self, pos: u32) {
        if !self.last_is_blank_or_opener() && self.blank_between(self.last_end, pos) {
            self.lines.push(Line { indent: 0, text: String::new(), hi: None });
        }
    }

    fn comment_line(&mut self, indent: usize) {
        let c = &self.comments[self.next];
        let (start, end, text) = (c.start, c.end, c.text.clone());
        self.next += 1;
        self.gap_before(start);
        self.lines.push(Line { indent, text, hi: None });
        self.last_end = self.last_end.max(end);
    }

    /// Every comment before `pos`, on its own line.
    fn leading(&mut self, indent: usize, pos: u32) {
        while self.next < self.comments.len() && self.comments[self.next].start < pos {
            self.comment_line(indent);
        }
    }

    /// A line printing the source `[lo, hi)`: comments before it go above, comments inside it go above
    /// too, and a comment right after it on the same source line goes at its end.
    fn line(&mut self, indent: usize, lo: u32, hi: u32, text: String, gap: Gap) {
        let hi = self.tight(lo, hi);
        self.leading(indent, hi);
        if gap == Gap::Keep {
            self.gap_before(lo);
        }
        self.lines.push(Line { indent, text, hi: Some(hi) });
        self.last_end = self.last_end.max(hi);
        self.trailing();
    }

    /// Attaches the next comment to the last line when only spaces and commas separate them.
    fn trailing(&mut self) {
        let Some(Line { hi: Some(hi), .. }) = self.lines.last() else { return };
        let hi = *hi;
        let Some(c) = self.comments.get(self.next) else { return };
        if c.start < hi || !self.slice(hi, c.start).chars().all(|ch| ch == ' ' || ch == '\t' || ch == ',') {
            return;
        }
        let (end, text) = (c.end, c.text.clone());
        self.next += 1;
        if let Some(line) = self.lines.last_mut() {
            line.text.push(' ');
            line.text.push_str(&text);
            line.hi = None;
        }
        self.last_end = self.last_end.max(end);
    }

    /// The closing line of a block or list: comments before it are inside, one indent deeper. Only
    /// comments before the construct's real end count: a span that runs over the trivia after it (an
    /// extern tool whose one-class claim ends the declaration) does not pull the comments after it in;
    /// they trail the closing line or go above the next node.
    fn close(&mut self, indent: usize, pos: u32, hi: u32, text: &str) {
        let end = self.tight(pos, hi);
        self.leading(indent + 1, end);
        self.line(indent, pos, hi, text.to_string(), Gap::Never);
    }

    /// Whether a block is printed `{}`: no statements and no comment inside.
    fn empty_block(&self, open: u32, close: u32, statements: usize) -> bool {
        statements == 0 && !self.has_comment(open, close)
    }

    fn finish(mut self) -> String {
        self.leading(0, u32::MAX);
        let mut out = String::new();
        for l in &self.lines {
            if !l.text.is_empty() {
                for _ in 0..l.indent {
                    out.push_str("    ");
                }
                out.push_str(&l.text);
            }
            out.push('\n');
        }
        while out.ends_with("\n\n") {
            out.pop();
        }
        if out.trim().is_empty() { String::new() } else { out }
    }

    // -----------------------------------------------------------------------------------------
    // Lists.

    /// Prints `prefix` + a delimited list + `suffix`, on one line when it fits and holds no comment,
    /// else one item per line with a trailing comma. `lo..hi` is the whole construct in the source.
    #[expect(clippy::too_many_arguments, reason = "a list's place, delimiters and surroundings, all needed")]
    fn list(
        &mut self,
        indent: usize,
        lo: u32,
        hi: u32,
        prefix: &str,
        items: &[Item],
        d: &Delims,
        suffix: &str,
        gap: Gap,
    ) {
        let flat = self.flat_list(prefix, items, d, suffix);
        if fits(indent, &flat) && !self.has_comment(d.open_pos, d.close_pos) {
            self.line(indent, lo, hi, flat, gap);
            return;
        }
        self.line(indent, lo, d.open_pos + 1, format!("{prefix}{}", d.open), gap);
        for item in items {
            let chosen = item
                .alts
                .iter()
                .find(|alt| {
                    alt.iter().enumerate().all(|(i, p)| {
                        let comma = if i + 1 == alt.len() { "," } else { "" };
                        fits(indent + 1 + p.extra, &format!("{}{comma}", p.text))
                    })
                })
                .or(item.alts.last());
            let Some(alt) = chosen else { continue };
            for (i, p) in alt.iter().enumerate() {
                let comma = if i + 1 == alt.len() { "," } else { "" };
                self.line(indent + 1 + p.extra, p.lo, p.hi, format!("{}{comma}", p.text), Gap::Never);
            }
        }
        self.close(indent, d.close_pos, hi, &format!("{}{suffix}", d.close));
    }

    fn flat_list(&self, prefix: &str, items: &[Item], d: &Delims, suffix: &str) -> String {
        let inner = items.iter().map(Item::flat_text).collect::<Vec<_>>().join(", ");
        if inner.is_empty() {
            format!("{prefix}{}{}{suffix}", d.open, d.close)
        } else if d.spaced {
            format!("{prefix}{} {inner} {}{suffix}", d.open, d.close)
        } else {
            format!("{prefix}{}{inner}{}{suffix}", d.open, d.close)
        }
    }

    /// The delimiters of a `[..]` list whose `[` is the next token at or after `from`.
    fn brackets(&self, from: u32, names: &[Ident]) -> Delims {
        let open_pos = self.skip_trivia(from);
        let close_pos = self.close_after(names.last().map_or(open_pos + 1, |n| n.span.end));
        Delims { open: "[", close: "]", spaced: false, open_pos, close_pos }
    }

    fn name_items(names: &[Ident]) -> Vec<Item> {
        names.iter().map(|n| Item::flat(n.span.start, n.span.end, n.name.clone())).collect()
    }

    /// `keyword [A, B]`, the statement spanning `span`.
    fn name_list_stmt(&mut self, indent: usize, span: Span, kw: &str, names: &[Ident]) {
        let d = self.brackets(span.start + kw.len() as u32, names);
        self.list(indent, span.start, span.end, &format!("{kw} "), &Self::name_items(names), &d, "", Gap::Keep);
    }

    /// `delegates [Agent.Skill, ..]`, the statement spanning `span`.
    fn delegates(&mut self, indent: usize, refs: &[DelegateRef], span: Span) {
        let open_pos = self.skip_trivia(span.start + "delegates".len() as u32);
        let close_pos = self.close_after(refs.last().map_or(open_pos + 1, |r| r.span.end));
        let d = Delims { open: "[", close: "]", spaced: false, open_pos, close_pos };
        let items: Vec<Item> = refs
            .iter()
            .map(|r| Item::flat(r.span.start, r.span.end, format!("{}.{}", r.agent.name, r.skill.name)))
            .collect();
        self.list(indent, span.start, span.end, "delegates ", &items, &d, "", Gap::Keep);
    }

    // -----------------------------------------------------------------------------------------
    // Files and declarations.

    fn print_file(mut self, file: &File) -> String {
        let one_liners: Vec<Option<OneLiner>> = file.declarations.iter().map(|d| self.one_liner(d)).collect();
        // Groups of one-liners: same kind, consecutive, no blank line written between them.
        let mut group_of = vec![0usize; file.declarations.len()];
        for i in 1..file.declarations.len() {
            let same = match (&one_liners[i - 1], &one_liners[i]) {
                (Some(a), Some(b)) => {
                    a.key == b.key
                        && !self.blank_between(
                            self.tight(file.declarations[i - 1].span.start, file.declarations[i - 1].span.end),
                            file.declarations[i].span.start,
                        )
                }
                _ => false,
            };
            group_of[i] = if same { group_of[i - 1] } else { i };
        }
        // Each group's padding: the widest padded head, or none when padding would make a line too long.
        let mut pad_of = vec![0usize; file.declarations.len()];
        let mut start = 0;
        while start < file.declarations.len() {
            let end =
                (start..file.declarations.len()).find(|&j| group_of[j] != start).unwrap_or(file.declarations.len());
            let members: Vec<&OneLiner> = one_liners[start..end].iter().flatten().collect();
            let pad = members.iter().filter(|m| !m.tail.is_empty()).map(|m| m.head.chars().count()).max().unwrap_or(0);
            let widest =
                members.iter().filter(|m| !m.tail.is_empty()).map(|m| pad + m.tail.chars().count()).max().unwrap_or(0);
            pad_of[start] = if widest <= MAX_WIDTH { pad } else { 0 };
            start = end;
        }
        for (i, decl) in file.declarations.iter().enumerate() {
            if i > 0 && group_of[i] != group_of[i - 1] {
                self.blank();
            }
            match &one_liners[i] {
                Some(one) => {
                    let pad = pad_of[group_of[i]];
                    let text =
                        if one.tail.is_empty() { one.head.clone() } else { format!("{:<pad$}{}", one.head, one.tail) };
                    let lo = self.header(decl);
                    self.line(0, lo, decl.span.end, text, Gap::Keep);
                }
                None => self.declaration(decl),
            }
        }
        self.finish()
    }

    /// Prints the doc comments (and comments among them) of a declaration; returns where its keyword is.
    fn header(&mut self, decl: &Declaration) -> u32 {
        let mut pos = decl.span.start;
        let mut docs = decl.docs.iter();
        loop {
            pos = self.skip_spaces(pos);
            let rest = self.src.get(pos as usize..).unwrap_or("");
            if rest.starts_with("///") && !rest.starts_with("////") {
                let eol = pos + rest.find(['\r', '\n']).unwrap_or(rest.len()) as u32;
                let text = match docs.next() {
                    Some(d) if d.is_empty() => "///".to_string(),
                    Some(d) => format!("/// {d}"),
                    None => "///".to_string(),
                };
                self.line(0, pos, eol, text, Gap::Keep);
                pos = eol;
            } else if rest.starts_with("//") {
                pos += rest.find('\n').unwrap_or(rest.len()) as u32;
            } else {
                return pos;
            }
        }
    }

    fn skip_spaces(&self, mut pos: u32) -> u32 {
        let bytes = self.src.as_bytes();
        while (pos as usize) < bytes.len() && bytes[pos as usize].is_ascii_whitespace() {
            pos += 1;
        }
        pos
    }

    /// The one-line form of a groupable declaration, when it has no doc, fits and has no comment inside
    /// a list.
    fn one_liner(&self, decl: &Declaration) -> Option<OneLiner> {
        if !decl.docs.is_empty() {
            return None;
        }
        let names = |v: &[Ident]| v.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ");
        let one = match &decl.kind {
            DeclarationKind::Role(r) => OneLiner { key: 0, head: format!("role {}", r.name.name), tail: String::new() },
            DeclarationKind::Person(p) => {
                if p.roles.is_empty() {
                    OneLiner { key: 1, head: format!("person {}", p.name.name), tail: String::new() }
                } else {
                    let (open, close) = self.person_brackets(p);
                    if self.has_comment(open, close) {
                        return None;
                    }
                    OneLiner {
                        key: 1,
                        head: format!("person {}", p.name.name),
                        tail: format!(" {{ roles [{}] }}", names(&p.roles)),
                    }
                }
            }
            DeclarationKind::Queue(q) => {
                let tail = if q.decided_by.is_empty() {
                    " {}".to_string()
                } else {
                    let (open, close) = self.queue_brackets(q);
                    if self.has_comment(open, close) {
                        return None;
                    }
                    format!(" {{ decided_by [{}] }}", names(&q.decided_by))
                };
                OneLiner { key: 2, head: format!("queue {}", q.name.name), tail }
            }
            DeclarationKind::Entity(e) => {
                let open = self.skip_trivia(e.name.span.end);
                if self.has_comment(open, decl.span.end) {
                    return None;
                }
                let tail = if e.fields.is_empty() { " {}".to_string() } else { format!(" {{ {} }}", names(&e.fields)) };
                OneLiner { key: 3, head: format!("entity {}", e.name.name), tail }
            }
            DeclarationKind::Authority(a) => {
                let kw = authority_keyword(a.kind);
                let kw_pos = self.skip_trivia(decl.span.start);
                let d = self.brackets(kw_pos + kw.len() as u32, &a.holders);
                if self.has_comment(d.open_pos, d.close_pos) {
                    return None;
                }
                OneLiner { key: 4, head: kw.to_string(), tail: format!(" [{}]", names(&a.holders)) }
            }
            DeclarationKind::Lifetime(l) => {
                let kw = match l.kind {
                    LifetimeKind::Proposal => "proposal_lifetime",
                    LifetimeKind::Grant => "grant_lifetime",
                };
                OneLiner {
                    key: 5,
                    head: kw.to_string(),
                    tail: format!(" {}", self.slice(l.value_span.start, l.value_span.end)),
                }
            }
            _ => return None,
        };
        fits(0, &format!("{}{}", one.head, one.tail)).then_some(one)
    }

    /// `[` and `]` of `person P { roles [..] }`.
    fn person_brackets(&self, p: &Person) -> (u32, u32) {
        let brace = self.skip_trivia(p.name.span.end);
        let kw = self.skip_trivia(brace + 1);
        let d = self.brackets(kw + "roles".len() as u32, &p.roles);
        (d.open_pos, d.close_pos)
    }

    /// `[` and `]` of `queue Q { decided_by [..] }`.
    fn queue_brackets(&self, q: &Queue) -> (u32, u32) {
        let brace = self.skip_trivia(q.name.span.end);
        let kw = self.skip_trivia(brace + 1);
        let d = self.brackets(kw + "decided_by".len() as u32, &q.decided_by);
        (d.open_pos, d.close_pos)
    }

    fn declaration(&mut self, decl: &Declaration) {
        let lo = self.header(decl);
        let end = decl.span.end;
        match &decl.kind {
            DeclarationKind::Role(r) => self.line(0, lo, end, format!("role {}", r.name.name), Gap::Keep),
            DeclarationKind::Person(p) => {
                if p.roles.is_empty() {
                    self.line(0, lo, end, format!("person {}", p.name.name), Gap::Keep);
                } else {
                    let (open_pos, close_pos) = self.person_brackets(p);
                    let d = Delims { open: "[", close: "]", spaced: false, open_pos, close_pos };
                    let prefix = format!("person {} {{ roles ", p.name.name);
                    self.list(0, lo, end, &prefix, &Self::name_items(&p.roles), &d, " }", Gap::Keep);
                }
            }
            DeclarationKind::Queue(q) => {
                if q.decided_by.is_empty() && !self.has_comment(lo, end) {
                    self.line(0, lo, end, format!("queue {} {{}}", q.name.name), Gap::Keep);
                } else if q.decided_by.is_empty() {
                    let open = self.skip_trivia(q.name.span.end);
                    self.line(0, lo, open + 1, format!("queue {} {{", q.name.name), Gap::Keep);
                    self.close(0, end - 1, end, "}");
                } else {
                    let (open_pos, close_pos) = self.queue_brackets(q);
                    let d = Delims { open: "[", close: "]", spaced: false, open_pos, close_pos };
                    let prefix = format!("queue {} {{ decided_by ", q.name.name);
                    self.list(0, lo, end, &prefix, &Self::name_items(&q.decided_by), &d, " }", Gap::Keep);
                }
            }
            DeclarationKind::Entity(e) => {
                let open_pos = self.skip_trivia(e.name.span.end);
                let d = Delims { open: "{", close: "}", spaced: true, open_pos, close_pos: end - 1 };
                self.list(
                    0,
                    lo,
                    end,
                    &format!("entity {} ", e.name.name),
                    &Self::name_items(&e.fields),
                    &d,
                    "",
                    Gap::Keep,
                );
            }
            DeclarationKind::Budget(b) => {
                let open_pos = self.skip_trivia(b.name.span.end);
                let d = Delims { open: "{", close: "}", spaced: true, open_pos, close_pos: end - 1 };
                let items: Vec<Item> = b
                    .fields
                    .iter()
                    .map(|f| {
                        let value = f.value.span();
                        let text = format!("{}: {}", f.key.name, self.slice(value.start, value.end));
                        Item::flat(f.span.start, f.span.end, text)
                    })
                    .collect();
                self.list(0, lo, end, &format!("budget {} ", b.name.name), &items, &d, "", Gap::Keep);
            }
            DeclarationKind::Authority(a) => {
                let span = Span { file: decl.span.file, start: lo, end };
                self.name_list_stmt(0, span, authority_keyword(a.kind), &a.holders);
            }
            DeclarationKind::Lifetime(l) => {
                let kw = match l.kind {
                    LifetimeKind::Proposal => "proposal_lifetime",
                    LifetimeKind::Grant => "grant_lifetime",
                };
                let text = format!("{kw} {}", self.slice(l.value_span.start, l.value_span.end));
                self.line(0, lo, end, text, Gap::Keep);
            }
            DeclarationKind::Tool(t) => self.tool(lo, end, t),
            DeclarationKind::Function(f) => self.function(lo, end, f),
            DeclarationKind::May(m) => self.may(0, m, Gap::Keep),
            DeclarationKind::Agent(a) => {
                let after = a.purpose.as_ref().map_or(a.name.span.end, |p| p.span.end);
                let purpose = a.purpose.as_ref().map(|p| format!(" {}", quote(&p.value))).unwrap_or_default();
                let head = format!("agent {}{purpose}", a.name.name);
                let open = self.skip_trivia(after);
                self.block_header(0, lo, open, end - 1, &head, a.statements.len());
                for s in &a.statements {
                    self.agent_statement(1, s);
                }
                self.block_end(0, open, end - 1, a.statements.len());
            }
            DeclarationKind::Skill(s) => {
                let after = s.description.as_ref().map_or(s.name.span.end, |p| p.span.end);
                let desc = s.description.as_ref().map(|p| format!(" {}", quote(&p.value))).unwrap_or_default();
                let head = format!("skill {}{desc}", s.name.name);
                let open = self.skip_trivia(after);
                self.block_header(0, lo, open, end - 1, &head, s.statements.len());
                for st in &s.statements {
                    match st {
                        SkillStatement::Tools(names, span) => self.name_list_stmt(1, *span, "tools", names),
                        SkillStatement::May(m) => self.may(1, m, Gap::Keep),
                        SkillStatement::Route(r) => self.route(1, r),
                        SkillStatement::Delegates(refs, span) => self.delegates(1, refs, *span),
                    }
                }
                self.block_end(0, open, end - 1, s.statements.len());
            }
            DeclarationKind::Mode(m) => {
                let after = m.description.as_ref().map_or(m.name.span.end, |p| p.span.end);
                let desc = m.description.as_ref().map(|p| format!(" {}", quote(&p.value))).unwrap_or_default();
                let head = format!("mode {}{desc}", m.name.name);
                let open = self.skip_trivia(after);
                self.block_header(0, lo, open, end - 1, &head, m.statements.len());
                for st in &m.statements {
                    match st {
                        ModeStatement::May(b) => self.may(1, b, Gap::Keep),
                        ModeStatement::Unattended(span) => {
                            self.line(1, span.start, span.end, "unattended".to_string(), Gap::Keep)
                        }
                    }
                }
                self.block_end(0, open, end - 1, m.statements.len());
            }
            DeclarationKind::Test(t) => {
                let head = format!("test {}", quote(&t.name.value));
                let open = self.skip_trivia(t.name.span.end);
                self.block_header(0, lo, open, end - 1, &head, t.expects.len());
                for e in &t.expects {
                    self.expect(1, e);
                }
                self.block_end(0, open, end - 1, t.expects.len());
            }
        }
    }

    /// `expect A.S.T(name: value, …) in Mode is level`; no parentheses without arguments.
    fn expect(&mut self, indent: usize, e: &Expect) {
        let call = format!("expect {}.{}.{}", e.agent.name, e.skill.name, e.tool.name);
        let via: String = e.via.iter().map(|r| format!(" via {}.{}", r.agent.name, r.skill.name)).collect();
        let in_mode = e.mode.as_ref().map(|m| format!(" in {}", m.name)).unwrap_or_default();
        let suffix = format!("{via}{in_mode} is {}", e.level.as_str());
        if e.args.is_empty() {
            self.line(indent, e.span.start, e.span.end, format!("{call}{suffix}"), Gap::Keep);
            return;
        }
        let open_pos = self.skip_trivia(e.tool.span.end);
        let close_pos = self.close_after(e.args.last().map_or(open_pos + 1, |(_, v)| v.span.end));
        let d = Delims { open: "(", close: ")", spaced: false, open_pos, close_pos };
        let items: Vec<Item> = e
            .args
            .iter()
            .map(|(n, v)| Item::flat(n.span.start, v.span.end, format!("{}: {}", n.name, literal(&v.value))))
            .collect();
        self.list(indent, e.span.start, e.span.end, &call, &items, &d, &suffix, Gap::Keep);
    }

    /// `head {` (or `head {}` for an empty block).
    fn block_header(&mut self, indent: usize, lo: u32, open: u32, close: u32, head: &str, statements: usize) {
        if self.empty_block(open, close, statements) {
            self.line(indent, lo, close + 1, format!("{head} {{}}"), Gap::Keep);
        } else {
            self.line(indent, lo, open + 1, format!("{head} {{"), Gap::Keep);
        }
    }

    fn block_end(&mut self, indent: usize, open: u32, close: u32, statements: usize) {
        if !self.empty_block(open, close, statements) {
            self.close(indent, close, close + 1, "}");
        }
    }

    fn agent_statement(&mut self, indent: usize, s: &AgentStatement) {
        match s {
            AgentStatement::ActsAs(names, span) => self.name_list_stmt(indent, *span, "acts_as", names),
            AgentStatement::Sponsor(p, span) => {
                self.line(indent, span.start, span.end, format!("sponsor {}", p.name), Gap::Keep)
            }
            AgentStatement::May(m) => self.may(indent, m, Gap::Keep),
            AgentStatement::Skills(names, span) => self.name_list_stmt(indent, *span, "skills", names),
            AgentStatement::Route(r) => self.route(indent, r),
        }
    }

    fn route(&mut self, indent: usize, r: &RouteStmt) {
        let to = match &r.target {
            RouteTarget::Person(p) => format!("person {}", p.name),
            RouteTarget::Role(p) => format!("role {}", p.name),
            RouteTarget::Queue(p) => format!("queue {}", p.name),
            RouteTarget::Requester(_) => "requester".to_string(),
        };
        self.line(indent, r.span.start, r.span.end, format!("route {} to {to}", r.tool.name), Gap::Keep);
    }

    fn may(&mut self, indent: usize, m: &MayBlock, gap: Gap) {
        let open = self.skip_trivia(m.span.start + "may".len() as u32);
        let close = m.span.end - 1;
        if self.empty_block(open, close, m.statements.len()) {
            self.line(indent, m.span.start, m.span.end, "may {}".to_string(), gap);
            return;
        }
        self.line(indent, m.span.start, open + 1, "may {".to_string(), gap);
        for s in &m.statements {
            match s {
                MayStatement::Preset(p, span) => {
                    let word = match p {
                        Preset::Everything => "everything",
                        Preset::ChangesAlone => "changes_alone",
                    };
                    self.line(indent + 1, span.start, span.end, word.to_string(), Gap::Keep);
                }
                MayStatement::Setting(c) => {
                    let text = format!("{}: {}", c.class.as_str(), c.level.as_str());
                    self.line(indent + 1, c.span.start, c.span.end, text, Gap::Keep);
                }
                MayStatement::List(l) => self.tool_list(indent + 1, l),
            }
        }
        self.close(indent, close, m.span.end, "}");
    }

    fn tool_list(&mut self, indent: usize, l: &ToolList) {
        let kw = l.level.as_str();
        let open_pos = self.skip_trivia(l.span.start + kw.len() as u32);
        let close_pos = l.span.end - 1;
        let d = Delims { open: "[", close: "]", spaced: false, open_pos, close_pos };
        let items: Vec<Item> = l.entries.iter().map(entry_item).collect();
        self.list(indent, l.span.start, l.span.end, &format!("{kw} "), &items, &d, "", Gap::Keep);
    }

    // -----------------------------------------------------------------------------------------
    // Tools and functions.

    fn tool(&mut self, lo: u32, end: u32, t: &Tool) {
        let kw = match t.kind {
            ToolKind::Defined => "tool",
            ToolKind::Extern => "extern tool",
        };
        let label = t.label.as_ref().map(|l| format!(" {}", quote(&l.value))).unwrap_or_default();
        let prefix = format!("{kw} {}{label} ", t.name.name);
        let after = t.label.as_ref().map_or(t.name.span.end, |l| l.span.end);
        let body = t.body_span.map(|b| (b.start, b.end - 1));
        self.callable(lo, end, &prefix, after, &t.params, (t.claim.as_ref(), t.pinned.as_ref()), body, &t.body);
    }

    fn function(&mut self, lo: u32, end: u32, f: &Function) {
        let prefix = format!("fn {}", f.name.name);
        let paren = self.skip_trivia(f.name.span.end);
        let close_paren = self.close_after(f.params.last().map_or(paren + 1, |p| p.span.end));
        let after_sig = f.claim.as_ref().map_or(close_paren + 1, |c| c.span.end);
        let open = self.skip_trivia(after_sig);
        let sig_tail = (f.claim.as_ref(), None);
        self.callable(lo, end, &prefix, f.name.span.end, &f.params, sig_tail, Some((open, end - 1)), &f.body);
    }

    /// A tool's or function's header and body. `after` is where the `(` is searched from; `tail` is the
    /// claim and an extern tool's `pinned` digest; `body` is where the braces are, when there is a body.
    #[expect(clippy::too_many_arguments, reason = "the parts of a tool and of a function, printed alike")]
    fn callable(
        &mut self,
        lo: u32,
        end: u32,
        prefix: &str,
        after: u32,
        params: &[Param],
        tail: (Option<&Claim>, Option<&StringLit>),
        body: Option<(u32, u32)>,
        stmts: &[Statement],
    ) {
        let (claim, pinned) = tail;
        let open_paren = self.skip_trivia(after);
        let close_paren = self.close_after(params.last().map_or(open_paren + 1, |p| p.span.end));
        let pin_text = pinned.map(|p| format!("pinned {}", quote(&p.value)));
        let classes_text =
            claim.map(|c| format!(": {}", c.classes.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(" + ")));
        let claim_text = match (&classes_text, &pin_text) {
            (Some(classes), Some(pin)) => Some(format!("{classes} {pin}")),
            (Some(one), None) | (None, Some(one)) => Some(one.clone()),
            (None, None) => None,
        };
        // Where the claim (and the pin after it) is written, as one piece of the header.
        let claim_span = match (claim, pinned) {
            (Some(c), Some(p)) => Some((c.span.start, p.span.end)),
            (Some(c), None) => Some((c.span.start, c.span.end)),
            (None, Some(p)) => Some((self.skip_trivia(close_paren + 1), p.span.end)),
            (None, None) => None,
        };
        let empty = body.is_some_and(|(o, c)| self.empty_block(o, c, stmts.len()));
        let body_sfx = match body {
            None => "",
            Some(_) if empty => " {}",
            Some(_) => " {",
        };
        let header_hi = match body {
            Some((_, c)) if empty => c + 1,
            Some((o, _)) => o + 1,
            None => claim_span.map_or(close_paren + 1, |(_, e)| e),
        };
        let items: Vec<Item> = params
            .iter()
            .map(|p| {
                let mark = if p.optional { "?" } else { "" };
                Item::flat(p.span.start, p.span.end, format!("{}{mark}: {}", p.name.name, p.ty.name))
            })
            .collect();
        let d = Delims { open: "(", close: ")", spaced: false, open_pos: open_paren, close_pos: close_paren };
        let claim_sfx = claim_text.as_ref().map(|c| format!(" {c}")).unwrap_or_default();
        let sig = self.flat_list(prefix, &items, &d, "");
        let whole = format!("{sig}{claim_sfx}{body_sfx}");
        let params_commented = self.has_comment(open_paren, close_paren);
        // A comment between `)` and the end of the claim or pin would be pulled above the line that
        // prints `) : claim`, into the parameter list: the claim goes on a line of its own instead, and
        // the pin on another when the comment is before it, so each comment stays where it was written.
        let claim_commented = claim_span.is_some_and(|(c_lo, c_hi)| {
            let end = self.tight(c_lo, c_hi);
            self.has_comment(close_paren + 1, end)
        });
        let too_wide = !params_commented && !fits(0, &whole) && fits(0, &sig);
        match claim_span {
            Some((c_lo, c_hi)) if claim_commented || too_wide => {
                if params_commented || !fits(0, &sig) {
                    self.list(0, lo, close_paren + 1, prefix, &items, &d, "", Gap::Keep);
                } else {
                    self.line(0, lo, close_paren + 1, sig, Gap::Keep);
                }
                match (claim, pinned, &classes_text, &pin_text) {
                    (Some(c), Some(p), Some(classes), Some(pin))
                        if self.has_comment(self.tight(c.span.start, c.span.end), p.span.start) =>
                    {
                        self.line(1, c.span.start, c.span.end, classes.clone(), Gap::Never);
                        self.line(1, p.span.start, p.span.end, pin.clone(), Gap::Never);
                    }
                    _ => self.line(1, c_lo, c_hi, claim_text.clone().unwrap_or_default(), Gap::Never),
                }
                if let Some((o, cl)) = body {
                    if empty {
                        self.line(0, o, cl + 1, "{}".to_string(), Gap::Never);
                    } else {
                        self.line(0, o, o + 1, "{".to_string(), Gap::Never);
                    }
                }
            }
            _ => self.list(0, lo, header_hi, prefix, &items, &d, &format!("{claim_sfx}{body_sfx}"), Gap::Keep),
        }
        if let Some((_, cl)) = body.filter(|_| !empty) {
            for s in stmts {
                self.statement(1, s);
            }
            self.close(0, cl, end.max(cl + 1), "}");
        }
    }

    fn statement(&mut self, indent: usize, s: &Statement) {
        let text = match &s.kind {
            StatementKind::Read(e) => format!("read {}", entity_ref(e)),
            StatementKind::Write(e) => format!("write {}", entity_ref(e)),
            StatementKind::Create(e) => format!("create {}", entity_ref(e)),
            StatementKind::Delete(e) => format!("delete {}", entity_ref(e)),
            StatementKind::Send(t) => format!("send {}", target(t)),
            StatementKind::Reach(t) => format!("reach {}", target(t)),
            StatementKind::Spend { budget, by } => format!("spend {} by {}", budget.name, by.name),
            StatementKind::Call(f) => format!("call {}", f.name),
            StatementKind::CallAny(names) => {
                let any = self.skip_trivia(s.span.start + "call".len() as u32);
                let d = self.brackets(any + "any".len() as u32, names);
                self.list(indent, s.span.start, s.span.end, "call any ", &Self::name_items(names), &d, "", Gap::Keep);
                return;
            }
            StatementKind::CallDynamic => "call dynamic".to_string(),
            StatementKind::Version { param, field } => format!("version {}.{}", param.name, field.name),
            StatementKind::Subject(p) => format!("subject {}", p.name),
        };
        self.line(indent, s.span.start, s.span.end, text, Gap::Keep);
    }
}

fn authority_keyword(kind: AuthorityKind) -> &'static str {
    match kind {
        AuthorityKind::Supervises => "supervises",
        AuthorityKind::DecidesProposals => "decides_proposals",
        AuthorityKind::WidensAutonomy => "widens_autonomy",
    }
}

fn entity_ref(e: &EntityRef) -> String {
    match &e.field {
        Some(f) => format!("{}.{}", e.entity.name, f.name),
        None => e.entity.name.clone(),
    }
}

fn target(t: &Target) -> String {
    if t.quoted { quote(&t.text) } else { t.text.clone() }
}

// ---------------------------------------------------------------------------------------------
// Conditions.

/// Binding strength: `or` 1, `and` 2, `not` 3, a comparison 4.
fn precedence(c: &ConditionExpr) -> u8 {
    match c.kind {
        ConditionExprKind::Or(_) => 1,
        ConditionExprKind::And(_) => 2,
        ConditionExprKind::Not(_) => 3,
        _ => 4,
    }
}

/// A condition as text, in parentheses when it binds more loosely than `outer` requires.
fn condition(c: &ConditionExpr, outer: u8) -> String {
    let text = match &c.kind {
        // A part of an `or` that is itself an `or` keeps its parentheses (outer 2), and likewise for
        // `and` (outer 3), so the tree does not change shape.
        ConditionExprKind::Or(parts) => parts.iter().map(|p| condition(p, 2)).collect::<Vec<_>>().join(" or "),
        ConditionExprKind::And(parts) => parts.iter().map(|p| condition(p, 3)).collect::<Vec<_>>().join(" and "),
        ConditionExprKind::Not(inner) => format!("not {}", condition(inner, 4)),
        ConditionExprKind::Compare { param, op, value } => {
            format!("{} {} {}", param.name, op.as_str(), literal(&value.value))
        }
        ConditionExprKind::In { param, values } => {
            format!("{} in [{}]", param.name, values.iter().map(|v| literal(&v.value)).collect::<Vec<_>>().join(", "))
        }
        ConditionExprKind::Matches { param, glob } => format!("{} matches {}", param.name, quote(&glob.value)),
    };
    if precedence(c) < outer { format!("({text})") } else { text }
}

fn literal(v: &LiteralValue) -> String {
    match v {
        LiteralValue::Value(Value::Int(n)) => n.to_string(),
        LiteralValue::Value(Value::String(s)) => quote(s),
        LiteralValue::Value(Value::Bool(b)) => b.to_string(),
        LiteralValue::Value(Value::Number(n)) => n.to_string(),
        // As written (`2.50` stays `2.50`): `fmt` never changes what a file says.
        LiteralValue::Decimal(text) => text.clone(),
    }
}

/// A list entry's layouts: flat; broken before each top-level `or`/`and`; and, inside an `or`, also
/// before each `and` of its parts.
fn entry_item(e: &ListEntry) -> Item {
    let name = &e.tool.name;
    let Some(cond) = &e.condition else {
        return Item::flat(e.span.start, e.span.end, name.clone());
    };
    let mut alts = vec![vec![Piece {
        extra: 0,
        lo: e.span.start,
        hi: e.span.end,
        text: format!("{name} when {}", condition(cond, 0)),
    }]];
    let (parts, word, inner_outer) = match &cond.kind {
        ConditionExprKind::Or(parts) => (parts, "or", 2),
        ConditionExprKind::And(parts) => (parts, "and", 3),
        _ => return Item { alts },
    };
    let lead = |i: usize, text: String| if i == 0 { format!("{name} when {text}") } else { format!("{word} {text}") };
    let piece_lo = |i: usize, p: &ConditionExpr| if i == 0 { e.span.start } else { p.span.start };
    let last = parts.len() - 1;
    let piece_hi = |i: usize, p: &ConditionExpr| if i == last { e.span.end } else { p.span.end };
    alts.push(
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| Piece {
                extra: usize::from(i > 0),
                lo: piece_lo(i, p),
                hi: piece_hi(i, p),
                text: lead(i, condition(p, inner_outer)),
            })
            .collect(),
    );
    if word == "or" && parts.iter().any(|p| matches!(p.kind, ConditionExprKind::And(_))) {
        let mut deep = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            match &p.kind {
                ConditionExprKind::And(ands) => {
                    let n = ands.len();
                    for (j, q) in ands.iter().enumerate() {
                        let lo = if j == 0 { piece_lo(i, p) } else { q.span.start };
                        let hi = if i == last && j + 1 == n { e.span.end } else { q.span.end };
                        let text = if j == 0 { lead(i, condition(q, 3)) } else { format!("and {}", condition(q, 3)) };
                        let extra = if j == 0 { usize::from(i > 0) } else { 2 };
                        deep.push(Piece { extra, lo, hi, text });
                    }
                }
                _ => deep.push(Piece {
                    extra: usize::from(i > 0),
                    lo: piece_lo(i, p),
                    hi: piece_hi(i, p),
                    text: lead(i, condition(p, 2)),
                }),
            }
        }
        alts.push(deep);
    }
    Item { alts }
}

// ---------------------------------------------------------------------------------------------
// Strings.

/// A string literal with its value re-escaped: `\"`, `\\`, `\n`, `\t`, and `\u{…}` for control and
/// invisible characters, so what a reviewer sees is what the string holds.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || invisible(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Characters that change how text reads without showing: bidi controls, zero-width characters, the
/// line and paragraph separators and the byte-order mark.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(text: &str) -> String {
        match format_file(text) {
            Ok(s) => s,
            Err(d) => panic!("does not parse: {d:?}"),
        }
    }

    #[test]
    fn strings_are_re_escaped() {
        assert_eq!(quote("a\"b\\c\nd\te\u{7}f\u{202e}g é"), "\"a\\\"b\\\\c\\nd\\te\\u{7}f\\u{202e}g é\"");
    }

    #[test]
    fn conditions_keep_the_parentheses_that_matter() {
        let out = fmt(
            "agent A { may { never [M when (a == 1 or b == 2) and not (c == 3) and not not d == 4 or (e == 5 or f == 6)] } }",
        );
        assert!(
            out.contains("never [M when (a == 1 or b == 2) and not c == 3 and d == 4 or (e == 5 or f == 6)]"),
            "{out}"
        );
    }

    #[test]
    fn formatting_is_idempotent_on_a_small_file() {
        let once = fmt("role  A\nrole B // b\n\n\ntool T \"t\" ( x : string , ) : reads { read E.f }\n");
        assert_eq!(once, "role A\nrole B // b\n\ntool T \"t\" (x: string) : reads {\n    read E.f\n}\n");
        assert_eq!(fmt(&once), once);
    }

    #[test]
    fn empty_files_stay_empty() {
        assert_eq!(fmt(""), "");
        assert_eq!(fmt("\n\n  \n"), "");
        assert_eq!(fmt("// only a comment\n\n"), "// only a comment\n");
    }

    #[test]
    fn a_file_that_does_not_parse_is_refused() {
        assert!(format_file("tool T \"x\" () { wirte Repair }\n").is_err());
        assert!(format_file("agent A \"\\q\" { }\n").is_err());
    }
}
