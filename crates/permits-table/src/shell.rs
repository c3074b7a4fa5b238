//! The `shell` parameter: a command line read part by part (spec §3a).
//!
//! A `shell` argument is never compared as one string. [`split`] reads it with the whitelist grammar of
//! spec §3a and returns its parts, each normalized (quotes removed, words joined by one space, descriptor
//! duplications dropped), or says why the line is **not judgeable**, naming the first offending character
//! and its column. A line that is not judgeable makes the call `never`, whatever the conditions say.
//!
//! ```text
//! line   = part (sep part)*        no empty part: a leading, trailing or doubled separator is not judgeable
//! sep    = blank* (";" | "&&" | "||" | "|" | "&" | LF) blank*
//! part   = blank* word (blank+ (word | dup))* blank*
//! dup    = DIGIT? (">&" | "<&") DIGIT              descriptor duplication only, e.g. 2>&1
//! word   = (plain | squote | dquote)+
//! plain  = one of  A-Z a-z 0-9 _ . / : = @ % + , -
//! squote = "'" any byte but "'" and controls "'"   (no escapes inside single quotes, as in POSIX)
//! dquote = '"' any byte but '"', "$", "`", "\", controls '"'
//! blank  = space | tab
//! ```
//!
//! On top of the grammar, a part is not judgeable when its first word (quotes removed) is a shell reserved
//! word or holds `=` anywhere (quoted or not: an assignment prefix such as `X=1 cmd`), as spec §3a says; and,
//! **beyond the spec**, when its first word begins with `%` ([`Why::JobSpec`]). The grammar lists `%` as plain,
//! but bash hands a command such as `%1` to its `fg` builtin even under `sh -c` without job control, so the
//! line would not be read "exactly as `sh` reads it" wherever `sh` is bash (the bash differential test
//! `bash_reads_a_leading_percent_as_a_job` shows it). `%` anywhere else is plain (`kill %1`, `x%`).
//! "Controls" are the bytes below 0x20 and 0x7F; LF outside quotes is a separator, inside quotes it is a
//! control. Columns are 1-based and count characters (Unicode scalar values), not bytes.
//!
//! [`pattern_can_match_part`] is the compiler's side of the same section: a condition on a `shell` parameter
//! whose pattern or literal holds a separator or a character no part can hold is refused.
//!
//! The lexer is one pass over the bytes, without recursion or backtracking (a duplication looks at most four
//! bytes ahead); it allocates only its output, and an error counts its column once.

use std::fmt;

/// A judgeable `shell` argument: its parts in the order they appear (spec §3a `line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellLine {
    /// The parts; never empty.
    pub parts: Vec<ShellPart>,
}

/// One part of a line: a simple command, normalized (spec §3a).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellPart {
    /// The words as the shell passes them to the program (its argv): quotes removed, duplications dropped.
    /// Never empty; a word may be empty (`''`), as the shell passes an empty argument.
    pub words: Vec<String>,
    /// The normalized part that conditions are evaluated on: `words` joined by one space. An empty word
    /// therefore shows as a doubled space (`a '' b` reads `a  b`), and a quoted blank stays (`'a  b'`).
    pub text: String,
    /// The separator after this part, or `None` for the last part.
    pub followed_by: Option<Separator>,
}

/// A separator between two parts (spec §3a `sep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Separator {
    /// `;`
    Semicolon,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `|`
    Pipe,
    /// `&` (the part before it runs in the background)
    Background,
    /// a line feed
    Newline,
}

impl Separator {
    /// The separator as written; a line feed is `\n`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Separator::Semicolon => ";",
            Separator::And => "&&",
            Separator::Or => "||",
            Separator::Pipe => "|",
            Separator::Background => "&",
            Separator::Newline => "\n",
        }
    }
}

/// Why a `shell` argument is not judgeable: the first offending character, its column and the reason
/// (spec §3a). Its `Display` is the reason shown with the `never` decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotJudgeable {
    /// The 1-based column of `found`, counted in characters. For [`Found::End`] it is one past the last
    /// character; for [`Found::Word`] it is where the word begins.
    pub column: usize,
    /// What stands at `column`.
    pub found: Found,
    /// Why it cannot be read.
    pub why: Why,
}

