//! The API: messages, columns, every ASCII byte in every position, the pattern check, and long lines.

use permits::table::shell::{Found, NeverWhy, NotJudgeable, Separator, ShellPart, Why, pattern_can_match_part, split};

fn refused(line: &str) -> NotJudgeable {
    match split(line) {
        Ok(parsed) => panic!("{line:?} was accepted as {parsed:?}"),
        Err(e) => e,
    }
}

fn message(line: &str) -> String {
    refused(line).to_string()
}

#[test]
fn messages() {
    assert_eq!(
        message("cargo test $(curl x)"),
        "`$` at column 12 is not judgeable: command substitution and variables are never read"
    );
    assert_eq!(
        message("a `b`"),
        "`` ` `` at column 3 is not judgeable: command substitution and variables are never read"
    );
    assert_eq!(
        message("a;"),
        "the end of the line (column 3) is not judgeable: a separator must stand between two commands"
    );
    assert_eq!(message(""), "the end of the line (column 1) is not judgeable: the line holds no command");
    assert_eq!(
        message("then x"),
        "`then` at column 1 is not judgeable: a shell reserved word is never read as a command"
    );
    assert_eq!(
        message("X=1 cmd"),
        "`=` at column 2 is not judgeable: a first word holding `=` (an assignment such as `X=1 cmd`) is never read"
    );
    assert_eq!(message("echo 'abc"), "`'` at column 6 is not judgeable: the quote is never closed");
    assert_eq!(
        message("a 2>&1x"),
        "`x` at column 7 is not judgeable: a duplication is read only as one digit, `>&` or `<&`, one digit, alone as a word"
    );
}

#[test]
fn invisible_characters_are_escaped_in_messages() {
    assert_eq!(message("a\r\nb"), "`\\u{d}` at column 2 is not judgeable: control characters are never read");
    assert_eq!(message("a\0"), "`\\u{0}` at column 2 is not judgeable: control characters are never read");
    assert_eq!(message("'a\nb'"), "`\\u{a}` at column 3 is not judgeable: control characters are never read");
    assert_eq!(
        message("a 2>& 1"),
        "`\\u{20}` at column 6 is not judgeable: a duplication is read only as one digit, `>&` or `<&`, one digit, alone as a word"
    );
    assert_eq!(
        message("a\u{37e} b"),
        "`\\u{37e}` at column 2 is not judgeable: non-ASCII characters are read only inside quotes"
    );
    assert_eq!(
        message("a\u{202e}"),
        "`\\u{202e}` at column 2 is not judgeable: non-ASCII characters are read only inside quotes"
    );
    // Every message is printable ASCII, whatever the line holds.
    for c in (0..0x80u8).map(char::from).chain(['é', '\u{200b}', '\u{feff}', '\u{85}', '\u{2028}']) {
        for line in [format!("{c}"), format!("a {c}"), format!("'{c}"), format!("\"{c}\"x$")] {
            if let Err(e) = split(&line) {
                let m = e.to_string();
                assert!(m.chars().all(|c| c == ' ' || c.is_ascii_graphic()), "{m:?}");
                assert!(!m.ends_with('.'), "{m}");
            }
        }
    }
}

#[test]
fn every_reason_has_a_help_line() {
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
        let (reason, help) = (why.to_string(), why.help());
        for text in [&reason[..], help] {
            assert!(!text.is_empty() && !text.ends_with('.'), "{why:?}: {text}");
            assert!(text.starts_with(|c: char| !c.is_uppercase()), "{why:?}: {text}");
        }
    }
}

#[test]
fn columns_count_characters() {
    assert_eq!(refused("'é' $").column, 5);
    assert_eq!(refused("'日本語' \u{ff1b}").column, 7);
    assert_eq!(refused("'\u{1f600}';;").column, 5);
    assert_eq!(refused("'é").column, 1);
    assert_eq!(refused("'éé").found, Found::Char('\''));
    assert_eq!(split("'日'").map(|l| l.parts[0].text.clone()), Ok("日".to_owned()));
}

