//! Delegation in the language and the table (spec §3b) on `policies/research-desk`: the levels of
//! `shared/cases/delegation-modes.md` outcomes 1–3 and the delegated half of 4 through the one evaluator
//! (`Table::level_of` with a chain), the checks on `delegates` (unknown names with the nearest, a skill the
//! agent does not have, a cycle, an entry written twice), the route nearest the root, `fmt`, `graph`, and
//! tables without delegation keeping their bytes. The runtime's chains (`Call::delegated_by`, chain-bound
//! rules, the fingerprint) come with the rest of the delegation issue.

use permits::table::{CallRef, ChainLink, Level, Route, Table};
use serde_json::{Value, json};

use crate::common::{codes, compile_text, table_of};

type R = Result<(), Box<dyn std::error::Error>>;

fn desk() -> Result<Table, Box<dyn std::error::Error>> {
    Ok(permits::compile::compile_path(&crate::root().join("policies/research-desk"))?)
}

fn link(agent: &str, skill: &str) -> ChainLink {
    ChainLink::new(agent, skill)
}

/// The level of a call, or `never` with the refusal's words.
fn level(
    table: &Table,
    (agent, skill, tool): (&str, &str, &str),
    args: &Value,
    mode: Option<&str>,
    via: &[ChainLink],
) -> (Level, String) {
    match table.level_of(CallRef { agent, skill, tool, arguments: args, requester: Some("Ben"), mode, via }) {
        Ok(of) => (of.level, String::new()),
        Err(why) => (Level::Never, why.to_string()),
    }
}

/// Outcomes 1–3 and the delegated half of 4, as values.
#[test]
fn a_delegated_call_is_never_looser_than_its_links() -> R {
    let t = desk()?;
    let fetch = json!({ "url": "https://a.example/x" });
    let look = ("Researcher", "Look", "WebFetch");
    let coder = [link("Coder", "FixBug")];
    // 1. WebFetch alone on its own; via Coder.FixBug proposed (Coder's `reaches_out: propose`).
    assert_eq!(level(&t, look, &fetch, None, &[]).0, Level::Alone);
    assert_eq!(level(&t, look, &fetch, None, &coder).0, Level::Propose);
    assert_eq!(level(&t, look, &fetch, None, &[link("Reviewer", "Review")]).0, Level::Propose);
    // 2. SendMail via Coder.FixBug: never (Coder's `sends: never`), though Researcher alone proposes it.
    let mail = json!({ "to": "a@x.example" });
    assert_eq!(level(&t, ("Researcher", "Look", "SendMail"), &mail, None, &[]).0, Level::Propose);
    assert_eq!(level(&t, ("Researcher", "Look", "SendMail"), &mail, None, &coder).0, Level::Never);
    // 3. ReadFile via Coder.FixBug alone; the undeclared chain Coder.FixBug via Researcher.Look never.
    let read = json!({ "path": "src/lib.rs" });
    assert_eq!(level(&t, ("Researcher", "Look", "ReadFile"), &read, None, &coder).0, Level::Alone);
    let (l, why) = level(&t, ("Coder", "FixBug", "ReadFile"), &read, None, &[link("Researcher", "Look")]);
    assert_eq!(l, Level::Never);
    assert_eq!(why, "not a declared delegation: `Researcher.Look` does not delegate to `Coder.FixBug`");
    // A link naming an agent that does not have the skill, or nothing at all, is not declared either.
    let (l, why) = level(&t, look, &fetch, None, &[link("Reviewer", "FixBug")]);
    assert_eq!(
        (l, why.as_str()),
        (Level::Never, "not a declared delegation: `Reviewer.FixBug` does not delegate to `Researcher.Look`")
    );
    assert_eq!(level(&t, look, &fetch, None, &[link("Nobody", "Look")]).0, Level::Never);
    // Two links: Reviewer.Review does not delegate to Coder.FixBug, so the second link is undeclared.
    let (l, why) = level(&t, look, &fetch, None, &[link("Coder", "FixBug"), link("Reviewer", "Review")]);
    assert_eq!(
        (l, why.as_str()),
        (Level::Never, "not a declared delegation: `Reviewer.Review` does not delegate to `Coder.FixBug`")
    );
    // 4. A delegated WebFetch in Plan is never (the mode is a layer of the delegated call too).
    assert_eq!(level(&t, look, &fetch, Some("Plan"), &coder).0, Level::Never);
    // 8 (the level): BuyCredits(300) via Coder is proposed (Coder's agent-layer default for `spends`).
    let buy = json!({ "amount": 300 });
    assert_eq!(level(&t, ("Researcher", "Look", "BuyCredits"), &buy, None, &[]).0, Level::Alone);
    assert_eq!(level(&t, ("Researcher", "Look", "BuyCredits"), &buy, None, &coder).0, Level::Propose);
    Ok(())
}

/// The table carries the `delegates` entries and each link's rows for every tool a descendant can be
/// offered, with the link's reasons; `possible_levels_via` agrees with `level_of`.
#[test]
fn the_table_carries_each_links_rows() -> R {
    let t = desk()?;
    assert_eq!(t.skills["FixBug"].delegates, vec!["Researcher.Look".to_string()]);
    assert!(t.skills["Look"].delegates.is_empty());
    let fixbug = &t.links["Coder"]["FixBug"];
    assert_eq!(
        fixbug.keys().map(String::as_str).collect::<Vec<_>>(),
        ["BuyCredits", "ReadFile", "SendMail", "WebFetch"]
    );
    assert_eq!(fixbug["WebFetch"].level, Some(Level::Propose));
    assert!(
        fixbug["WebFetch"].because.iter().any(|r| r.rule == "reaches_out: propose"),
        "{:?}",
        fixbug["WebFetch"].because
    );
    assert_eq!(fixbug["SendMail"].level, Some(Level::Never));
    assert_ne!(fixbug["WebFetch"].link_digest, t.links["Reviewer"]["Review"]["WebFetch"].link_digest);
    assert!(!t.links.contains_key("Researcher"), "Look delegates nothing");
    let via = [link("Coder", "FixBug")];
    assert_eq!(
        t.possible_levels_via("Researcher", "Look", "WebFetch", None, &via)
            .map_err(|e| e.as_str())?
            .into_iter()
            .collect::<Vec<_>>(),
        [Level::Propose]
    );
    assert_eq!(
        t.possible_levels_via("Coder", "FixBug", "ReadFile", None, &[link("Researcher", "Look")])
            .map_err(|e| e.as_str())?
            .into_iter()
            .collect::<Vec<_>>(),
        [Level::Never]
    );
    Ok(())
}