/// What a [`NotJudgeable`] points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A character of the line.
    Char(char),
    /// A shell reserved word that begins a part (quotes removed).
    Word(&'static str),
    /// The end of the line: a part was expected, or the line is empty.
    End,
}

/// The reason a line is not judgeable (spec §3a).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Why {
    /// `$` or a backtick: variables, command substitution, arithmetic, `$'…'` quoting.
    Substitution,
    /// `\`, outside or inside double quotes (a line continuation included).
    Escape,
    /// `#`, anywhere outside quotes: a comment, or a word the reader would have to judge as one.
    Comment,
    /// `~`: tilde expansion.
    Tilde,
    /// `*`, `?`, `[` or `]`: a file name pattern.
    Glob,
    /// `{` or `}`: a group or a brace expansion.
    Brace,
    /// `(` or `)`: a subshell, an arithmetic command, a process substitution, a function.
    Paren,
    /// `<` or `>` that does not begin a descriptor duplication: a redirection or a here-document.
    Redirection,
    /// A descriptor duplication that is not exactly one optional digit, `>&` or `<&`, and one digit, standing
    /// alone as a word (`2>&`, `2>&f`, `>&-`, `2>&1x`, `2>&12`).
    Duplication,
    /// `!`: pipeline negation, history expansion.
    Bang,
    /// `^`: a pipe in the Bourne shell, history substitution in bash.
    Caret,
    /// A control character (below U+0020, or U+007F) other than a blank or a line feed outside quotes.
    Control,
    /// A non-ASCII character outside quotes.
    NonAscii,
    /// A quote that is never closed.
    UnbalancedQuote,
    /// The line holds nothing but blanks.
    EmptyLine,
    /// A separator with no part on one side: leading, trailing or doubled.
    EmptyPart,
    /// A part's first word is a shell reserved word.
    ReservedWord,
    /// A part's first word holds `=`: an assignment prefix such as `X=1 cmd`.
    Assignment,
    /// A part's first word begins with `%`: bash runs it as `fg` (or `bg`) on a job.
    JobSpec,
}

impl Why {
    /// The way out, for a diagnostic's help line.
    #[must_use]
    pub fn help(self) -> &'static str {
        match self {
            Why::Substitution | Why::Escape | Why::Tilde | Why::Glob | Why::Brace | Why::Bang | Why::Caret => {
                "write the literal value, in single quotes if it holds special characters"
            }
            Why::Comment => "remove the comment, or quote the `#`",
            Why::Paren => "run the commands one after another, separated by `;` or `&&`",
            Why::Redirection => "let the tool capture output; only `2>&1`-style duplications are read",
            Why::Duplication => "write the duplication as `2>&1`, with one digit on each side",
            Why::Control => "remove the character; a control character is refused inside quotes too",
            Why::NonAscii => "quote the argument that holds it, or remove it",
            Why::UnbalancedQuote => "close the quote",
            Why::EmptyLine => "give a command",
            Why::EmptyPart => "remove the extra separator",
            Why::ReservedWord => "run the command itself, without the shell's compound syntax",
            Why::Assignment => "pass settings as arguments, or through the tool's own parameters",
            Why::JobSpec => "name the program to run",
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Why::Substitution => "command substitution and variables are never read",
            Why::Escape => "a backslash escape is never read",
            Why::Comment => "a comment is never read",
            Why::Tilde => "tilde expansion is never read",
            Why::Glob => "file name patterns are never read",
            Why::Brace => "braces (groups and brace expansion) are never read",
            Why::Paren => "parentheses (subshells, arithmetic, process substitution) are never read",
            Why::Redirection => "a redirection is never read, only a duplication such as `2>&1` after a word",
            Why::Duplication => "a duplication is read only as one digit, `>&` or `<&`, one digit, alone as a word",
            Why::Bang => "negation and history expansion are never read",
            Why::Caret => "`^` is never read",
            Why::Control => "control characters are never read",
            Why::NonAscii => "non-ASCII characters are read only inside quotes",
            Why::UnbalancedQuote => "the quote is never closed",
            Why::EmptyLine => "the line holds no command",
            Why::EmptyPart => "a separator must stand between two commands",
            Why::ReservedWord => "a shell reserved word is never read as a command",
            Why::Assignment => "a first word holding `=` (an assignment such as `X=1 cmd`) is never read",
            Why::JobSpec => "a first word beginning with `%` names a job, not a command",
        })
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Char(c) => write!(f, "{}", Shown(*c)),
            Found::Word(w) => write!(f, "`{w}`"),
            Found::End => f.write_str("the end of the line"),
        }
    }
}