#[test]
fn the_first_offending_character_wins() {
    // `=` comes before `$`: the assignment is reported.
    assert_eq!(refused("X=$y").why, Why::Assignment);
    // The opening quote comes before the `=` inside it.
    assert_eq!(refused("'X=1").why, Why::UnbalancedQuote);
    // A `%` that begins the first word comes before a later `=`.
    assert_eq!(refused("%a=b").why, Why::JobSpec);
    // A reserved word is judged when it ends, before anything after it.
    assert_eq!(refused("then $x").why, Why::ReservedWord);
    // An error inside the first word, before any `=`.
    assert_eq!(refused("a$=b").why, Why::Substitution);
    // The first part's error, not the second's.
    assert_eq!(refused("a > b; $c").column, 3);
}

#[test]
fn parts_carry_words_text_and_separators() {
    let line = split("\"cargo\"  'test' 2>&1 && echo '' 'a  b' | sh\nc").unwrap_or_else(|e| panic!("{e}"));
    let part = |words: &[&str], text: &str, followed_by| ShellPart {
        words: words.iter().map(|w| (*w).to_owned()).collect(),
        text: text.to_owned(),
        followed_by,
    };
    assert_eq!(
        line.parts,
        [
            part(&["cargo", "test"], "cargo test", Some(Separator::And)),
            part(&["echo", "", "a  b"], "echo  a  b", Some(Separator::Pipe)),
            part(&["sh"], "sh", Some(Separator::Newline)),
            part(&["c"], "c", None),
        ]
    );
    assert_eq!(Separator::Newline.as_str(), "\n");
}

/// Every ASCII byte, alone as a word after a command, inside single and double quotes, and right after a
/// word: the class spec §3a gives it.
#[test]
fn every_ascii_byte() {
    for b in 0u8..0x80 {
        let c = char::from(b);
        let plain = b.is_ascii_alphanumeric() || b"_./:=@%+,-".contains(&b);
        let blank = b == b' ' || b == b'\t';
        let control = b < 0x20 || b == 0x7F;
        let alone = split(&format!("x {c}"));
        let after = split(&format!("x y{c}"));
        let single = split(&format!("x '{c}'"));
        let double = split(&format!("x \"{c}\""));
        if plain {
            assert!(alone.is_ok() && after.is_ok(), "{c:?}");
        } else if blank {
            assert_eq!(alone.map(|l| l.parts[0].text.clone()), Ok("x".to_owned()));
        } else if b"\n;&|".contains(&b) {
            assert_eq!(alone.map_err(|e| e.why), Err(Why::EmptyPart), "{c:?}");
        } else if b == b'\'' || b == b'"' {
            assert_eq!(alone.map_err(|e| e.why), Err(Why::UnbalancedQuote), "{c:?}");
        } else {
            let e = alone.expect_err("refused");
            assert_eq!((e.column, e.found), (3, Found::Char(c)), "{c:?}");
            let why = if control { Why::Control } else { e.why };
            assert_eq!(e.why, why, "{c:?}");
            assert!(after.is_err(), "{c:?}");
        }
        // Inside quotes: controls are refused; `'` closes single quotes; `"`, `$`, backtick and `\` are
        // refused in (or close) double quotes; everything else is kept as is.
        match (control, b) {
            (true, _) => {
                assert_eq!(single.map_err(|e| e.why), Err(Why::Control), "{c:?}");
                assert_eq!(double.map_err(|e| e.why), Err(Why::Control), "{c:?}");
            }
            (false, b'\'') => assert!(single.is_err() && double.is_ok(), "{c:?}"),
            (false, b'"') => assert!(single.is_ok() && double.is_err(), "{c:?}"),
            (false, b'$' | b'`' | b'\\') => {
                assert_eq!(single.map(|l| l.parts[0].words[1].clone()), Ok(c.to_string()));
                assert!(double.is_err(), "{c:?}");
            }
            (false, _) => {
                assert_eq!(single.map(|l| l.parts[0].words[1].clone()), Ok(c.to_string()));
                assert_eq!(double.map(|l| l.parts[0].words[1].clone()), Ok(c.to_string()));
            }
        }
    }
}

