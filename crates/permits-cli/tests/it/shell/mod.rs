//! `shell` parameters (spec §3a): the lexer (`permits_table::shell`) on its corpus, its API and generated
//! lines, with a differential against real bash for every line it accepts; and command lines judged part by
//! part through the real `permitc decide` and the runtime (the shipped coding agent, the smuggling corpus).

mod api;
mod bash;
mod coding_agent;
mod corpus;
mod generated;
mod judge;
mod smuggling;

/// Decodes the escapes of `lexer_corpus.txt`: `\\` `\n` `\r` `\t` `\0` `\s` (space) `\e` (nothing) `\u{HEX}`.
pub fn decode(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('0') => out.push('\0'),
            Some('s') => out.push(' '),
            Some('e') => {}
            Some('u') => {
                if chars.next() != Some('{') {
                    return Err(format!("`\\u` without `{{` in {s:?}"));
                }
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let code = u32::from_str_radix(&hex, 16).map_err(|e| format!("bad \\u{{{hex}}} in {s:?}: {e}"))?;
                out.push(char::from_u32(code).ok_or_else(|| format!("not a char: \\u{{{hex}}}"))?);
            }
            other => return Err(format!("unknown escape \\{other:?} in {s:?}")),
        }
    }
    Ok(out)
}

/// Encodes a line for a failure message, so that no control character reaches the terminal raw.
pub fn shown(s: &str) -> String {
    s.escape_debug().to_string()
}