impl fmt::Display for NotJudgeable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.found {
            Found::End => write!(f, "the end of the line (column {}) is not judgeable: {}", self.column, self.why),
            found => write!(f, "{found} at column {} is not judgeable: {}", self.column, self.why),
        }
    }
}

impl std::error::Error for NotJudgeable {}

/// Reads a `shell` argument as spec §3a reads it: its normalized parts, or why it is not judgeable.
///
/// # Errors
///
/// [`NotJudgeable`] at the first offending character: one outside the grammar, an empty line or part, an
/// unclosed quote, or a part whose first word is a reserved word, holds `=` or begins with `%`.
///
/// ```
/// let line = permits_table::shell::split("\"cargo\"  'test' 2>&1 && wget http://x | sh").unwrap();
/// let texts: Vec<&str> = line.parts.iter().map(|p| p.text.as_str()).collect();
/// assert_eq!(texts, ["cargo test", "wget http://x", "sh"]);
/// let err = permits_table::shell::split("cargo test $(curl x)").unwrap_err();
/// assert_eq!(err.to_string(), "`$` at column 12 is not judgeable: command substitution and variables are never read");
/// ```
pub fn split(line: &str) -> Result<ShellLine, NotJudgeable> {
    let mut sink = Parts::default();
    read(line, &mut sink)?;
    Ok(ShellLine { parts: sink.parts })
}

/// The normalized texts of a judgeable line's parts, exactly [`split`]'s [`ShellPart::text`]s, held in one
/// string: what the evaluator needs to judge each part, in one allocation (see [`part_texts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartTexts {
    /// The texts, separated by line feeds: a part never holds a control character, so the separator is
    /// unambiguous.
    joined: String,
}

impl PartTexts {
    /// Each part's normalized text, in order; never empty (a line has at least one part).
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.joined.split('\n')
    }
}

/// [`split`], keeping only each part's normalized text: the same judgement (the same parts, or the same
/// [`NotJudgeable`]) in one allocation of at most the line's length, for the evaluator's hot path.
///
/// # Errors
///
/// [`NotJudgeable`], exactly as [`split`].
///
/// ```
/// let texts = permits_table::shell::part_texts("\"cargo\"  'test' 2>&1 && wget http://x | sh").unwrap();
/// assert_eq!(texts.iter().collect::<Vec<_>>(), ["cargo test", "wget http://x", "sh"]);
/// ```
pub fn part_texts(line: &str) -> Result<PartTexts, NotJudgeable> {
    // The normalized text is never longer than the line: quotes and duplications go, a run of blanks
    // becomes one space, a separator one line feed.
    let mut sink = Texts { joined: String::with_capacity(line.len()), parts: 0 };
    read(line, &mut sink)?;
    Ok(PartTexts { joined: sink.joined })
}

/// Reads a whole line into `sink`, part after part (spec §3a `line`). On an error the sink holds a prefix of
/// the line's reading and is to be dropped.
fn read(line: &str, sink: &mut impl Sink) -> Result<(), NotJudgeable> {
    let mut lexer = Lexer { line, bytes: line.as_bytes(), pos: 0 };
    let mut first = true;
    loop {
        lexer.skip_blanks();
        match lexer.peek() {
            None if first => return Err(lexer.error_at(lexer.pos, Why::EmptyLine)),
            None => return Err(lexer.error_at(lexer.pos, Why::EmptyPart)),
            Some(b) if class(b) == Class::Sep => return Err(lexer.error_at(lexer.pos, Why::EmptyPart)),
            Some(_) => {}
        }
        first = false;
        if lexer.part(sink)?.is_none() {
            return Ok(());
        }
    }
}

/// Where the reader puts what it reads: the words of each part, quotes removed, duplications dropped.
trait Sink {
    /// A word begins; `first` when it is the first of its part.
    fn begin_word(&mut self, first: bool);
    /// More of the current word: whole UTF-8 characters.
    fn push(&mut self, text: &str);
    /// The part is complete; `followed_by` is the separator after it, `None` for the last part.
    fn end_part(&mut self, followed_by: Option<Separator>);
}

