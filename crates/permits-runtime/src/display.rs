//! What a person is shown is what runs (spec §5a): text from the agent, the host or the table is displayed
//! with every control, zero-width, bidi and tag character made visible as its code point (`\u{202e}`),
//! never dropped and never truncated. The stored call keeps the exact arguments; only what a person reads
//! is made visible.

/// `true` for a character a person cannot see, or that changes how the text around it reads: the C0 and
/// C1 controls (and DEL), the zero-width and joiner characters, the bidi marks, embeddings, overrides and
/// isolates, the line and paragraph separators, the invisible operators, the byte-order mark, the soft
/// hyphen, the combining grapheme joiner, the Mongolian vowel separator, the variation selectors and the
/// tag characters (U+E0000–U+E007F).
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{ad}'
        | '\u{34f}'
        | '\u{61c}'
        | '\u{115f}' | '\u{1160}'
        | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}'
        | '\u{ffa0}'
        | '\u{fff0}'..='\u{fffb}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}'
    )
}

/// `text` with every invisible character ([`is_invisible`]) written as `\u{…}` (lowercase hex), so a
/// person sees it. For one-line text: labels and arguments (a line break is shown as `\u{a}` too).
pub fn visible(text: &str) -> String {
    visible_keeping(text, false)
}

/// [`visible`] for text of several lines (why, evidence): a line feed is kept as a line break; every
/// other invisible character, a carriage return and a tab included, is shown as `\u{…}`.
pub fn visible_lines(text: &str) -> String {
    visible_keeping(text, true)
}

/// `true` when `text` has at least one character a person can see: not whitespace, not invisible. A
/// rejection's reason must (spec §5a).
pub fn has_visible(text: &str) -> bool {
    text.chars().any(|c| !c.is_whitespace() && !is_invisible(c))
}

fn visible_keeping(text: &str, lines: bool) -> String {
    if !text.chars().any(is_invisible) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) && !(lines && c == '\n') {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_are_shown_by_code_point() {
        assert_eq!(visible("pay\u{202e}gnp.exe"), "pay\\u{202e}gnp.exe");
        assert_eq!(visible("a\u{200b}b\u{e0041}\u{feff}"), "a\\u{200b}b\\u{e0041}\\u{feff}");
        assert_eq!(visible("two\nlines\t"), "two\\u{a}lines\\u{9}");
        assert_eq!(visible_lines("two\nlines\r"), "two\nlines\\u{d}");
        assert_eq!(visible("plain text, café"), "plain text, café");
        assert!(!has_visible(" \u{200b}\u{2066}\t\u{e0020}"));
        assert!(has_visible("\u{200b}x"));
    }
}