#[test]
fn patterns_that_can_never_match_a_part() {
    assert_eq!(pattern_can_match_part("cargo test *"), Ok(()));
    assert_eq!(pattern_can_match_part("*curl *"), Ok(()));
    assert_eq!(pattern_can_match_part("echo 'a  b' \"$x\" é \u{85} ?"), Ok(()));
    assert_eq!(pattern_can_match_part(""), Ok(()));
    for (pattern, column, found, why) in [
        ("cargo test; *", 11, ';', NeverWhy::Separator),
        ("a && b", 3, '&', NeverWhy::Separator),
        ("a & b", 3, '&', NeverWhy::Separator),
        ("*|*", 2, '|', NeverWhy::Separator),
        ("a || b", 3, '|', NeverWhy::Separator),
        ("a\nb", 2, '\n', NeverWhy::Separator),
        ("a\tb", 2, '\t', NeverWhy::Control),
        ("é\rb", 2, '\r', NeverWhy::Control),
        ("a\0", 2, '\0', NeverWhy::Control),
        ("a\u{7f}", 2, '\u{7f}', NeverWhy::Control),
    ] {
        let e = pattern_can_match_part(pattern).expect_err(pattern);
        assert_eq!((e.column, e.found, e.why), (column, found, why), "{pattern:?}");
        assert!(!e.help().is_empty());
    }
    assert_eq!(
        pattern_can_match_part("a\tb").map_err(|e| e.to_string()),
        Err(
            "`\\u{9}` at column 2 can never match a part of a `shell` argument: a part never holds a control character"
                .to_owned()
        )
    );
    assert_eq!(
        pattern_can_match_part("x;*").map_err(|e| e.to_string()),
        Err("`;` at column 2 can never match a part of a `shell` argument: each part is judged alone, without its separators".to_owned())
    );
}

/// What a part can hold, checked against the lexer: every text it produces passes `pattern_can_match_part`
/// unless it holds a quoted separator, and no text ever holds a control.
#[test]
fn a_part_never_holds_a_control() {
    for b in (0x20u8..0x7F).filter(|&b| b != b'\'') {
        let line = format!("x '{}'", char::from(b));
        let text = split(&line).map(|l| l.parts[0].text.clone()).unwrap_or_default();
        let ok = pattern_can_match_part(&text);
        assert_eq!(ok.is_err(), b";&|".contains(&b), "{line:?}");
    }
}

#[test]
fn long_lines_in_linear_time() {
    let n = 200_000;
    let many_parts = "a;".repeat(n) + "a";
    assert_eq!(split(&many_parts).map(|l| l.parts.len()), Ok(n + 1));
    let many_words = "a ".repeat(n);
    assert_eq!(split(&many_words).map(|l| l.parts[0].words.len()), Ok(n));
    let many_quotes = "''".repeat(n);
    assert_eq!(split(&many_quotes).map(|l| l.parts[0].text.clone()), Ok(String::new()));
    let long_quote = format!("x '{}'", "é;|".repeat(n));
    assert_eq!(split(&long_quote).map(|l| l.parts[0].words[1].chars().count()), Ok(3 * n));
    let late_error = format!("{} $", "a ".repeat(n));
    assert_eq!(refused(&late_error).column, 2 * n + 2);
    let dups = format!("x{}", " 2>&1".repeat(n));
    assert_eq!(split(&dups).map(|l| l.parts[0].text.clone()), Ok("x".to_owned()));
}