/// [`split`]'s sink: each part's words and text.
#[derive(Default)]
struct Parts {
    parts: Vec<ShellPart>,
    words: Vec<String>,
}

impl Sink for Parts {
    fn begin_word(&mut self, _first: bool) {
        self.words.push(String::new());
    }

    fn push(&mut self, text: &str) {
        if let Some(word) = self.words.last_mut() {
            word.push_str(text);
        }
    }

    fn end_part(&mut self, followed_by: Option<Separator>) {
        let words = std::mem::take(&mut self.words);
        let text = words.join(" ");
        self.parts.push(ShellPart { words, text, followed_by });
    }
}

/// [`part_texts`]'s sink: every part's text in one string, words joined by one space, parts by a line feed.
struct Texts {
    joined: String,
    /// The parts completed so far.
    parts: usize,
}

impl Sink for Texts {
    fn begin_word(&mut self, first: bool) {
        match (first, self.parts) {
            (true, 0) => {}
            (true, _) => self.joined.push('\n'),
            (false, _) => self.joined.push(' '),
        }
    }

    fn push(&mut self, text: &str) {
        self.joined.push_str(text);
    }

    fn end_part(&mut self, _followed_by: Option<Separator>) {
        self.parts += 1;
    }
}

/// Why a condition's pattern or literal can never match a part of a `shell` argument (spec §3a: the
/// compiler refuses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeverMatches {
    /// The 1-based column of `found` in the pattern or literal, counted in characters.
    pub column: usize,
    /// The first character no part can be matched against.
    pub found: char,
    /// Why.
    pub why: NeverWhy,
}

/// The reason of a [`NeverMatches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NeverWhy {
    /// `;`, `&`, `|` or a line feed: each part is judged alone, so a condition never sees a separator. This is
    /// a design rule: a quoted argument (`echo 'a;b'`) does hold the character, but a condition that names a
    /// separator is written by someone who thinks they are matching the whole line.
    Separator,
    /// A control character other than a line feed: no part ever holds one (a blank between words reads as
    /// one space; controls inside quotes make the line not judgeable).
    Control,
}

impl NeverMatches {
    /// The way out, for a diagnostic's help line.
    #[must_use]
    pub fn help(&self) -> &'static str {
        match self.why {
            NeverWhy::Separator => {
                "write a condition for one command; each part of the line is judged alone (use `?` to match a quoted separator)"
            }
            NeverWhy::Control => "remove the character; a blank between words reads as one space",
        }
    }
}

impl fmt::Display for NeverMatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.why {
            NeverWhy::Separator => "each part is judged alone, without its separators",
            NeverWhy::Control => "a part never holds a control character",
        };
        write!(f, "{} at column {} can never match a part of a `shell` argument: {why}", Shown(self.found), self.column)
    }
}

impl std::error::Error for NeverMatches {}

/// Whether a condition on a `shell` parameter can ever hold: its `matches` pattern or its `==`, `!=`, `in`
/// literal must not hold a separator (`;`, `&`, `|`, a line feed) nor a control character (spec §3a).
///
/// A normalized part holds plain characters, single spaces between words, and anything that may stand
/// inside quotes, which is every character but the controls; so the controls are the only characters a
/// part can truly never hold. Separators are refused too, by design: see [`NeverWhy::Separator`]. The check
/// is the same for a glob and for a literal, since `*` and `?` are neither separators nor controls.
///
/// # Errors
///
/// [`NeverMatches`] at the first separator or control character.
///
/// ```
/// assert!(permits_table::shell::pattern_can_match_part("cargo test *").is_ok());
/// assert_eq!(permits_table::shell::pattern_can_match_part("cargo test; *").unwrap_err().column, 11);
/// ```
pub fn pattern_can_match_part(pattern: &str) -> Result<(), NeverMatches> {
    for (index, c) in pattern.chars().enumerate() {
        let why = match c {
            ';' | '&' | '|' | '\n' => NeverWhy::Separator,
            c if is_control(c) => NeverWhy::Control,
            _ => continue,
        };
        return Err(NeverMatches { column: index + 1, found: c, why });
    }
    Ok(())
}

