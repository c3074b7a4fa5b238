//! The inbox's pages, rendered on the server with `maud` (every value escaped by it; no script). Text from
//! the agent, the host or the table goes through [`shown`]: every invisible character is written as its
//! escape (`\u{202e}`) in a marked span, never dropped (spec §5a "What a person is shown is what runs").

use maud::{DOCTYPE, Markup, PreEscaped, html};
use permits_runtime::display::is_invisible;
use permits_runtime::table::{Level, Route, Table, canonical_value};
use permits_runtime::{BudgetStatus, Proposal, StandingRule, Status, TableInstall, WorkFor};

use super::Why;
use axum::http::StatusCode;

const CSS: &str = "
*{box-sizing:border-box}
body{margin:0;font:16px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1b1b1b;background:#f6f6f4}
header{background:#20313b;color:#fff;padding:.5rem 1rem;display:flex;flex-wrap:wrap;gap:.25rem 1rem;align-items:center}
header a{color:#fff}
header form{margin:0 0 0 auto}
main{max-width:46rem;margin:0 auto;padding:1rem}
h1{font-size:1.35rem;margin:.5rem 0}
h2{font-size:1.1rem;margin:1.25rem 0 .4rem}
section>h2:first-child{margin-top:0}
section,.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.75rem;margin:.6rem 0}
dl{display:grid;grid-template-columns:minmax(6rem,max-content) 1fr;gap:.2rem .75rem;margin:0}
dt{color:#555}
dd{margin:0;min-width:0}
dd,td,li,p,pre,code{overflow-wrap:anywhere;word-break:break-word}
pre{white-space:pre-wrap;margin:0;font:inherit}
code{font-family:ui-monospace,monospace;font-size:.92em}
.esc{background:#ffe08a;color:#6b3900;border:1px solid #c9a227;border-radius:3px;padding:0 2px;font-family:ui-monospace,monospace}
.status{display:inline-block;padding:0 .4rem;border-radius:4px;background:#e4e9ec;font-size:.9em}
.no{border-left:4px solid #b94a48;padding-left:.6rem}
.yes{border-left:4px solid #2f7d32;padding-left:.6rem}
.bar{display:flex;height:1rem;background:#e8e8e8;border-radius:4px;overflow:hidden;margin:.3rem 0}
.bar span{display:block;height:100%}
.spent{background:#5a6f7c}.reserved{background:#9db3c0}.this{background:#e08a1e}
form.decide{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:.5rem 0}
button{font:inherit;padding:.55rem 1rem;border-radius:5px;border:1px solid #20313b;background:#20313b;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#20313b}
input,select,textarea{font:inherit;padding:.45rem;border:1px solid #aaa;border-radius:4px;max-width:100%}
textarea{width:100%}
label{display:block;margin:.4rem 0}
ul.list{list-style:none;padding:0;margin:0}
ul.list li{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.6rem;margin:.5rem 0}
.muted{color:#666;font-size:.92em}
nav.pages{display:flex;gap:1rem;margin:1rem 0}
";

/// Text from outside the service, with every invisible character shown as a marked escape. `lines` keeps
/// line feeds as line breaks (why, evidence). Text the runtime already made visible (a host's naming is
/// stored so: `Ticket\u{200b}`) has its escapes marked the same way.
pub(crate) fn shown(text: &str, lines: bool) -> Markup {
    let mut plain = String::new();
    let mut parts: Vec<(bool, String)> = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let escape = if is_invisible(c) && !(lines && c == '\n') {
            Some((format!("\\u{{{:x}}}", u32::from(c)), c.len_utf8()))
        } else {
            written_escape(rest).map(|n| (rest[..n].to_string(), n))
        };
        match escape {
            Some((text, len)) => {
                if !plain.is_empty() {
                    parts.push((false, std::mem::take(&mut plain)));
                }
                parts.push((true, text));
                rest = &rest[len..];
            }
            None => {
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !plain.is_empty() {
        parts.push((false, plain));
    }
    html! {
        @for (escape, part) in &parts {
            @if *escape { span.esc title="an invisible character, shown as its code point" { (part) } } @else { (part) }
        }
    }
}

/// The length of a `\u{…}` escape (1 to 6 hex digits) at the start of `text`, if there is one.
fn written_escape(text: &str) -> Option<usize> {
    let digits = text.strip_prefix("\\u{")?;
    let n = digits.bytes().take_while(u8::is_ascii_hexdigit).count();
    ((1..=6).contains(&n) && digits.as_bytes().get(n) == Some(&b'}')).then_some(3 + n + 1)
}

/// A duration for a person: "40 s", "15 min", "2 h 5 min".
pub(crate) fn duration(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// A time in UTC: `2026-12-02 01:14:09 UTC`.
pub(crate) fn utc(seconds: u64) -> String {
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (no dates before it occur here).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rest / 3600, (rest % 3600) / 60, rest % 60)
}

fn layout(title: &str, who: Option<(&str, &str)>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · permits inbox" }
                style { (PreEscaped(CSS)) }
            }
            body {
                header {
                    strong { "permits inbox" }
                    @if let Some((person, csrf)) = who {
                        a href="/inbox/waiting" { "Waiting" }
                        a href="/inbox/rules" { "My rules" }
                        a href="/inbox/history" { "History" }
                        a href="/inbox/tables" { "Tables" }
                        a href="/inbox/totp" { "Second factor" }
                        form method="post" action="/inbox/sign-out" {
                            input type="hidden" name="csrf" value=(csrf);
                            span.muted style="color:#cfd8dc" { (person) " " }
                            button.secondary type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A page with one message (an error or a refusal, in the runtime's words).
pub(crate) fn message(who: Option<(&str, &str)>, status: StatusCode, text: &str) -> Markup {
    let title = status.canonical_reason().unwrap_or("Refused");
    layout(
        title,
        who,
        html! {
            h1 { (title) }
            section.no { p #message { (shown(text, true)) } }
            p { a href="/inbox/waiting" { "Back to what waits for you" } }
        },
    )
}

/// The sign-in form.
pub(crate) fn sign_in(csrf: &str, next: &str, note: Option<&str>, person: &str) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            @if let Some(note) = note { section.no { p #note { (note) } } }
            section {
                form method="post" action="/inbox/sign-in" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="next" value=(next);
                    label { "Person" br; input #person name="person" value=(person) autocomplete="username" required; }
                    label { "Password" br; input #password type="password" name="password" autocomplete="current-password" required; }
                    label { "One-time code (if you added a second factor)" br;
                        input #code name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6"; }
                    button #sign-in type="submit" { "Sign in" }
                }
            }
            p.muted { "A password is set by the operator: " code { "permitd people set-password --store STORE NAME" } "." }
        },
    )
}

/// Words for the route by which `person` may decide `p`.
pub(crate) fn route_for(p: &Proposal, person: &str) -> String {
    match &p.decider.route {
        _ if !p.decider.persons.iter().any(|d| d == person) => "you decide proposals (decides_proposals)".into(),
        Route::Requester => "the work is yours".into(),
        Route::Person(_) => "routed to you".into(),
        Route::Role(role) => format!("for role {role}"),
        Route::Queue(queue) => format!("in the {queue} queue"),
    }
}

fn item(p: &Proposal, why: Option<&Why>) -> Markup {
    html! {
        li {
            a href={ "/inbox/proposals/" (p.id) } { strong { (shown(&p.label, false)) } }
            " " span.status { (p.status) }
            br;
            span.muted {
                (p.id) " · " (p.agent) " for " (p.requester.as_deref().unwrap_or("nobody")) " · " (utc(p.created_at))
            }
            @match why {
                Some(Why::Decide(words)) => { br; span { "You decide: " (words) } }
                Some(Why::Mine(words)) => { br; span { "Your request, waiting on " (words) } }
                None => {}
            }
        }
    }
}

fn pager(base: &str, page: usize, pages: usize) -> Markup {
    html! {
        @if pages > 1 {
            nav.pages {
                @if page > 1 { a href={ (base) "?page=" (page - 1) } { "← newer" } }
                span { "page " (page) " of " (pages) }
                @if page < pages { a href={ (base) "?page=" (page + 1) } { "older →" } }
            }
        }
    }
}

/// "Waiting for me": what the person may decide, and their own requests waiting on others, newest first.
pub(crate) fn waiting(
    person: &str,
    csrf: &str,
    items: &[(Proposal, Why)],
    counts: &std::collections::BTreeMap<String, usize>,
    page: usize,
    pages: usize,
) -> Markup {
    let total: usize = counts.values().sum();
    layout(
        "Waiting",
        Some((person, csrf)),
        html! {
            h1 { "Waiting for you" }
            p #counts {
                @if total == 0 { "Nothing waits for you." }
                @else {
                    (total) " waiting: "
                    @for (i, (group, n)) in counts.iter().enumerate() {
                        @if i > 0 { " · " }
                        (n) " " (group)
                    }
                }
            }
            ul.list #waiting {
                @for (p, why) in items { (item(p, Some(why))) }
            }
            (pager("/inbox/waiting", page, pages))
        },
    )
}

/// What the proposal page needs.
pub(crate) struct ProposalView<'a> {
    pub(crate) person: &'a str,
    pub(crate) csrf: &'a str,
    pub(crate) p: &'a Proposal,
    pub(crate) table: &'a Table,
    pub(crate) budget: Option<&'a BudgetStatus>,
    /// Whether the person may decide it, or the runtime's refusal.
    pub(crate) may: Result<(), &'a str>,
    /// Whether the person may also make a task or standing rule of it, or why not.
    pub(crate) may_rule: Result<(), &'a str>,
    /// The session's age and `--fresh-sign-in`, in seconds.
    pub(crate) age: u64,
    pub(crate) fresh: u64,
}

fn source_words(table: &Table, p: &Proposal) -> String {
    let route = match &p.decider.route {
        Route::Requester => "the person the work is for (the default route)".to_string(),
        Route::Person(n) => format!("person {n}"),
        Route::Role(r) => format!("role {r}"),
        Route::Queue(q) => format!("the {q} queue"),
    };
    let from = match table.skills.get(&p.skill).and_then(|s| s.routes.get(&p.tool)) {
        Some(r) if *r == p.decider.route => format!("skill {}", p.skill),
        _ if p.decider.route == Route::Requester => return format!("decided by {route}"),
        _ => format!("agent {}", p.agent),
    };
    format!("{from} routes {} to {route}", p.tool)
}

/// The proposal page (spec §5a: what a person must see to say yes).
pub(crate) fn proposal(v: &ProposalView<'_>) -> Markup {
    let p = v.p;
    let table = v.table;
    let tool = table.tools.get(&p.tool);
    let entry = table.entries.get(&p.agent).and_then(|s| s.get(&p.skill)).and_then(|t| t.get(&p.tool));
    let mode_entry = p.mode.as_ref().and_then(|m| entry.and_then(|e| e.modes.get(m)));
    let decidable = matches!(p.status, Status::Waiting) && v.may.is_ok();
    let rules_offered = p.level == Level::Propose && v.may_rule.is_ok();
    let stale_session = v.age > v.fresh;
    layout(
        &p.label,
        Some((v.person, v.csrf)),
        html! {
            h1 #label { (shown(&p.label, false)) }
            p { span.status #status { (p.status) } " " span.muted { (p.id) " · tool " code { (p.tool) } " · level " (p.level) } }
            section {
                h2 { "What it would do" }
                dl #arguments {
                    @for arg in &p.shown {
                        dt { (arg.name) }
                        dd {
                            strong { (shown(&arg.shown, false)) }
                            @let exact = p.arguments.get(&arg.name).map(canonical_value).unwrap_or_default();
                            @if exact != arg.shown && exact.trim_matches('"') != arg.shown {
                                br; span.muted { "exactly " code { (shown(&exact, false)) } }
                            }
                        }
                    }
                }
            }
            section {
                h2 { "Why the agent wants it" }
                pre #why { (shown(&p.why, true)) }
                @let evidence = evidence(p);
                @if !evidence.is_empty() {
                    h2 { "Evidence" }
                    ul #evidence { @for e in &evidence { li { pre { (shown(e, true)) } } } }
                }
            }
            section {
                h2 { "The call" }
                dl {
                    dt { "Agent" } dd { (p.agent) " in skill " (p.skill) }
                    // The delegation chain (spec §3b), root first: whose work handed this call on, down to
                    // the calling agent.
                    @if !p.via.is_empty() {
                        dt { "Delegated" } dd #chain {
                            @for link in p.via.iter().rev() { (link.agent) " in " (link.skill) " → " }
                            (p.agent) " in " (p.skill)
                        }
                    }
                    dt { "Task" } dd { code { (shown(&p.operation_key, false)) } }
                    dt { "For" } dd #for-person {
                        @if let Some(r) = &p.requester { (r) } @else {
                            "nobody: the agent's sponsor " (table.agents.get(&p.agent).map(|a| a.sponsor.as_str()).unwrap_or("?")) " stands in"
                        }
                    }
                    @if let Some(mode) = &p.mode { dt { "Mode" } dd { (mode) } }
                    dt { "Covered version" } dd {
                        @if let Some(v) = &p.covered_version { code { (shown(v, false)) } } @else { "none (the tool has no version)" }
                    }
                    dt { "Destination" } dd {
                        @if let Some(d) = &p.destination { code { (shown(d, false)) } } @else { "none" }
                    }
                    dt { "Fingerprint" } dd { code { (p.fingerprint.get(..16).unwrap_or(&p.fingerprint)) "…" } }
                    dt { "Proposed" } dd { (utc(p.created_at)) }
                    dt { "Expires" } dd { (utc(p.expires_at)) " undecided" }
                }
            }
            section #who-decides {
                h2 { "Who decides" }
                p { "Waiting on " (p.decider.waiting_on()) ": " (source_words(table, p)) "." }
                @match v.may {
                    Ok(()) => { p.yes { "You may decide it." } }
                    Err(why) => { p.no #not-yours { "You cannot decide it: " (shown(why, false)) } }
                }
            }
            section {
                h2 { "Why it is a proposal" }
                ul #because {
                    @for r in entry.map(|e| e.because.as_slice()).unwrap_or_default().iter().chain(mode_entry.map(|m| m.because.as_slice()).unwrap_or_default()) {
                        li {
                            code { (r.rule) } " → " (r.level)
                            @if let Some(at) = &r.at { " " span.muted { "(" (at.file) ":" (at.line) ")" } }
                        }
                    }
                }
            }
            @if let Some(tool) = tool {
                @if !tool.effects.is_empty() {
                    section {
                        h2 { "Effects" }
                        ul #effects {
                            @for (class, effect) in &tool.effects {
                                li {
                                    strong { (class) } ": " (effect.witness.text)
                                    " " span.muted { "(" (effect.witness.at.file) ":" (effect.witness.at.line) ")" }
                                    @if effect.assumed { " " em { "assumed" } }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(b) = v.budget {
                (budget(b, tool.and_then(|t| t.spends.as_ref()).and_then(|s| p.arguments.get(&s.param)).and_then(serde_json::Value::as_u64)))
            }
            @if decidable {
                section #decide {
                    h2 { "Decide" }
                    @if stale_session {
                        p.no #fresh-note { "Approving asks for your password again: you signed in " (duration(v.age)) " ago (the limit is " (duration(v.fresh)) ")." }
                    }
                    form.decide method="post" action={ "/inbox/proposals/" (p.id) "/approve" } {
                        input type="hidden" name="csrf" value=(v.csrf);
                        input type="hidden" name="fingerprint" value=(p.fingerprint);
                        input type="hidden" name="how" value="once";
                        button #approve-once type="submit" { "Approve once" }
                    }
                    @if rules_offered {
                        form.decide method="post" action={ "/inbox/proposals/" (p.id) "/approve" } {
                            input type="hidden" name="csrf" value=(v.csrf);
                            input type="hidden" name="fingerprint" value=(p.fingerprint);
                            input type="hidden" name="how" value="task";
                            select name="scope" aria-label="scope of the task rule" {
                                option value="these" { "these arguments" }
                                option value="any" { "any arguments" }
                            }
                            button.secondary #approve-task type="submit" { "Approve for this task" }
                        }
                        form.decide method="post" action={ "/inbox/proposals/" (p.id) "/approve" } {
                            input type="hidden" name="csrf" value=(v.csrf);
                            input type="hidden" name="fingerprint" value=(p.fingerprint);
                            input type="hidden" name="how" value="always";
                            select name="scope" aria-label="scope of the standing rule" {
                                option value="these" { "these arguments" }
                                option value="any" { "any arguments" }
                            }
                            button.secondary #approve-always type="submit" { "Always like this" }
                        }
                        p.muted { "A task rule lets later calls of " code { (p.tool) } " in task " code { (shown(&p.operation_key, false)) } " run alone until the task ends; a standing rule, every later one for "
                            (p.requester.as_deref().unwrap_or("nobody")) ", until it is revoked." }
                    } @else if let (Err(why), Level::Propose) = (v.may_rule, p.level) {
                        p.muted #no-rules { "Approve once only: " (why) }
                    } @else {
                        p.muted #no-rules { "No task or standing rule: this call's level is " code { (p.level) } ", so a person decides every call." }
                    }
                    form method="post" action={ "/inbox/proposals/" (p.id) "/reject" } {
                        input type="hidden" name="csrf" value=(v.csrf);
                        label { "Reason (given back to the agent)" textarea name="reason" rows="2" required {} }
                        button.secondary #reject type="submit" { "Reject" }
                    }
                }
            } @else {
                section #outcome {
                    h2 { "Outcome" }
                    dl {
                        dt { "Status" } dd { (p.status) }
                        @if let Some(reason) = &p.reason { dt { "Reason" } dd { (shown(reason, true)) } }
                        @if let Some(by) = &p.decided_by { dt { "Decided by" } dd { (by) } }
                        @if let Some(g) = &p.grant { dt { "Authorized" } dd { (authorized(g)) } }
                        @if let Some(r) = &p.ran_as { dt { "Ran as" } dd { (r) } }
                        @if let Some(r) = &p.receipt { dt { "Receipt" } dd { code { (shown(&canonical_value(r), false)) } } }
                    }
                }
            }
        },
    )
}

/// The evidence, one text per item: "`Tool` {arguments} → answer" (as [`Proposal::evidence_for_person`],
/// before its escapes are written, so that [`shown`] marks them).
fn evidence(p: &Proposal) -> Vec<String> {
    p.evidence
        .iter()
        .map(|e| format!("`{}` {} → {}", e.tool, canonical_value(&e.arguments), canonical_value(&e.answer)))
        .collect()
}

fn authorized(g: &permits_runtime::Grant) -> String {
    match (&g.basis, &g.approver) {
        (permits_runtime::Basis::Operator, Some(who)) => format!("approved by {who} at {}", utc(g.granted_at)),
        (permits_runtime::Basis::Automatic, _) => "an automatic grant within the budget's allowance".into(),
        _ => "an old grant of unknown basis (it authorizes nothing)".into(),
    }
}

fn budget(b: &BudgetStatus, this: Option<u64>) -> Markup {
    let ceiling = b.effective_ceiling.max(1);
    let pct = |n: u64| (n.min(ceiling) as f64 / ceiling as f64 * 100.0).clamp(0.0, 100.0);
    let this = this.unwrap_or(0);
    html! {
        section #budget {
            h2 { "Budget " (b.name) }
            div.bar role="img" aria-label="spent, reserved and this call against the ceiling" {
                span.spent style={ "width:" (format!("{:.1}", pct(b.spent))) "%" } {}
                span.reserved style={ "width:" (format!("{:.1}", pct(b.reserved))) "%" } {}
                span.this style={ "width:" (format!("{:.1}", pct(this).min(100.0 - pct(b.spent) - pct(b.reserved)).max(0.0))) "%" } {}
            }
            p.muted {
                "spent " (b.spent) " · reserved " (b.reserved) " · this call " (this) " · ceiling " (b.effective_ceiling)
                " (" (b.currency) ", " (b.unit) ")"
            }
        }
    }
}

/// My standing and task rules, with revoke.
pub(crate) fn rules(person: &str, csrf: &str, rules: &[StandingRule]) -> Markup {
    layout(
        "My rules",
        Some((person, csrf)),
        html! {
            h1 { "Rules you made" }
            @if rules.is_empty() { p { "You made no standing or task rule." } }
            ul.list #rules {
                @for r in rules {
                    li {
                        strong { (r.id) } " " (r.agent) " may " code { (r.tool) } " alone"
                        @if let Some(task) = &r.task { ", in task " code { (shown(task, false)) } " (a task rule)" }
                        " for "
                        @match &r.work_for {
                            WorkFor::Person(p) => { (p) }
                            WorkFor::Nobody => { "nobody" }
                            WorkFor::Everybody => { "everybody" }
                        }
                        ", " (r.scope.words()) "; used " (r.uses) " time(s)"
                        @if let Some(at) = r.expires_at { "; ends " (utc(at)) }
                        @if let Some(revoked) = &r.revoked {
                            br; span.muted { "revoked by " (revoked.by) ": " (shown(&revoked.why, false)) }
                        } @else {
                            form method="post" action={ "/inbox/rules/" (r.id) "/revoke" } {
                                input type="hidden" name="csrf" value=(csrf);
                                input name="reason" placeholder="why" required aria-label="why you revoke it";
                                " " button.secondary type="submit" { "Revoke" }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// What the person asked for or decided, newest first, with how each was authorized.
pub(crate) fn history(person: &str, csrf: &str, items: &[Proposal], total: usize, page: usize, pages: usize) -> Markup {
    layout(
        "History",
        Some((person, csrf)),
        html! {
            h1 { "History" }
            p { (total) " proposal(s) you asked for or decided." }
            ul.list #history {
                @for p in items {
                    li {
                        a href={ "/inbox/proposals/" (p.id) } { strong { (shown(&p.label, false)) } }
                        " " span.status { (p.status) } br;
                        span.muted { (p.id) " · " (utc(p.created_at)) }
                        @if let Some(g) = &p.grant { br; span { (authorized(g)) } }
                        @if let Some(r) = &p.ran_as { br; span { "ran as " (r) } }
                        @if let Some(reason) = &p.reason { br; span.muted { (shown(reason, false)) } }
                    }
                }
            }
            (pager("/inbox/history", page, pages))
        },
    )
}

/// The tables installed in the store, newest first.
pub(crate) fn tables(person: &str, csrf: &str, installs: &[TableInstall], current: &str) -> Markup {
    layout(
        "Tables",
        Some((person, csrf)),
        html! {
            h1 { "Installed tables" }
            ul.list #tables {
                @for t in installs {
                    li {
                        code { (t.table_digest.get(..16).unwrap_or(&t.table_digest)) "…" }
                        @if t.table_digest == current { " " span.status { "current" } }
                        br; span.muted {
                            "installed " (utc(t.installed_at))
                            @if let Some(serial) = t.serial { " · serial " (serial) }
                            @if t.key.is_some() { " · signed" } @else { " · unsigned" }
                            @if let Some(by) = &t.forced_by { " · forced by " (by) }
                        }
                    }
                }
            }
        },
    )
}

/// The second factor: on (`secret` is `None`), or a new secret to add, with the form that confirms it.
pub(crate) fn totp(person: &str, csrf: &str, secret: Option<&[u8]>, note: Option<&str>) -> Markup {
    use crate::people::totp::{base32, uri};
    layout(
        "Second factor",
        Some((person, csrf)),
        html! {
            h1 { "Second factor" }
            @if let Some(note) = note { section.yes { p #note { (note) } } }
            @match secret {
                None => { p #totp-on { "Your second factor (TOTP) is on: sign-in asks for its one-time code." } }
                Some(secret) => {
                    p { "Add a one-time code (TOTP: SHA-1, 30 seconds, 6 digits) to your sign-in: enter this secret in an authenticator app, then the code it shows. "
                        "Until you confirm it, sign-in does not ask for a code. This secret is shown only on this page; opening it again makes a new one." }
                    section {
                        dl {
                            dt { "Secret" } dd { code #totp-secret { (base32(secret)) } }
                            dt { "URI" } dd { code #totp-uri { (uri(person, secret)) } }
                        }
                        form method="post" action="/inbox/totp" {
                            input type="hidden" name="csrf" value=(csrf);
                            label { "The code your app shows" br; input #totp-code name="code" inputmode="numeric" autocomplete="one-time-code" required; }
                            button #totp-confirm type="submit" { "Turn it on" }
                        }
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_are_shown_as_marked_escapes() {
        let out = shown("Ticket\u{202e}7-T\u{200b}", false).into_string();
        assert_eq!(
            out,
            "Ticket<span class=\"esc\" title=\"an invisible character, shown as its code point\">\\u{202e}</span>7-T<span class=\"esc\" title=\"an invisible character, shown as its code point\">\\u{200b}</span>"
        );
        assert_eq!(shown("a\nb", true).into_string(), "a\nb");
        assert!(shown("a\nb", false).into_string().contains("\\u{a}"));
        assert_eq!(shown("<b>", false).into_string(), "&lt;b&gt;");
        // Escapes the runtime already wrote are marked as the characters are.
        assert_eq!(shown("a\\u{200b}b", false).into_string(), shown("a\u{200b}b", false).into_string());
        assert_eq!(shown("\\u{zz} \\u{1234567}", false).into_string(), "\\u{zz} \\u{1234567}");
    }

    #[test]
    fn times_read_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_174_049), "2026-12-02 01:14:09 UTC");
        assert_eq!(duration(40), "40 s");
        assert_eq!(duration(900), "15 min");
    }
}
