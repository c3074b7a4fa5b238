//! `permitc decide`.

use super::*;

pub(in crate::cli) fn decide(
    table: &Path,
    agent: &str,
    skill: &str,
    tool: &str,
    args: Option<&str>,
    requester: Option<&str>,
    format: Format,
) -> u8 {
    let table = match crate::table::Table::load_path(table) {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    // Arguments that are not JSON are a usage error; JSON that does not fit the tool's parameters is a
    // decision (`never`, with the reason).
    let arguments = match args.map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::Value::Object(serde_json::Map::new()),
        Some(Ok(value)) => value,
        Some(Err(e)) => {
            errln!("error: the arguments are not JSON: {e}");
            return 2;
        }
    };
    let mut call = crate::runtime::Call::new(agent, skill, tool).with_arguments(arguments);
    call.requester = requester.map(str::to_string);
    let d = crate::runtime::decide_table(&table, &call);
    match format {
        Format::Json => outln!("{}", d.to_json()),
        Format::Human => outln!("{}", d.summary()),
    }
    0
}