/// `text` as a person is shown it: visible ASCII and the space as they are, every other character as a
/// `\u{…}` escape (a `\` as `\\`), so that no control, invisible or look-alike character reaches a reader
/// raw. For a part of a line in a one-line summary.
///
/// ```
/// assert_eq!(permits_table::shell::visible("echo a\u{202e}b"), "echo a\\u{202e}b");
/// ```
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c == ' ' || c.is_ascii_graphic() => out.push(c),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    out
}

/// The shell reserved words spec §3a refuses as a part's first word.
const RESERVED: [&str; 17] = [
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in", "function",
    "select", "time", "coproc",
];

/// The punctuation of spec §3a `plain`; the rest of `plain` is the ASCII letters and digits.
const PLAIN_PUNCTUATION: &[u8] = b"_./:=@%+,-";

/// What a byte outside quotes is to the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `plain`
    Plain,
    /// `blank`
    Blank,
    /// The first byte of a `sep` operator.
    Sep,
    /// `'`, opening a `squote`.
    Single,
    /// `"`, opening a `dquote`.
    Double,
    /// Anything else: the line is not judgeable here.
    Bad(Why),
}

/// Classifies a byte outside quotes: [`class_of`], looked up in a table made once, at compile time.
fn class(b: u8) -> Class {
    CLASSES[usize::from(b)]
}

/// [`class_of`] of every byte.
static CLASSES: [Class; 256] = {
    let mut table = [Class::Bad(Why::Control); 256];
    let mut b = 0;
    while b < 256 {
        table[b] = class_of(b as u8);
        b += 1;
    }
    table
};

/// Whether `b` is one of [`PLAIN_PUNCTUATION`] (a loop, since `contains` is not `const`).
const fn is_plain_punctuation(b: u8) -> bool {
    let mut i = 0;
    while i < PLAIN_PUNCTUATION.len() {
        if PLAIN_PUNCTUATION[i] == b {
            return true;
        }
        i += 1;
    }
    false
}

/// Classifies a byte outside quotes. Every ASCII punctuation character is named in one arm, so a reason is
/// never a guess.
const fn class_of(b: u8) -> Class {
    match b {
        b if b.is_ascii_alphanumeric() || is_plain_punctuation(b) => Class::Plain,
        b' ' | b'\t' => Class::Blank,
        b';' | b'&' | b'|' | b'\n' => Class::Sep,
        b'\'' => Class::Single,
        b'"' => Class::Double,
        b'$' | b'`' => Class::Bad(Why::Substitution),
        b'\\' => Class::Bad(Why::Escape),
        b'#' => Class::Bad(Why::Comment),
        b'~' => Class::Bad(Why::Tilde),
        b'*' | b'?' | b'[' | b']' => Class::Bad(Why::Glob),
        b'{' | b'}' => Class::Bad(Why::Brace),
        b'(' | b')' => Class::Bad(Why::Paren),
        b'<' | b'>' => Class::Bad(Why::Redirection),
        b'!' => Class::Bad(Why::Bang),
        b'^' => Class::Bad(Why::Caret),
        0x80..=0xFF => Class::Bad(Why::NonAscii),
        // What is left: the C0 controls but tab and line feed, and DEL.
        _ => Class::Bad(Why::Control),
    }
}

/// A control byte as spec §3a means it: below 0x20, or 0x7F.
fn is_control_byte(b: u8) -> bool {
    b < 0x20 || b == 0x7F
}

/// A control character as spec §3a means it: C0 and DEL, not the C1 range (those are non-ASCII bytes, which
/// quotes may hold; the runtime shows invisible characters apart).
fn is_control(c: char) -> bool {
    c < ' ' || c == '\u{7f}'
}

/// The separator that begins at `i`, with its length in bytes; the longest operator wins, as in `sh`.
fn separator_at(bytes: &[u8], i: usize) -> Option<(Separator, usize)> {
    let next = bytes.get(i + 1).copied();
    match bytes.get(i).copied()? {
        b';' => Some((Separator::Semicolon, 1)),
        b'\n' => Some((Separator::Newline, 1)),
        b'&' if next == Some(b'&') => Some((Separator::And, 2)),
        b'&' => Some((Separator::Background, 1)),
        b'|' if next == Some(b'|') => Some((Separator::Or, 2)),
        b'|' => Some((Separator::Pipe, 1)),
        _ => None,
    }
}

