//! `permitc diff`.

use super::*;

pub(in crate::cli) fn diff_cmd(old: &Path, new: &Path, format: Format, fail_on_widen: bool) -> u8 {
    let old_table = match table_from(old) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let new_table = match table_from(new) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let changes = crate::diff::diff(&old_table, &new_table);
    let widening = changes.iter().any(|c| c.direction == crate::diff::Direction::Widening);
    match format {
        Format::Human => out!("{}", crate::diff::render_human(&changes)),
        Format::Json => print_json(&DiffJson {
            old: old.display().to_string(),
            new: new.display().to_string(),
            widening: changes.iter().filter(|c| c.direction == crate::diff::Direction::Widening).count(),
            changes: &changes,
        }),
    }
    if fail_on_widen && widening { 1 } else { 0 }
}
