//! `shell/lexer_corpus.txt`: every case is read exactly as its line says (parts, words, separators; or the column,
//! the offending character and the reason).

use super::{decode, shown};
use permits::table::shell::{Found, Separator, ShellLine, Why, part_texts, split};

/// What a corpus case expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The parts: each part's words and the separator after it.
    Parts(Vec<(Vec<String>, Option<Separator>)>),
    /// Not judgeable at this column, with this finding, for this reason (the `Why` variant's name).
    Refused { column: usize, found: Found, why: String },
}

/// One case of the corpus.
#[derive(Debug, Clone)]
pub struct Case {
    /// 1-based line number in `shell/lexer_corpus.txt`.
    pub number: usize,
    /// The decoded shell line.
    pub line: String,
    /// What the lexer must say.
    pub expect: Expect,
}

/// All cases of `shell/lexer_corpus.txt`.
pub fn cases() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/shell/lexer_corpus.txt");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut cases = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let (expect, line) = raw.split_once('\t').unwrap_or_else(|| panic!("corpus line {number}: no tab"));
        let line = decode(line).unwrap_or_else(|e| panic!("corpus line {number}: {e}"));
        let expect = parse_expect(expect).unwrap_or_else(|e| panic!("corpus line {number}: {e}"));
        cases.push(Case { number, line, expect });
    }
    cases
}

fn separator(token: &str) -> Option<Separator> {
    Some(match token {
        ";" => Separator::Semicolon,
        "&&" => Separator::And,
        "||" => Separator::Or,
        "|" => Separator::Pipe,
        "&" => Separator::Background,
        "\\n" => Separator::Newline,
        _ => return None,
    })
}

fn parse_expect(expect: &str) -> Result<Expect, String> {
    if let Some(rest) = expect.strip_prefix("ok: ") {
        let mut parts = Vec::new();
        let mut words = Vec::new();
        for token in rest.split(' ') {
            if let Some(sep) = separator(token) {
                parts.push((std::mem::take(&mut words), Some(sep)));
            } else {
                words.push(decode(token)?);
            }
        }
        parts.push((words, None));
        if parts.iter().any(|(w, _)| w.is_empty()) {
            return Err(format!("a part without words in {expect:?}"));
        }
        Ok(Expect::Parts(parts))
    } else if let Some(rest) = expect.strip_prefix("no: ") {
        let fields: Vec<&str> = rest.split(' ').collect();
        let [column, found, why] = fields[..] else { return Err(format!("want `no: COL FOUND WHY`: {expect:?}")) };
        let column = column.parse().map_err(|e| format!("column {column:?}: {e}"))?;
        let found = if found == "end" {
            Found::End
        } else if let Some(word) = found.strip_prefix("word:") {
            let word: &'static str = Box::leak(word.to_owned().into_boxed_str());
            Found::Word(word)
        } else {
            let decoded = decode(found)?;
            let mut chars = decoded.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Found::Char(c),
                _ => return Err(format!("FOUND must be one character: {found:?}")),
            }
        };
        Ok(Expect::Refused { column, found, why: why.to_owned() })
    } else {
        Err(format!("EXPECT must begin with `ok: ` or `no: `: {expect:?}"))
    }
}

/// What the lexer says, in the corpus's terms.
pub fn actual(line: &str) -> Expect {
    match split(line) {
        Ok(ShellLine { parts }) => Expect::Parts(parts.into_iter().map(|p| (p.words, p.followed_by)).collect()),
        Err(e) => Expect::Refused { column: e.column, found: e.found, why: format!("{:?}", e.why) },
    }
}

#[test]
fn corpus_reads_as_expected() {
    let cases = cases();
    assert!(cases.len() >= 120, "the corpus has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let got = actual(&case.line);
        if got != case.expect {
            failures.push(format!(
                "line {}: {}\n   want {:?}\n    got {:?}",
                case.number,
                shown(&case.line),
                case.expect,
                got
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
    // The evaluator's reading: the same texts, or the same error.
    for case in &cases {
        let texts = part_texts(&case.line).map(|t| t.iter().map(str::to_string).collect::<Vec<_>>());
        let parts = split(&case.line).map(|l| l.parts.into_iter().map(|p| p.text).collect::<Vec<_>>());
        assert_eq!(texts, parts, "line {}: {}", case.number, shown(&case.line));
    }
}

/// Every `Why` except the ones only a corpus-free test can reach appears in the corpus, and both outcomes
/// are well represented.
#[test]
fn corpus_covers_every_reason() {
    let cases = cases();
    let all = [
        Why::Substitution,
        Why::Escape,
        Why::Comment,
        Why::Tilde,
        Why::Glob,
        Why::Brace,
        Why::Paren,
        Why::Redirection,
        Why::Duplication,
        Why::Bang,
        Why::Caret,
        Why::Control,
        Why::NonAscii,
        Why::UnbalancedQuote,
        Why::EmptyLine,
        Why::EmptyPart,
        Why::ReservedWord,
        Why::Assignment,
        Why::JobSpec,
    ];
    for why in all {
        let name = format!("{why:?}");
        assert!(
            cases.iter().any(|c| matches!(&c.expect, Expect::Refused { why, .. } if *why == name)),
            "no corpus case for {name}"
        );
    }
    let accepted = cases.iter().filter(|c| matches!(c.expect, Expect::Parts(_))).count();
    assert!(accepted >= 60 && cases.len() - accepted >= 60, "{accepted} accepted of {}", cases.len());
}

/// The normalized text of a corpus case is its words joined by one space (spot checks of the spec's examples).
#[test]
fn corpus_texts() {
    let texts = |line: &str| -> Vec<String> {
        split(line).map(|l| l.parts.into_iter().map(|p| p.text).collect()).unwrap_or_default()
    };
    assert_eq!(texts("\"cargo\"  'test'"), ["cargo test"]);
    assert_eq!(texts("cargo test --all; wget http://x | sh"), ["cargo test --all", "wget http://x", "sh"]);
    assert_eq!(texts("echo '' x"), ["echo  x"]);
    assert_eq!(texts("echo 'a  b'"), ["echo a  b"]);
    assert_eq!(texts("make 2>&1 x"), ["make x"]);
}