/// A character as a message shows it: in backticks, and as a `\u{…}` escape unless it is visible ASCII, so
/// that no control, blank or look-alike reaches a reader raw.
struct Shown(char);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            '`' => f.write_str("`` ` ``"),
            c if c.is_ascii_graphic() => write!(f, "`{c}`"),
            c => write!(f, "`\\u{{{:x}}}`", u32::from(c)),
        }
    }
}

/// The first word of a part is judged as a whole when it ends, but its first offending character may come
/// earlier: the `=` of an assignment or a leading `%`. This remembers the first such.
#[derive(Clone, Copy)]
struct FirstWordFlag {
    pos: usize,
    why: Why,
}

/// The longest reserved word, in bytes (`function`).
const HEAD: usize = 8;

/// What [`Lexer::word`] keeps of the word it reads: its length, and its first [`HEAD`] bytes for the
/// reserved-word check (a word longer than that is no reserved word).
struct WordSoFar {
    len: usize,
    head: [u8; HEAD],
}

impl WordSoFar {
    /// Gives `text` to the sink and counts it.
    fn push(&mut self, sink: &mut impl Sink, text: &str) {
        for (slot, b) in self.head.iter_mut().skip(self.len).zip(text.bytes()) {
            *slot = b;
        }
        self.len += text.len();
        sink.push(text);
    }

    /// The reserved word this word is, if it is one.
    fn reserved(&self) -> Option<&'static str> {
        let word = self.head.get(..self.len)?;
        RESERVED.iter().copied().find(|r| r.as_bytes() == word)
    }
}

/// Which word of a part is being read: only the first is judged for `=`, `%` and reserved words.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WordRole {
    First,
    Argument,
}

