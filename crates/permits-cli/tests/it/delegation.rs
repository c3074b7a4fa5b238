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

/// The level of a call, or `never` with the refusal's words; the `LevelIndex` must give the same answer.
fn level(
    table: &Table,
    (agent, skill, tool): (&str, &str, &str),
    args: &Value,
    mode: Option<&str>,
    via: &[ChainLink],
) -> (Level, String) {
    let call = CallRef { agent, skill, tool, arguments: args, requester: Some("Ben"), mode, via };
    let direct = table.level_of(call);
    assert_eq!(permits::table::LevelIndex::new(table).level_of(call), direct, "{call:?}");
    match direct {
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

// ---------------------------------------------------------------------------------------------------------
// The runtime's chains: `Call::delegated_by`, the task's root, routes, rules bound to their chain, the
// fingerprint and staleness, Authority across the chain (outcomes 5, 6, 7, 9).

use permits::runtime::{
    AdmitAll, ApproveMode, Authority, Call, Handled, NewRule, Principal, ProposalRequest, RunOutcome, Runtime, Scope,
    Status, WorkFor,
};

fn runtime_of(table: Table) -> Runtime {
    Runtime::new(table, AdmitAll)
}

fn fetch(url: &str) -> Call {
    Call::new("Researcher", "Look", "WebFetch").with_arguments(json!({ "url": url })).for_person("Ben")
}

fn done(_: &permits::runtime::RunContext<'_>) -> RunOutcome {
    RunOutcome::Done(json!("ok"))
}

/// The runtime decides a delegated call with every link's layers, names the chain, and refuses an undeclared
/// one; a delegated call's root is the task's root (spec §5a): a task begun by Coder in FixBug takes the
/// Researcher's call delegated by it, and refuses the same call made directly.
#[test]
fn the_runtime_decides_chains_and_binds_them_to_the_tasks_root() -> R {
    let rt = runtime_of(desk()?);
    let d = rt.decide(&fetch("https://a.example/x").delegated_by("Coder", "FixBug"))?;
    assert_eq!(d.level, Level::Propose);
    assert_eq!(
        d.summary(),
        "`Researcher` / `Look` / `WebFetch` via `Coder.FixBug`: propose (waits on a decision from Ben)"
    );
    assert!(d.reasons.iter().any(|r| r.rule == "reaches_out: propose"), "{:?}", d.reasons);
    let d = rt.decide(
        &Call::new("Coder", "FixBug", "ReadFile")
            .with_arguments(json!({"path": "a"}))
            .delegated_by("Researcher", "Look"),
    )?;
    assert_eq!(d.level, Level::Never);
    let read = Call::new("Coder", "FixBug", "ReadFile").with_arguments(json!({"path": "a"})).for_person("Ben");
    rt.run_alone(&read.in_task("T-root"), done)?;
    let delegated = Call::new("Researcher", "Look", "ReadFile").with_arguments(json!({"path": "a"})).for_person("Ben");
    let ran = rt.run_alone(&delegated.clone().delegated_by("Coder", "FixBug").in_task("T-root"), done)?;
    assert_eq!(ran.decision.level, Level::Alone);
    let d = rt.decide(&delegated.in_task("T-root"))?;
    assert_eq!(d.level, Level::Never);
    assert!(d.refusal.unwrap_or_default().starts_with("not this task's root"), "direct call in a delegated task");
    Ok(())
}

/// Outcome 5's delegated half: in an unattended task a delegated WebFetch (proposed, decided by the
/// requester) is `never` ("unattended: nobody to ask").
#[test]
fn outcome_5_a_delegated_proposal_for_the_requester_is_never_unattended() -> R {
    let rt = runtime_of(desk()?);
    let d = rt.decide(
        &fetch("https://a.example/x").delegated_by("Coder", "FixBug").in_mode("Unattended").in_task("T-night"),
    )?;
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unattended: nobody to ask")));
    Ok(())
}

/// Outcome 6, delegated: approved *for this task* with these arguments, the same delegated fetch runs alone in
/// `T1` (a task rule), another argument is proposed, another task proposes it again, and so does the same
/// call made through another chain.
#[test]
fn outcome_6_a_delegated_task_rule_lives_in_its_task_and_its_chain() -> R {
    let rt = runtime_of(desk()?);
    let a = fetch("https://a.example/x").delegated_by("Coder", "FixBug");
    let p = rt.propose(&ProposalRequest::new(a.clone(), "T1", "look it up"))?;
    rt.approve_and_run(&p.id, "Ben", &p.fingerprint, ApproveMode::ForThisTask { any_arguments: false }, done)?;
    let rule = rt.rules()?.pop().ok_or("no rule")?;
    assert_eq!(rule.via, vec![link("Coder", "FixBug")]);
    let again = rt.call(&ProposalRequest::new(a.clone(), "T1", "again"), done)?;
    let Handled::Ran(ran) = again else { return Err("not run alone".into()) };
    assert!(ran.decision.task_rule);
    assert_eq!(
        rt.decide(&fetch("https://b.example/").delegated_by("Coder", "FixBug").in_task("T1"))?.level,
        Level::Propose
    );
    assert_eq!(rt.decide(&a.clone().in_task("T2"))?.level, Level::Propose);
    rt.end_task("T1")?;
    assert_eq!(rt.decide(&a.in_task("T1"))?.level, Level::Propose);
    Ok(())
}

/// Outcome 7: a standing rule made from a delegated proposal ("always like this", any arguments) applies to
/// that chain only: the same fetch via Reviewer.Review is still proposed.
#[test]
fn outcome_7_a_standing_rule_applies_to_its_chain_only() -> R {
    let rt = runtime_of(desk()?);
    let via_coder = fetch("https://a.example/x").delegated_by("Coder", "FixBug");
    let p = rt.propose(&ProposalRequest::new(via_coder.clone(), "T7", "look it up"))?;
    rt.approve(&p.id, "Ben", &p.fingerprint, ApproveMode::AlwaysLikeThis)?;
    let d = rt.decide(&fetch("https://c.example/").delegated_by("Coder", "FixBug"))?;
    assert_eq!(d.level, Level::Alone);
    assert!(d.standing_rule.is_some());
    assert_eq!(rt.decide(&fetch("https://a.example/x").delegated_by("Reviewer", "Review"))?.level, Level::Propose);
    // A rule made for the direct call does not reach a delegated one either (the direct call proposes SendMail).
    let mail =
        Call::new("Researcher", "Look", "SendMail").with_arguments(json!({"to": "a@x.example"})).for_person("Ben");
    rt.allow_alone(&NewRule {
        agent: "Researcher".into(),
        tool: "SendMail".into(),
        skill: Some("Look".into()),
        work_for: WorkFor::Person("Ben".into()),
        by: "Ben".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,
        via: Vec::new(),
    })?;
    assert_eq!(rt.decide(&mail)?.level, Level::Alone);
    assert_eq!(rt.decide(&mail.clone().delegated_by("Reviewer", "Review"))?.level, Level::Propose);
    // A rule for an undeclared chain is refused when made.
    let err = rt
        .allow_alone(&NewRule {
            agent: "Researcher".into(),
            tool: "WebFetch".into(),
            skill: Some("Look".into()),
            work_for: WorkFor::Person("Ben".into()),
            by: "Ben".into(),
            scope: Scope::AnyArguments,
            expires_at: None,
            mode: None,
            via: vec![link("Researcher", "Look")],
        })
        .err()
        .ok_or("made")?;
    assert!(err.to_string().starts_with("not a declared delegation"), "{err}");
    Ok(())
}

/// Outcome 9: the fingerprint covers the chain (delegated vs direct differ), and an edit to a link's rules
/// (Coder's `may`) while a delegated proposal waits makes it stale on approval.
#[test]
fn outcome_9_the_fingerprint_covers_the_chain_and_a_links_edit_makes_it_stale() -> R {
    let rt = runtime_of(desk()?);
    let read =
        Call::new("Researcher", "Look", "SendMail").with_arguments(json!({"to": "a@x.example"})).for_person("Ben");
    let direct = rt.propose(&ProposalRequest::new(read.clone(), "T9", "tell"))?;
    let delegated = rt.propose(&ProposalRequest::new(
        fetch("https://a.example/x").delegated_by("Reviewer", "Review"),
        "T10",
        "look",
    ))?;
    let delegated_coder =
        rt.propose(&ProposalRequest::new(fetch("https://a.example/x").delegated_by("Coder", "FixBug"), "T11", "look"))?;
    assert_ne!(direct.fingerprint, delegated.fingerprint);
    assert_ne!(delegated.fingerprint, delegated_coder.fingerprint);
    assert_eq!(delegated_coder.via, vec![link("Coder", "FixBug")]);
    // Coder's `may` edited (`reaches_out: propose_every_time`): the link's digest changes.
    let dir = std::env::temp_dir().join(format!("permits-delegation-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for f in ["agents.permits", "people.permits", "tools.permits"] {
        let text = std::fs::read_to_string(crate::root().join("policies/research-desk").join(f))?;
        let text = if f == "agents.permits" {
            text.replacen(
                "        reaches_out: propose\n        sends: never",
                "        reaches_out: propose_every_time\n        sends: never",
                1,
            )
        } else {
            text
        };
        std::fs::write(dir.join(f), text)?;
    }
    rt.replace_table(permits::compile::compile_path(&dir)?)?;
    let _ = std::fs::remove_dir_all(&dir);
    let err = rt
        .approve(&delegated_coder.id, "Ben", &delegated_coder.fingerprint, ApproveMode::Once)
        .err()
        .ok_or("approved")?;
    assert!(err.to_string().contains("is stale"), "{err}");
    // Reviewer's link did not change: its delegated proposal is still good.
    rt.approve(&delegated.id, "Ben", &delegated.fingerprint, ApproveMode::Once)?;
    Ok(())
}

/// Authority across the chain (spec §3b): execution admits every agent account of the chain, not only the
/// acting one; a host that does not admit Coder refuses a call Coder delegated.
#[test]
fn authority_admits_every_agent_of_the_chain() -> R {
    struct NotCoder;
    impl Authority for NotCoder {
        fn admits(&self, principal: Principal<'_>, _: &str, _: &Value) -> Result<(), String> {
            if principal.name() == "Coder" { Err("Coder has no account here".into()) } else { Ok(()) }
        }
    }
    let rt = Runtime::new(desk()?, NotCoder);
    let read = Call::new("Researcher", "Look", "ReadFile").with_arguments(json!({"path": "a"})).for_person("Ben");
    rt.run_alone(&read.clone(), done)?;
    let err = rt.run_alone(&read.delegated_by("Coder", "FixBug"), done).err().ok_or("ran")?;
    assert!(err.to_string().contains("Coder has no account here"), "{err}");
    Ok(())
}

/// `diff` (spec §3b): a new `delegates` entry is a widening ("via `Parent.Work`: `never` → …"), removing it a
/// narrowing, and a loosened link row is a widening though no direct call changed.
#[test]
fn diff_treats_a_new_entry_and_a_loosened_link_as_widenings() -> R {
    let package = |parent: &str, delegates: &str| {
        table_of(&format!(
            "person P\nextern tool Fetch \"Fetch\" (url: string) : reaches_out\n\
             agent Parent \"p\" {{ sponsor P\n may {{ {parent} }}\n skills [Work] }}\n\
             agent Child \"c\" {{ sponsor P\n may {{ reaches_out: alone }}\n skills [Help] }}\n\
             skill Work \"w\" {{ tools [Fetch]\n {delegates} }}\nskill Help \"h\" {{ tools [Fetch] }}\n"
        ))
    };
    let none = package("reaches_out: never", "");
    let strict = package("reaches_out: never", "delegates [Child.Help]");
    let loose = package("reaches_out: propose", "delegates [Child.Help]");
    let find = |changes: &[permits::diff::Change]| {
        changes.iter().find(|c| (c.agent.as_str(), c.tool.as_str()) == ("Child", "Fetch")).cloned()
    };
    // A new entry under a parent that never fetches widens nothing: the delegated call is `never` either way.
    assert!(find(&permits::diff::diff(&none, &strict)).is_none());
    let added = find(&permits::diff::diff(
        &package("reaches_out: alone", ""),
        &package("reaches_out: alone", "delegates [Child.Help]"),
    ))
    .ok_or("no change for the new entry")?;
    assert_eq!(added.direction, permits::diff::Direction::Widening);
    assert!(added.details.iter().any(|(_, d)| d == "via `Parent.Work`: `never` → `alone`"), "{:?}", added.details);
    let loosened = find(&permits::diff::diff(&strict, &loose)).ok_or("no change for the loosened link")?;
    assert_eq!(loosened.direction, permits::diff::Direction::Widening);
    assert!(
        loosened.details.iter().any(|(_, d)| d == "via `Parent.Work`: `never` → `propose`"),
        "{:?}",
        loosened.details
    );
    let removed = find(&permits::diff::diff(&loose, &none)).ok_or("no change for the removed entry")?;
    assert_eq!(removed.direction, permits::diff::Direction::Narrowing);
    Ok(())
}

/// A two-link chain for `diff`: A in S delegates to B.T, B in T delegates to C.U; `root` is A's rule for
/// `reaches_out`, `s_delegates` S's `delegates` line.
fn two_links(root: &str, s_delegates: &str) -> String {
    format!(
        "person P\nextern tool Fetch \"Fetch\" (url: string) : reaches_out\n\
         agent A \"a\" {{ sponsor P\n may {{ {root} }}\n skills [S] }}\n\
         agent B \"b\" {{ sponsor P\n may {{ reaches_out: alone }}\n skills [T] }}\n\
         agent C \"c\" {{ sponsor P\n may {{ reaches_out: alone }}\n skills [U] }}\n\
         skill S \"s\" {{ tools [Fetch]\n {s_delegates} }}\n\
         skill T \"t\" {{ tools [Fetch]\n delegates [C.U] }}\n\
         skill U \"u\" {{ tools [Fetch] }}\n"
    )
}

/// `diff` through a chain of two links (issue #21): what C can do via B.T via A.S changes when the root link
/// A.S loosens, tightens or stops delegating, though C's direct call and C via B.T alone do not; each change is
/// named with its whole chain, nearest link first, and directed as the delegated call moves.
#[test]
fn diff_follows_a_chain_of_two_links() -> R {
    let delegating = "delegates [B.T]";
    let strict = table_of(&two_links("reaches_out: propose", delegating));
    let loose = table_of(&two_links("reaches_out: alone", delegating));
    let shut = table_of(&two_links("reaches_out: never", delegating));
    let cut = table_of(&two_links("reaches_out: propose", ""));
    let child = |changes: &[permits::diff::Change]| {
        changes.iter().find(|c| (c.agent.as_str(), c.skill.as_str(), c.tool.as_str()) == ("C", "U", "Fetch")).cloned()
    };
    let details = |c: &permits::diff::Change| c.details.iter().map(|(d, t)| (*d, t.clone())).collect::<Vec<_>>();
    use permits::diff::Direction::{Narrowing, Widening};

    let loosened = child(&permits::diff::diff(&strict, &loose)).ok_or("no change for C when the root loosens")?;
    assert_eq!(details(&loosened), [(Widening, "via `B.T` via `A.S`: `propose` → `alone`".to_string())]);
    assert_eq!(loosened.direction, Widening);

    let tightened = child(&permits::diff::diff(&strict, &shut)).ok_or("no change for C when the root tightens")?;
    assert_eq!(details(&tightened), [(Narrowing, "via `B.T` via `A.S`: `propose` → `never`".to_string())]);

    let removed = child(&permits::diff::diff(&strict, &cut)).ok_or("no change for C when A.S stops delegating")?;
    assert_eq!(details(&removed), [(Narrowing, "via `B.T` via `A.S`: `propose` → `never`".to_string())]);
    let added = child(&permits::diff::diff(&cut, &strict)).ok_or("no change for C when A.S starts delegating")?;
    assert_eq!(details(&added), [(Widening, "via `B.T` via `A.S`: `never` → `propose`".to_string())]);

    // The one-link chain of B is reported as before, with its own name.
    let b = permits::diff::diff(&strict, &loose);
    let b = b.iter().find(|c| (c.agent.as_str(), c.skill.as_str()) == ("B", "T")).ok_or("no change for B")?;
    assert_eq!(details(b), [(Widening, "via `A.S`: `propose` → `alone`".to_string())]);
    Ok(())
}

/// `permitc diff` (the real binary) on the two-link chain: the root link loosening is a widening of C's
/// delegated call, named by its chain, and `--fail-on-widen` exits 1.
#[test]
fn permitc_diff_names_a_two_link_chain() -> R {
    let dir = std::env::temp_dir().join(format!("permits-diff-chain-{}", std::process::id()));
    let (old, new) = (dir.join("old"), dir.join("new"));
    for (path, root) in [(&old, "reaches_out: propose"), (&new, "reaches_out: alone")] {
        std::fs::create_dir_all(path)?;
        std::fs::write(path.join("desk.permits"), two_links(root, "delegates [B.T]"))?;
    }
    let (old, new) = (old.to_str().ok_or("path")?, new.to_str().ok_or("path")?);
    let (code, out, err) = permitc(&["diff", old, new, "--fail-on-widen"])?;
    std::fs::remove_dir_all(&dir)?;
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.starts_with("3 decisions changed: 3 widening, 0 narrowing, 0 neutral\n"), "{out}");
    assert!(out.contains("WIDENING  (C, U, Fetch)\n          via `B.T` via `A.S`: `propose` → `alone`\n"), "{out}");
    Ok(())
}

fn permitc(args: &[&str]) -> Result<(i32, String, String), Box<dyn std::error::Error>> {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_permitc")).args(args).current_dir(crate::root()).output()?;
    Ok((out.status.code().unwrap_or(-1), String::from_utf8(out.stdout)?, String::from_utf8(out.stderr)?))
}

/// `permitc explain --via` (the real binary): outcome 1 — the delegated WebFetch is `propose` and the reason
/// that decides is Coder's rule, named with its link, file and line; an undeclared chain is `never` (exit 0, a
/// decision). `permitc decide --via` decides the same, names the chain, and refuses a link without a `.` (exit 2).
#[test]
fn explain_and_decide_take_the_chain() -> R {
    let (code, out, err) = permitc(&[
        "explain",
        "--agent",
        "Researcher",
        "--skill",
        "Look",
        "--tool",
        "WebFetch",
        "--via",
        "Coder.FixBug",
        "policies/research-desk",
    ])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("(Researcher, Look, WebFetch) via Coder.FixBug: propose\n"), "{out}");
    assert!(
        out.contains("  * agent layer of link `Coder.FixBug`: propose — reaches_out: propose at policies/research-desk/agents.permits:7"),
        "{out}"
    );
    let (code, out, err) = permitc(&[
        "explain",
        "--agent",
        "Coder",
        "--skill",
        "FixBug",
        "--tool",
        "ReadFile",
        "--via",
        "Researcher.Look",
        "policies/research-desk",
    ])?;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "(Coder, FixBug, ReadFile) via Researcher.Look: never\n  refused: not a declared delegation: `Researcher.Look` does not delegate to `Coder.FixBug`\n",
            ""
        )
    );
    let dir = std::env::temp_dir().join(format!("permits-delegation-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let table = dir.join("desk.json");
    let table = table.to_str().ok_or("path")?;
    assert_eq!(permitc(&["compile", "policies/research-desk", "-o", table])?.0, 0);
    let (code, out, _) = permitc(&[
        "decide",
        "--table",
        table,
        "--agent",
        "Researcher",
        "--skill",
        "Look",
        "--tool",
        "SendMail",
        "--args",
        r#"{"to": "a@x.example"}"#,
        "--via",
        "Coder.FixBug",
    ])?;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out)?;
    assert_eq!((v["level"].as_str(), &v["via"]), (Some("never"), &json!([{ "agent": "Coder", "skill": "FixBug" }])));
    let (code, _, err) = permitc(&[
        "decide",
        "--table",
        table,
        "--agent",
        "Researcher",
        "--skill",
        "Look",
        "--tool",
        "SendMail",
        "--via",
        "Coder",
    ])?;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("permits::usage::via") && err.contains("`--via Coder` is not `AGENT.SKILL`"), "{err}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The arguments of a `permitc decide` of `tool` by Researcher in Look on the research desk's compiled table,
/// with `more` after them.
fn decide_desk(
    table: &str,
    tool: &str,
    args: &str,
    more: &[&str],
) -> Result<(i32, String, String), Box<dyn std::error::Error>> {
    let mut all =
        vec!["decide", "--table", table, "--agent", "Researcher", "--skill", "Look", "--tool", tool, "--args", args];
    all.extend_from_slice(more);
    permitc(&all)
}

/// `explain --via` and `decide --via` (the real binaries) agree on what is a decision and what is a usage
/// error: a chain of declared names that is not a declared delegation is `never`, exit 0, from both; a link
/// that is not `AGENT.SKILL` or names an unknown agent or skill is exit 2 from both, with the miette
/// diagnostic `permits::usage::via` and the nearest name.
#[test]
fn explain_and_decide_agree_on_via_exit_codes() -> R {
    let dir = std::env::temp_dir().join(format!("permits-via-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let table = dir.join("desk.json");
    let table = table.to_str().ok_or("path")?;
    assert_eq!(permitc(&["compile", "policies/research-desk", "-o", table])?.0, 0);
    let explain = |via: &str| {
        permitc(&[
            "explain",
            "--agent",
            "Researcher",
            "--skill",
            "Look",
            "--tool",
            "WebFetch",
            "--via",
            via,
            "policies/research-desk",
        ])
    };
    let decide = |via: &str| {
        decide_desk(table, "WebFetch", r#"{"url": "https://a.example"}"#, &["--via", via, "--format", "human"])
    };

    // Declared names, not a declared delegation (Coder has no skill Review): a decision.
    let (code, out, err) = explain("Coder.Review")?;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "(Researcher, Look, WebFetch) via Coder.Review: never\n  refused: not a declared delegation: `Coder.Review` does not delegate to `Researcher.Look`\n",
            ""
        )
    );
    let (code, out, err) = decide("Coder.Review")?;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "`Researcher` / `Look` / `WebFetch` via `Coder.Review`: never (not a declared delegation: `Coder.Review` does not delegate to `Researcher.Look`)\n",
            ""
        )
    );
    let (code, out, _) = permitc(&[
        "explain",
        "--agent",
        "Researcher",
        "--skill",
        "Look",
        "--tool",
        "WebFetch",
        "--via",
        "Coder.Review",
        "--format",
        "json",
        "policies/research-desk",
    ])?;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out)?;
    assert_eq!((v["level"].as_str(), &v["via"]), (Some("never"), &json!([{ "agent": "Coder", "skill": "Review" }])));

    // Usage errors, the same from both.
    for (via, message, help) in [
        ("Codr.FixBug", "`--via Codr.FixBug`: the package declares no agent `Codr`", "did you mean `Coder`?"),
        ("Coder.FixBgu", "`--via Coder.FixBgu`: the package declares no skill `FixBgu`", "did you mean `FixBug`?"),
        (
            "Zed.FixBug",
            "`--via Zed.FixBug`: the package declares no agent `Zed`",
            "the package's agents: Coder, Researcher, Reviewer",
        ),
        ("CoderFixBug", "`--via CoderFixBug` is not `AGENT.SKILL`", "joined by one `.`: `--via Coder.FixBug`"),
    ] {
        for (code, out, err) in [explain(via)?, decide(via)?] {
            assert_eq!((code, out.as_str()), (2, ""), "{via}: {err}");
            assert!(err.contains("permits::usage::via"), "{via}: {err}");
            assert!(err.contains(&format!("× {message}")), "{via}: {err}");
            assert!(err.contains(&format!("help: {help}")) || err.contains(help), "{via}: {err}");
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// `permitc decide` in human form says what the JSON says: a `never` without a refusal names the rule that
/// makes it `never` (the layer, the link of a chain, the rule and its place, as `explain` does), and a
/// `propose` spend within the budget's allowance says it is granted automatically, nobody asked, where the JSON
/// carries `automatic_grant`; over the allowance it waits on the requester, and the JSON has no
/// `automatic_grant`.
#[test]
fn decide_names_the_rule_of_a_bare_never_and_an_automatic_grant() -> R {
    let dir = std::env::temp_dir().join(format!("permits-decide-human-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let table = dir.join("desk.json");
    let table = table.to_str().ok_or("path")?;
    assert_eq!(permitc(&["compile", "policies/research-desk", "-o", table])?.0, 0);
    let human = ["--via", "Coder.FixBug", "--requester", "Ben", "--format", "human"];

    let (code, out, _) = decide_desk(table, "SendMail", r#"{"to": "a@x.example"}"#, &human)?;
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "`Researcher` / `Look` / `SendMail` via `Coder.FixBug`: never (agent layer of link `Coder.FixBug`: sends: never at agents.permits:8)\n"
        )
    );

    let (code, out, _) = decide_desk(table, "BuyCredits", r#"{"amount": 300}"#, &human)?;
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "`Researcher` / `Look` / `BuyCredits` via `Coder.FixBug`: propose, granted automatically: nobody is asked (300 cents is within the `Research` allowance of 500 cents; decide keeps no ledger, so nothing is spent yet)\n"
        )
    );
    let (_, out, _) =
        decide_desk(table, "BuyCredits", r#"{"amount": 300}"#, &["--via", "Coder.FixBug", "--requester", "Ben"])?;
    let v: Value = serde_json::from_str(&out)?;
    assert_eq!(
        (v["level"].as_str(), &v["automatic_grant"]),
        (Some("propose"), &json!({"budget": "Research", "amount": 300, "unit": "cents", "alone_up_to": 500}))
    );

    let (code, out, _) = decide_desk(table, "BuyCredits", r#"{"amount": 1500}"#, &human)?;
    assert_eq!(
        (code, out.as_str()),
        (0, "`Researcher` / `Look` / `BuyCredits` via `Coder.FixBug`: propose (waits on a decision from Ben)\n")
    );
    let (_, out, _) =
        decide_desk(table, "BuyCredits", r#"{"amount": 1500}"#, &["--via", "Coder.FixBug", "--requester", "Ben"])?;
    let v: Value = serde_json::from_str(&out)?;
    assert_eq!((v["level"].as_str(), v.get("automatic_grant")), (Some("propose"), None));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Spec §6 "Supersession": a new proposal supersedes an earlier one with the same operation key, **chain**,
/// tool and subject. Two chains to one root in one task are two lines of work: a proposal along one leaves
/// the other's waiting; a newer one along the same chain supersedes it.
#[test]
fn supersession_is_kept_to_its_chain() -> R {
    let t = table_of(
        "person P\n\
         tool Order \"Order\" (sku: string, quantity: int) {\n reach supplier\n subject sku\n}\n\
         agent Lead \"l\" { sponsor P\n may { reaches_out: propose }\n skills [Plan] }\n\
         agent Mid \"m\" { sponsor P\n may { reaches_out: propose }\n skills [Relay] }\n\
         agent Buyer \"b\" { sponsor P\n may { reaches_out: propose }\n skills [Buy] }\n\
         skill Plan \"p\" { tools [Order]\n delegates [Mid.Relay, Buyer.Buy] }\n\
         skill Relay \"r\" { tools [Order]\n delegates [Buyer.Buy] }\n\
         skill Buy \"b\" { tools [Order] }\n",
    );
    let rt = runtime_of(t);
    let order = |quantity: i64| {
        Call::new("Buyer", "Buy", "Order").with_arguments(json!({"sku": "tub", "quantity": quantity})).for_person("P")
    };
    let direct = rt.propose(&ProposalRequest::new(order(1).delegated_by("Lead", "Plan"), "T1", "one tub"))?;
    let relayed = rt.propose(&ProposalRequest::new(
        order(2).delegated_by("Mid", "Relay").delegated_by("Lead", "Plan"),
        "T1",
        "two tubs, through Mid",
    ))?;
    assert_eq!(relayed.via, vec![link("Mid", "Relay"), link("Lead", "Plan")]);
    assert_eq!(rt.proposal(&direct.id)?.status, Status::Waiting, "another chain's proposal superseded it");
    let newer = rt.propose(&ProposalRequest::new(order(3).delegated_by("Lead", "Plan"), "T1", "three tubs"))?;
    assert_eq!(rt.proposal(&direct.id)?.status, Status::Superseded);
    assert_eq!(rt.proposal(&direct.id)?.reason, Some(format!("superseded by `{}`", newer.id)));
    assert_eq!(rt.proposal(&relayed.id)?.status, Status::Waiting);
    // The root's own order in its task is a third line: it supersedes neither delegated one.
    let own = Call::new("Lead", "Plan", "Order").with_arguments(json!({"sku": "tub", "quantity": 4})).for_person("P");
    let own = rt.propose(&ProposalRequest::new(own, "T1", "four tubs, myself"))?;
    assert_eq!(own.status, Status::Waiting);
    assert_eq!(rt.proposal(&newer.id)?.status, Status::Waiting);
    assert_eq!(rt.proposal(&relayed.id)?.status, Status::Waiting);
    Ok(())
}
