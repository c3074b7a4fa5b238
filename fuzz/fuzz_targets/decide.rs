//! Arbitrary calls against fixed tables (`policies/shop`, `policies/coding-agent` and the corpus's
//! `conditions_number.permits`, for conditions on `number` parameters against decimal literals; compiled
//! once): the input picks an agent, a skill and a tool (mostly real names, sometimes names from elsewhere
//! or made up), a requester and arguments (mostly of the declared types, near the literals the table's
//! conditions compare with, `0.5` as well as `10`; sometimes any JSON). `decide_table` must never panic, a refusal is `never`,
//! and an accepted call gets exactly the level the compiler's own evaluation (`Table::level_of`,
//! what `test` blocks use) and `Entry::level_for` give.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use permits::runtime::{Call, decide_table, fingerprint};
use permits::table::{Condition, Level, Literal, ParamType, Table};
use serde_json::{Map, Value};

fn tables() -> &'static [Table] {
    static TABLES: OnceLock<Vec<Table>> = OnceLock::new();
    TABLES.get_or_init(|| {
        [
            "policies/shop",
            "policies/coding-agent",
            "crates/permits-compiler/tests/it/corpus/ok/conditions_number.permits",
        ]
        .iter()
        .map(|p| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p);
            permits::compile::compile_path(&path).unwrap_or_else(|e| panic!("{p} does not compile:\n{e}"))
        })
        .collect()
    })
}

/// Every name the table knows, of any kind: the "wrong kind of name" cases.
fn all_names(t: &Table) -> Vec<&str> {
    let keys =
        t.agents.keys().chain(t.skills.keys()).chain(t.tools.keys()).chain(t.persons.keys()).chain(t.roles.keys());
    keys.map(String::as_str).collect()
}

/// A name: mostly one of `likely`, sometimes any name of the table, sometimes made up.
fn pick(u: &mut Unstructured<'_>, likely: &[&str], any: &[&str]) -> Result<String> {
    Ok(match u.int_in_range(0..=9u8)? {
        0 => u.arbitrary::<String>()?,
        1 if !any.is_empty() => u.choose(any)?.to_string(),
        _ if !likely.is_empty() => u.choose(likely)?.to_string(),
        _ => u.arbitrary::<String>()?,
    })
}

/// The literals the table's conditions mention, to land on and around their boundaries: whole numbers,
/// strings, and the decimals of conditions on `number` parameters (as their canonical text, `0.5`).
fn literals(c: &Condition, ints: &mut Vec<i64>, strings: &mut Vec<String>, numbers: &mut Vec<String>) {
    let mut stack = vec![c];
    while let Some(c) = stack.pop() {
        match c {
            Condition::All(ps) | Condition::Any(ps) => stack.extend(ps),
            Condition::Not(p) => stack.push(p),
            Condition::Compare { value: Literal::Int(n), .. } => {
                ints.extend([n.saturating_sub(1), *n, n.saturating_add(1)])
            }
            Condition::Compare { value: Literal::String(s), .. } => strings.push(s.clone()),
            Condition::Compare { value: Literal::Number(d), .. } => numbers.push(d.to_string()),
            Condition::Compare { .. } => {}
            Condition::In { values, .. } => strings.extend(values.iter().cloned()),
            Condition::Matches { glob, .. } => {
                strings.push(glob.clone());
                strings.push(glob.replace('*', "x").replace('?', "y"));
            }
        }
    }
}

/// A JSON number on or near a decimal literal's boundary (`text` is canonical: `0.5`, `-2.75`, `10`): the
/// literal itself, the same number written longer (`0.50`, `10.0`, `0.5e0`), a hair further from zero in
/// decimal (`0.50000001`), its negation, or as an f64 a hair or half a unit either side (`0.4999999`: what a
/// host that computes its argument sends).
fn near_decimal(u: &mut Unstructured<'_>, text: &str) -> Result<Value> {
    let point = if text.contains('.') { "" } else { "." };
    let negated = text.strip_prefix('-').map_or_else(|| format!("-{text}"), str::to_string);
    let candidates =
        [text.to_string(), format!("{text}{point}0"), format!("{text}e0"), format!("{text}{point}0000001"), negated];
    let value: Value = serde_json::from_str(u.choose(&candidates)?).unwrap_or(Value::Null);
    let offset = match u.int_in_range(0..=5u8)? {
        0 => 0.5,
        1 => -0.5,
        2 => 1e-7,
        3 => -1e-7,
        _ => return Ok(value),
    };
    Ok(value.as_f64().and_then(|x| serde_json::Number::from_f64(x + offset)).map_or(value, Value::Number))
}

/// Any JSON value, at most `depth` levels deep.
fn json(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let kind = if depth == 0 { u.int_in_range(0..=4u8)? } else { u.int_in_range(0..=6u8)? };
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        4 => Value::String(u.arbitrary()?),
        5 => {
            let n = u.int_in_range(0..=4u8)?;
            Value::Array((0..n).map(|_| json(u, depth - 1)).collect::<Result<_>>()?)
        }
        _ => {
            let n = u.int_in_range(0..=4u8)?;
            let mut m = Map::new();
            for _ in 0..n {
                m.insert(u.arbitrary()?, json(u, depth - 1)?);
            }
            Value::Object(m)
        }
    })
}