const BASE: &str = "person P\nqueue Q { decided_by [P] }\n\
    extern tool Fetch \"Fetch\" (url: string) : reaches_out\n\
    agent Parent \"p\" { sponsor P\n may { reaches_out: alone }\n skills [Work] }\n\
    agent Child \"c\" { sponsor P\n may { reaches_out: propose }\n skills [Help] }\n";

/// The route nearest the root that sends the tool to someone other than the requester decides a delegated
/// proposal (spec §3b "Route"): the parent's queue, not the child's default `requester`.
#[test]
fn a_delegated_proposal_goes_to_the_route_nearest_the_root() -> R {
    let t = table_of(&format!(
        "{BASE}skill Work \"w\" {{ tools [Fetch]\n route Fetch to queue Q\n delegates [Child.Help] }}\nskill Help \"h\" {{ tools [Fetch] }}\n"
    ));
    let args = json!({ "url": "https://x.example" });
    let call = |via| CallRef {
        agent: "Child",
        skill: "Help",
        tool: "Fetch",
        arguments: &args,
        requester: None,
        mode: None,
        via,
    };
    let direct = t.level_of(call(&[])).map_err(|e| e.to_string())?;
    assert_eq!((direct.level, direct.route), (Level::Propose, &Route::Requester));
    let delegated = t.level_of(call(&[link("Parent", "Work")])).map_err(|e| e.to_string())?;
    assert_eq!((delegated.level, delegated.route), (Level::Propose, &Route::Queue("Q".into())));
    Ok(())
}

/// The checks: an unknown agent or skill with the nearest name, a skill the agent does not have, a cycle, an
/// entry written twice; each with its stable code, all collected.
#[test]
fn delegates_entries_are_checked() {
    let text = format!(
        "{BASE}skill Work \"w\" {{ tools [Fetch]\n delegates [Chld.Help, Child.Hlp, Child.Work, Child.Help, Child.Help] }}\n\
         skill Help \"h\" {{ tools [Fetch] }}\n"
    );
    let out = compile_text(&text);
    let got = codes(&out);
    assert_eq!(
        got,
        [
            "permits::check::unknown",
            "permits::check::unknown",
            "permits::check::delegate_skill",
            "permits::check::repeated"
        ],
        "{}",
        permits::diagnostics::render_plain(&out.diagnostics, &out.sources)
    );
    let words: Vec<String> =
        out.diagnostics.iter().map(|d| format!("{} / {}", d.message, d.help.clone().unwrap_or_default())).collect();
    assert!(words[0].contains("unknown agent `Chld`") && words[0].contains("did you mean `Child`?"), "{words:?}");
    assert!(words[1].contains("unknown skill `Hlp`") && words[1].contains("did you mean `Help`?"), "{words:?}");
    assert!(words[2].starts_with("`Work` is not one of the skills of `Child`"), "{words:?}");

    // A cycle: Work → Help → Work.
    let cyclic = format!(
        "{BASE}skill Work \"w\" {{ tools [Fetch]\n delegates [Child.Help] }}\nskill Help \"h\" {{ tools [Fetch]\n delegates [Parent.Work] }}\n"
    );
    let out = compile_text(&cyclic);
    assert_eq!(codes(&out), ["permits::check::delegation_cycle"]);
    assert_eq!(out.diagnostics[0].message, "the skills `Help`, `Work` delegate in a cycle");
    assert!(out.table.is_none());
}

/// `fmt` writes `delegates` and `via` in the canonical layout, and formatting is idempotent.
#[test]
fn fmt_writes_delegates_and_via() -> R {
    let messy = "skill Work \"w\" {\n  tools [Fetch]\n  delegates [ Child.Help ,Parent.Work, ]\n}\n\
                 test \"t\" {\n  expect   Child.Help.Fetch   via Parent.Work  via  X.Y in Plan is never\n}\n";
    let formatted = permits::fmt::format_file(messy).map_err(|e| format!("{e:?}"))?;
    assert!(formatted.contains("    delegates [Child.Help, Parent.Work]\n"), "{formatted}");
    assert!(
        formatted.contains("    expect Child.Help.Fetch via Parent.Work via X.Y in Plan is never\n"),
        "{formatted}"
    );
    assert_eq!(permits::fmt::format_file(&formatted).map_err(|e| format!("{e:?}"))?, formatted);
    Ok(())
}

/// A package without `delegates` compiles to a table with no `links` member and skills without a
/// `delegates` member: older tables and their digests are unchanged.
#[test]
fn tables_without_delegation_keep_their_bytes() -> R {
    let t = table_of(&format!("{BASE}skill Work \"w\" {{ tools [Fetch] }}\nskill Help \"h\" {{ tools [Fetch] }}\n"));
    let json = permits::table::canonical_json(&serde_json::to_value(&t)?)?;
    assert!(!json.contains("\"links\"") && !json.contains("\"delegates\""), "{json}");
    Ok(())
}