/// The reader's state: the line and the byte offset of the next byte to read.
struct Lexer<'a> {
    line: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// An error at byte offset `pos`, which always begins a character (or is the end): every offending byte
    /// outside quotes is ASCII or a lead byte, and every offending byte inside quotes is ASCII.
    fn error_at(&self, pos: usize, why: Why) -> NotJudgeable {
        let found = self.line.char_indices().find(|&(i, _)| i >= pos).map_or(Found::End, |(_, c)| Found::Char(c));
        NotJudgeable { column: self.column(pos), found, why }
    }

    /// The 1-based column of byte offset `pos`: the characters before it, plus one. Counting the bytes that do
    /// not continue a UTF-8 sequence needs no char boundary.
    fn column(&self, pos: usize) -> usize {
        self.bytes.iter().take(pos).filter(|&&b| b & 0xC0 != 0x80).count() + 1
    }

    /// `part = blank* word (blank+ (word | dup))* blank*`, then the separator after it, if any (returned, and
    /// given to the sink with the end of the part). The caller has skipped the leading blanks and seen a byte
    /// that is neither a separator nor the end.
    fn part(&mut self, sink: &mut impl Sink) -> Result<Option<Separator>, NotJudgeable> {
        self.word(WordRole::First, sink)?;
        loop {
            // INVARIANT: `word` and `dup` stop only at a blank, a separator or the end, so after the blanks
            // there is a separator, the end, or (blanks having been skipped) the start of a word or dup.
            self.skip_blanks();
            let followed_by = match separator_at(self.bytes, self.pos) {
                Some((sep, len)) => {
                    self.pos += len;
                    Some(sep)
                }
                None if self.peek().is_none() => None,
                None => {
                    if !self.dup()? {
                        self.word(WordRole::Argument, sink)?;
                    }
                    continue;
                }
            };
            sink.end_part(followed_by);
            return Ok(followed_by);
        }
    }

    /// `dup = DIGIT? (">&" | "<&") DIGIT`, standing alone as a word. `Ok(false)` when the bytes do not begin a
    /// duplication (they are then read as a word, which refuses a `<` or `>`).
    fn dup(&mut self) -> Result<bool, NotJudgeable> {
        let at = |i: usize| self.bytes.get(i).copied();
        let mut i = self.pos;
        if at(i).is_some_and(|b| b.is_ascii_digit()) {
            i += 1;
        }
        if !(matches!(at(i), Some(b'>' | b'<')) && at(i + 1) == Some(b'&')) {
            return Ok(false);
        }
        i += 2;
        if !at(i).is_some_and(|b| b.is_ascii_digit()) {
            return Err(self.error_at(i, Why::Duplication));
        }
        i += 1;
        match at(i) {
            None => {}
            Some(b) if matches!(class(b), Class::Blank | Class::Sep) => {}
            Some(_) => return Err(self.error_at(i, Why::Duplication)),
        }
        self.pos = i;
        Ok(true)
    }

    /// `word = (plain | squote | dquote)+`, normalized (quotes removed) into the sink. Stops at a blank, a
    /// separator or the end; any other byte is the first offending character. The caller has seen a byte that
    /// is not a blank, not a separator and not the end, so the word is never silently empty.
    fn word(&mut self, role: WordRole, sink: &mut impl Sink) -> Result<(), NotJudgeable> {
        let start = self.pos;
        let first = role == WordRole::First;
        sink.begin_word(first);
        // The word's length so far, quotes removed, and (for a first word) its first bytes: a reserved word
        // has at most `HEAD` bytes, so a longer word is none.
        let mut word = WordSoFar { len: 0, head: [0; HEAD] };
        let mut flag: Option<FirstWordFlag> = None;
        // Notes the first `=` of the first word, or a `%` that begins it, at byte offset `pos`.
        let note = |flag: &mut Option<FirstWordFlag>, word_is_empty: bool, pos: usize, b: u8| {
            if first && flag.is_none() {
                if b == b'=' {
                    *flag = Some(FirstWordFlag { pos, why: Why::Assignment });
                } else if b == b'%' && word_is_empty {
                    *flag = Some(FirstWordFlag { pos, why: Why::JobSpec });
                }
            }
        };
        let result = loop {
            let Some(b) = self.peek() else { break Ok(()) };
            match class(b) {
                Class::Plain => {
                    // A run of plain bytes (ASCII), given to the sink at once.
                    let run = self.pos;
                    while let Some(b) = self.peek().filter(|&b| class(b) == Class::Plain) {
                        note(&mut flag, word.len + (self.pos - run) == 0, self.pos, b);
                        self.pos += 1;
                    }
                    word.push(sink, self.line.get(run..self.pos).unwrap_or_default());
                }
                Class::Single | Class::Double => {
                    let open = self.pos;
                    let mut i = open + 1;
                    let mut empty = word.len == 0;
                    let closed = loop {
                        let Some(c) = self.bytes.get(i).copied() else { break Err(Why::UnbalancedQuote) };
                        match c {
                            c if c == b => break Ok(()),
                            b'$' | b'`' if b == b'"' => break Err(Why::Substitution),
                            b'\\' if b == b'"' => break Err(Why::Escape),
                            c if is_control_byte(c) => break Err(Why::Control),
                            c => {
                                note(&mut flag, empty, i, c);
                                empty = false;
                                i += 1;
                            }
                        }
                    };
                    if let Err(why) = closed {
                        let pos = if why == Why::UnbalancedQuote { open } else { i };
                        break Err((pos, why));
                    }
                    // Both ends are ASCII quotes, so the slice is whole characters; `get` cannot fail here.
                    word.push(sink, self.line.get(open + 1..i).unwrap_or_default());
                    self.pos = i + 1;
                }
                Class::Blank | Class::Sep => break Ok(()),
                Class::Bad(why) => break Err((self.pos, why)),
            }
        };
        // The first offending character wins: a noted `=` or `%` before the error is reported instead.
        match (result, flag) {
            (Err((pos, why)), Some(f)) if f.pos > pos => return Err(self.error_at(pos, why)),
            (_, Some(f)) => return Err(self.error_at(f.pos, f.why)),
            (Err((pos, why)), None) => return Err(self.error_at(pos, why)),
            (Ok(()), None) => {}
        }
        if first {
            if let Some(reserved) = word.reserved() {
                return Err(NotJudgeable {
                    column: self.column(start),
                    found: Found::Word(reserved),
                    why: Why::ReservedWord,
                });
            }
        }
        Ok(())
    }
}