fn call(u: &mut Unstructured<'_>, t: &Table) -> Result<Call> {
    let any = all_names(t);
    let agents: Vec<&str> = t.agents.keys().map(String::as_str).collect();
    let agent = pick(u, &agents, &any)?;
    let skills: Vec<&str> =
        t.agents.get(&agent).map(|a| a.skills.iter().map(String::as_str).collect()).unwrap_or_default();
    let skill = pick(u, &skills, &any)?;
    let tools: Vec<&str> =
        t.skills.get(&skill).map(|s| s.tools.iter().map(String::as_str).collect()).unwrap_or_default();
    let tool = pick(u, &tools, &any)?;
    let (mut ints, mut strings) = (vec![0, -1, 1, i64::MIN, i64::MAX], vec![String::new()]);
    let mut numbers = vec!["0".to_string(), "0.1".to_string(), "-0.5".to_string()];
    if let Some(e) = t.entry(&agent, &skill, &tool) {
        for n in e.rows.iter().flat_map(|r| &r.named) {
            if let Some(c) = &n.when {
                literals(c, &mut ints, &mut strings, &mut numbers);
            }
        }
    }
    let arguments = match (u.int_in_range(0..=7u8)?, t.tools.get(&tool)) {
        (0, _) | (_, None) => json(u, 3)?,
        (_, Some(info)) => {
            let mut m = Map::new();
            for p in &info.params {
                let v = match (u.int_in_range(0..=9u8)?, &p.ty) {
                    (0, _) => json(u, 1)?,
                    (1, _) => continue, // a missing argument
                    (_, ParamType::Int | ParamType::Money) if u.arbitrary()? => Value::from(*u.choose(&ints)?),
                    (_, ParamType::Int | ParamType::Money) => Value::from(u.arbitrary::<i64>()?),
                    (_, ParamType::String | ParamType::Shell | ParamType::Entity(_)) if u.arbitrary()? => {
                        let mut s = u.choose(&strings)?.clone();
                        if u.arbitrary()? {
                            s.push_str(&u.arbitrary::<String>()?);
                        }
                        Value::String(s)
                    }
                    (_, ParamType::String | ParamType::Shell | ParamType::Entity(_)) => Value::String(u.arbitrary()?),
                    (_, ParamType::Bool) => Value::Bool(u.arbitrary()?),
                    // A `number`: near a decimal literal, a whole number near an int one, or any f64.
                    (2..=5, ParamType::Number) => {
                        let literal = u.choose(&numbers)?.clone();
                        near_decimal(u, &literal)?
                    }
                    (6, ParamType::Number) => Value::from(*u.choose(&ints)?),
                    (_, ParamType::Number) => {
                        serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number)
                    }
                    (_, ParamType::Json) => json(u, 2)?,
                };
                m.insert(p.name.clone(), v);
            }
            if u.ratio(1, 10)? {
                m.insert(u.arbitrary()?, json(u, 1)?); // an extra argument
            }
            Value::Object(m)
        }
    };
    let mut c = Call::new(agent, skill, tool).with_arguments(arguments);
    if u.arbitrary()? {
        let persons: Vec<&str> = t.persons.keys().map(String::as_str).collect();
        c = c.for_person(pick(u, &persons, &any)?);
    }
    Ok(c)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(which) = u.int_in_range(0..=tables().len() - 1) else { return };
    let table = &tables()[which];
    let Ok(c) = call(&mut u, table) else { return };
    let d = decide_table(table, &c);
    let _ = (d.to_json(), d.summary());
    if let Some(digest) = &d.entry_digest {
        let _ = fingerprint(&c, digest, None, None);
    }
    if d.refusal.is_some() {
        assert_eq!(d.level, Level::Never, "a refused call is `never`: {}", d.summary());
        return;
    }
    // Accepted: the triple is offered and the arguments fit the tool's parameters.
    let entry = table.entry(&c.agent, &c.skill, &c.tool).expect("an accepted call has an entry");
    let args = c.arguments.as_object().expect("accepted arguments are an object");
    let (compiler, why) = match table.level_of(permits::table::CallRef { requester: None, ..c.as_ref() }) {
        Ok(of) => (of.level, String::new()),
        Err(e) => (permits::table::Level::Never, e.to_string()),
    };
    assert_eq!(d.level, compiler, "the runtime and the compiler disagree on {}: {why}", d.summary());
    // A `shell` argument is judged part by part (spec §3a): the strictest part's level.
    let tool = &table.tools[&c.tool];
    let by_rows = match tool.shell_param() {
        Ok(Some(param)) => {
            let line = args.get(param).and_then(|v| v.as_str()).unwrap_or_default();
            let parts = permits::table::shell::part_texts(line).expect("an accepted line is judgeable");
            let mut level = Ok(Level::Alone);
            for part in parts.iter() {
                let view = permits::table::Arguments::new(args).with_part(param, part);
                level = level.and_then(|l: Level| entry.level_on(view).map(|p| l.max(p)));
            }
            level
        }
        _ => entry.level_for(args),
    };
    assert_eq!(Ok(d.level), by_rows, "`Entry::level_for` disagrees on {}", d.summary());
    if let Some(stated) = entry.level {
        assert_eq!(d.level, stated, "a stated level is the level, whatever the arguments");
    }
});
