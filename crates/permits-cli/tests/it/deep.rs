//! Deep and cyclic call graphs through the real `permitc` binary: effect inference must be iterative
//! (no stack overflow on a long chain) and witnesses must walk to an operation (spec §2).
//!
//! The chain is 20 000 tools deep, or 100 000 with `PERMITS_FULL=1`.

use std::fmt::Write as _;

use serde_json::Value;

use crate::support::{Temp, permitc};

fn depth() -> usize {
    if std::env::var("PERMITS_FULL").is_ok_and(|v| v == "1") { 100_000 } else { 20_000 }
}

/// The people and the agent; the agent's `never [T0]` is on line 7 of `agents.permits`.
fn agents(offered: &str) -> String {
    format!(
        "person P {{ roles [R] }}\n\
         role R\n\
         decides_proposals [R]\n\
         agent A \"a\" {{\n\
         \x20   sponsor P\n\
         \x20   may {{\n\
         \x20       never [T0]\n\
         \x20   }}\n\
         \x20   skills [S]\n\
         }}\n\
         skill S \"s\" {{ tools [{offered}] }}\n"
    )
}

const NEVER_LINE: usize = 7;

#[test]
fn deep_call_chain_checks_and_explains_never_inherited_from_t0() {
    let n = depth();
    let top = format!("T{}", n - 1);
    let t = Temp::new("chain");
    let mut tools = String::from("entity E { x }\ntool T0 \"t\" () { write E.x }\n");
    for i in 1..n {
        let _ = writeln!(tools, "tool T{i} \"t\" () {{ call T{} }}", i - 1);
    }
    t.write("pkg/tools.permits", &tools);
    t.write("pkg/agents.permits", agents(&format!("{top}, T0")));
    let pkg = t.path("pkg");
    let shown = pkg.display().to_string();
    assert!(agents("").lines().nth(NEVER_LINE - 1).is_some_and(|l| l.trim() == "never [T0]"));

    let run = permitc(&["check".as_ref(), pkg.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr.trim_end(), format!("checked `{shown}`: 1 agent, 1 skill, 2 decisions, no problems"));

    // The chain, from the top tool down to the write.
    let mut chain: Vec<String> = (0..n).rev().map(|i| format!("T{i}")).collect();
    chain.push("write E.x".to_string());

    let explain = |json: bool| {
        let mut args: Vec<std::ffi::OsString> =
            ["explain", "--agent", "A", "--skill", "S", "--tool", top.as_str()].iter().map(Into::into).collect();
        if json {
            args.extend(["--format".into(), "json".into()]);
        }
        args.push(pkg.clone().into_os_string());
        let run = permitc(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    };

    let run = explain(false);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], format!("(A, S, {top}): never"));
    let never = format!(
        "  * agent layer: never — never [T0] (inherited: `{top}` calls `T0`) at {shown}/agents.permits:{NEVER_LINE}: `never [T0]`"
    );
    assert!(lines.contains(&never.as_str()), "expected `{never}` in:\n{}", lines[..lines.len().min(8)].join("\n"));
    let changes = format!("    changes: {} at {shown}/tools.permits:2", chain.join(" → "));
    assert!(lines.iter().any(|l| *l == changes), "no witness line walking the whole chain");

    let run = explain(true);
    let v: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(v["level"], "never");
    let reasons = v["reasons"].as_array().expect("reasons");
    let inherited =
        reasons.iter().find(|r| r["level"] == "never").unwrap_or_else(|| panic!("no never reason: {reasons:#?}"));
    assert_eq!(inherited["kind"], "inherited", "{inherited:#}");
    assert_eq!(inherited["via"], "T0", "{inherited:#}");
    assert_eq!(inherited["rule"], "never [T0]");
    let w = v["witnesses"].as_array().expect("witnesses");
    assert_eq!(w.len(), 1);
    assert_eq!(w[0]["effect"], "changes");
    let path: Vec<&str> = w[0]["path"].as_str().expect("path").split(" → ").collect();
    assert_eq!(path.len(), n + 1);
    assert!(path.iter().zip(&chain).all(|(a, b)| a == b), "the witness path is not the chain");
    assert_eq!(w[0]["at"], Value::from(format!("{shown}/tools.permits:2")));
}

#[test]
fn cycle_of_1000_tools_gives_every_tool_the_write() {
    const N: usize = 1000;
    const WRITER: usize = 500;
    let t = Temp::new("cycle");
    // T0 calls T999, every other Ti calls T(i-1): one cycle through all 1000; T500 also writes.
    let mut tools = String::from("entity E { x }\n");
    let _ = writeln!(tools, "tool T0 \"t\" () {{ call T{} }}", N - 1);
    for i in 1..N {
        let extra = if i == WRITER { " write E.x" } else { "" };
        let _ = writeln!(tools, "tool T{i} \"t\" () {{ call T{}{extra} }}", i - 1);
    }
    t.write("pkg/tools.permits", &tools);
    t.write("pkg/agents.permits", agents(&format!("T0, T{}", N - 1)).replace("never [T0]", "never [T1]"));
    let pkg = t.path("pkg");

    let run = permitc(&["check".as_ref(), pkg.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let out = t.path("table.json");
    let run = permitc(&["compile".as_ref(), pkg.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = permits::table::Table::load_path(&out).expect("table loads");
    assert_eq!(table.tools.len(), N);
    let v = serde_json::to_value(&table.tools).expect("json");
    for i in 0..N {
        let name = format!("T{i}");
        let effects = v[&name]["effects"].as_object().expect("effects");
        assert_eq!(effects.keys().collect::<Vec<_>>(), ["changes"], "{name}");
        // Walk the witness hops: they must reach the write without going round the cycle.
        let mut at = name.clone();
        let mut steps = 0;
        loop {
            let hop = &v[&at]["effects"]["changes"]["witness"];
            match hop["kind"].as_str() {
                Some("call") => at = hop["text"].as_str().expect("callee").to_string(),
                Some("operation") => {
                    assert_eq!(hop["text"], "write E.x", "{name}");
                    assert_eq!(at, format!("T{WRITER}"), "{name}");
                    assert_eq!(hop["at"]["line"], Value::from(WRITER + 2));
                    break;
                }
                other => panic!("{name}: unexpected hop {other:?}"),
            }
            steps += 1;
            assert!(steps <= N, "the witness of {name} goes round the cycle");
        }
    }
    // Every tool calls into T1, so every offered tool inherits `never`.
    let entries = serde_json::to_value(&table.entries).expect("json");
    for tool in ["T0".to_string(), format!("T{}", N - 1)] {
        assert_eq!(entries["A"]["S"][&tool]["level"], "never", "{tool}");
    }
    // The explained path of T0 is T0 → T999 → … → T500 → write E.x.
    let run = permitc(&[
        "explain".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--agent".as_ref(),
        "A".as_ref(),
        "--skill".as_ref(),
        "S".as_ref(),
        "--tool".as_ref(),
        "T0".as_ref(),
        pkg.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let e: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let path: Vec<&str> = e["witnesses"][0]["path"].as_str().expect("path").split(" → ").collect();
    assert_eq!(path.first(), Some(&"T0"));
    assert_eq!(path.last(), Some(&"write E.x"));
    assert_eq!(path[path.len() - 2], format!("T{WRITER}"));
    assert!(path.len() <= N + 1, "{}", path.len());
}
