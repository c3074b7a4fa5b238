//! Unit tests of the runtime on tables built in Rust (the workshop of `shared/cases/workshop.md`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::table::{
    AgentInfo, EffectClass, EffectInfo, Entry, Header, Holder, Hop, HopKind, Layer, LoadError, PackageSettings,
    ParamInfo, ParamType, PersonInfo, Reason, ReasonKind, Route, Row, SkillInfo, SourceRef, Table, ToolInfo,
    VersionInfo, sha256_hex,
};

type R = Result<(), Box<dyn std::error::Error>>;

const DAY: u64 = 24 * 3600;

fn at(line: u32) -> SourceRef {
    SourceRef { file: "workshop.permits".into(), line }
}

fn tool(label: &str, params: &[(&str, ParamType)], effect: EffectClass, version: Option<(&str, &str)>) -> ToolInfo {
    let mut effects = BTreeMap::new();
    effects.insert(
        effect,
        EffectInfo {
            assumed: false,
            witness: Hop { kind: HopKind::Operation, text: "write Repair".into(), at: at(1) },
        },
    );
    ToolInfo {
        label: label.into(),
        doc: None,
        external: false,
        params: params.iter().map(|(n, t)| ParamInfo { name: (*n).into(), ty: t.clone(), optional: false }).collect(),
        effects,
        claim: None,
        reserved: None,
        version: version.map(|(p, f)| VersionInfo { param: p.into(), field: f.into() }),
        subject: None,
        spends: None,
        pinned: None,
        definition_digest: sha256_hex(label.as_bytes()),
    }
}

fn entry(tool: &str, level: Level, route: Route, skill: &str) -> Entry {
    Entry {
        level: Some(level),
        rows: vec![Row { layer: Layer::Agent, named: Vec::new(), class: Some(level), inherited: None }],
        reserved: false,
        because: vec![Reason {
            layer: Some(Layer::Agent),
            kind: ReasonKind::Named,
            level,
            rule: format!("{level} [{tool}]"),
            via: None,
            at: Some(at(12)),
        }],
        entry_digest: sha256_hex(format!("{skill}/{tool}/{level}/{route}").as_bytes()),
        route,
        modes: Default::default(),
    }
}

fn workshop() -> Table {
    let repair = || ParamType::Entity("Repair".into());
    let mut tools = BTreeMap::new();
    tools.insert(
        "PartsFor".to_string(),
        tool("Look up the parts a fault needs", &[("fault", ParamType::String)], EffectClass::Reads, None),
    );
    tools.insert(
        "NoteRepair".to_string(),
        tool(
            "Write a note on the repair",
            &[("repair", repair()), ("note", ParamType::String)],
            EffectClass::Changes,
            None,
        ),
    );
    tools.insert(
        "SetPrice".to_string(),
        tool(
            "Set the price",
            &[("repair", repair()), ("price", ParamType::Money)],
            EffectClass::Changes,
            Some(("repair", "revision")),
        ),
    );
    tools.insert(
        "ScrapRepair".to_string(),
        tool("Scrap the repair", &[("repair", repair())], EffectClass::Changes, None),
    );
    let mut agents = BTreeMap::new();
    agents.insert(
        "Estimator".to_string(),
        AgentInfo {
            purpose: Some("You estimate bicycle repairs for a small workshop.".into()),
            doc: None,
            acts_as: vec!["Helper".into()],
            sponsor: "Noor".into(),
            skills: vec!["EstimateRepair".into(), "PriceFleetRepair".into()],
        },
    );
    let mut skills = BTreeMap::new();
    skills.insert(
        "EstimateRepair".to_string(),
        SkillInfo {
            description: None,
            doc: None,
            tools: vec!["PartsFor".into(), "NoteRepair".into(), "SetPrice".into(), "ScrapRepair".into()],
            routes: BTreeMap::new(),
            rules_digest: sha256_hex(b"EstimateRepair"),
            delegates: Vec::new(),
        },
    );
    let mut fleet_routes = BTreeMap::new();
    fleet_routes.insert("SetPrice".to_string(), Route::Person("Noor".into()));
    skills.insert(
        "PriceFleetRepair".to_string(),
        SkillInfo {
            description: None,
            doc: None,
            tools: vec!["PartsFor".into(), "SetPrice".into()],
            routes: fleet_routes,
            rules_digest: sha256_hex(b"PriceFleetRepair"),
            delegates: Vec::new(),
        },
    );
    let mut persons = BTreeMap::new();
    persons.insert("Mia".to_string(), PersonInfo { doc: None, roles: vec!["Mechanic".into()] });
    persons.insert("Noor".to_string(), PersonInfo { doc: None, roles: vec!["Manager".into()] });
    let manager = vec![Holder::Role("Manager".into())];
    let mut estimate = BTreeMap::new();
    estimate.insert("PartsFor".to_string(), entry("PartsFor", Level::Alone, Route::Requester, "EstimateRepair"));
    estimate.insert("NoteRepair".to_string(), entry("NoteRepair", Level::Alone, Route::Requester, "EstimateRepair"));
    estimate.insert("SetPrice".to_string(), entry("SetPrice", Level::Propose, Route::Requester, "EstimateRepair"));
    estimate.insert("ScrapRepair".to_string(), entry("ScrapRepair", Level::Never, Route::Requester, "EstimateRepair"));
    let mut fleet = BTreeMap::new();
    fleet.insert("PartsFor".to_string(), entry("PartsFor", Level::Alone, Route::Requester, "PriceFleetRepair"));
    fleet.insert(
        "SetPrice".to_string(),
        entry("SetPrice", Level::Propose, Route::Person("Noor".into()), "PriceFleetRepair"),
    );
    let mut by_skill = BTreeMap::new();
    by_skill.insert("EstimateRepair".to_string(), estimate);
    by_skill.insert("PriceFleetRepair".to_string(), fleet);
    let mut entries = BTreeMap::new();
    entries.insert("Estimator".to_string(), by_skill);
    let mut table = Table {
        header: Header {
            format: 1,
            compiler: "test".into(),
            source_digest: String::new(),
            table_digest: String::new(),
        },
        package: PackageSettings { proposal_lifetime_seconds: 7 * DAY, grant_lifetime_seconds: DAY },
        tools,
        agents,
        skills,
        persons,
        roles: ["Helper", "Manager", "Mechanic"]
            .into_iter()
            .map(|r| (r.to_string(), crate::table::RoleInfo { doc: None }))
            .collect(),
        entities: BTreeMap::new(),
        links: BTreeMap::new(),
        queues: BTreeMap::new(),
        authority: crate::table::AuthorityStatements {
            supervises: manager.clone(),
            decides_proposals: manager.clone(),
            widens_autonomy: manager,
        },
        budgets: BTreeMap::new(),
        modes: BTreeMap::new(),
        entries,
    };
    table.seal();
    table
}

/// The workshop's application: one repair, and who may do what in it.
#[derive(Clone, Default)]
struct Shop {
    repair: Arc<Mutex<Repair>>,
}

#[derive(Clone, Debug, Default)]
struct Repair {
    price: i64,
    revision: u64,
    note: String,
    writes: u64,
}

impl Shop {
    fn new() -> Shop {
        let shop = Shop::default();
        shop.repair.lock().map(|mut r| r.revision = 1).ok();
        shop
    }
    fn get(&self) -> Repair {
        self.repair.lock().map(|r| r.clone()).unwrap_or_default()
    }
    fn bump_revision(&self) {
        self.repair.lock().map(|mut r| r.revision += 1).ok();
    }
    /// Runs a tool against the repair, as the host would.
    fn run(&self, ctx: &RunContext<'_>) -> RunOutcome {
        let Ok(mut r) = self.repair.lock() else { return RunOutcome::Failed("poisoned".into()) };
        r.writes += 1;
        match ctx.tool {
            "SetPrice" => r.price = ctx.arguments["price"].as_i64().unwrap_or_default(),
            "NoteRepair" => r.note = ctx.arguments["note"].as_str().unwrap_or_default().to_string(),
            _ => {}
        }
        RunOutcome::Done(json!({"tool": ctx.tool, "ran_as": ctx.runs_as, "price": r.price}))
    }
}

impl Authority for Shop {
    fn admits(&self, principal: Principal<'_>, tool: &str, _: &Value) -> Result<(), String> {
        let manager = matches!(principal, Principal::Person("Noor"));
        let helper = matches!(principal, Principal::Agent("Estimator"));
        match tool {
            "SetPrice" if manager || helper => Ok(()),
            "SetPrice" => Err("only a manager or the helper account may set a price".into()),
            _ => Ok(()),
        }
    }
}

impl Versions for Shop {
    fn covered_version(&self, q: VersionQuery<'_>) -> Option<String> {
        (q.entity == Some("Repair") && q.id == "T-7" && q.field == "revision")
            .then(|| format!("r{}", self.get().revision))
    }
}

struct Tickets;

impl Naming for Tickets {
    fn show(&self, _: &str, param: &ParamInfo, value: &Value) -> String {
        match (&param.ty, value) {
            (ParamType::Entity(_), Value::String(id)) => format!("Ticket {id}"),
            (_, Value::String(s)) => s.clone(),
            (_, other) => other.to_string(),
        }
    }
}

struct World {
    rt: Runtime,
    shop: Shop,
    clock: ManualClock,
    audit: MemorySink,
}

fn world() -> World {
    let shop = Shop::new();
    let clock = ManualClock::at(1_000_000);
    let audit = MemorySink::new();
    let rt = Runtime::new(workshop(), shop.clone())
        .with_clock(clock.clone())
        .with_versions(shop.clone())
        .with_naming(Tickets)
        .with_audit(audit.clone());
    World { rt, shop, clock, audit }
}

/// A proposal made through a runtime on `store` (the store conformance suite's runtime test).
pub(crate) fn propose_on_store(store: impl Store + Send + Sync + 'static) -> Result<Proposal, RuntimeError> {
    workshop_on(store).propose(&ProposalRequest::new(
        set_price(45, "Mia", "EstimateRepair"),
        "job-1",
        "Pads and a cable.",
    ))
}

/// The workshop's runtime on `store`, at a fixed time, with the shop's covered versions and ticket names.
fn workshop_on(store: impl Store + Send + Sync + 'static) -> Runtime {
    let shop = Shop::new();
    Runtime::new(workshop(), shop.clone())
        .with_clock(ManualClock::at(1_000_000))
        .with_versions(shop)
        .with_naming(Tickets)
        .with_store(store)
}

/// The workshop's runtime on `store` and an alone call of it (`PartsFor` for Mia, in task `job-1`), for
/// the stores' tests of how an alone run and its receipt commit.
pub(crate) fn alone_call_on_store(store: impl Store + Send + Sync + 'static) -> (Runtime, ProposalRequest) {
    let call = Call::new("Estimator", "EstimateRepair", "PartsFor").with_arguments(json!({"fault": "brakes"}));
    (workshop_on(store), ProposalRequest::new(call.for_person("Mia"), "job-1", ""))
}

/// Decides one call through a runtime on `store`, after a first transaction (a proposal) installed the
/// table: the decide's own transaction then writes only its decision event.
pub(crate) fn decide_on_store(store: impl Store + Send + Sync + 'static) -> Result<Decision, RuntimeError> {
    let rt = workshop_on(store);
    rt.propose(&ProposalRequest::new(set_price(45, "Mia", "EstimateRepair"), "job-1", "Pads and a cable."))?;
    rt.decide(&set_price(45, "Mia", "EstimateRepair"))
}

/// The workshop with a spending tool: `BuyParts (amount: money)`, proposed, from budget `Parts` (ceiling 5000,
/// alone up to 100, 1000 per task). For the store conformance suite's per-task case.
fn workshop_buying_parts() -> Table {
    let mut table = workshop();
    let mut buy = tool("Buy parts", &[("amount", ParamType::Money)], EffectClass::Spends, None);
    buy.spends = Some(crate::table::SpendInfo { budget: "Parts".into(), param: "amount".into() });
    table.tools.insert("BuyParts".into(), buy);
    table.budgets.insert(
        "Parts".into(),
        crate::table::BudgetInfo {
            currency: "EUR".into(),
            unit: "cents".into(),
            ceiling: 5_000,
            alone_up_to: 100,
            doc: None,
            per_task: Some(1_000),
        },
    );
    if let Some(skill) = table.skills.get_mut("EstimateRepair") {
        skill.tools.push("BuyParts".into());
    }
    if let Some(estimate) = table.entries.get_mut("Estimator").and_then(|e| e.get_mut("EstimateRepair")) {
        estimate.insert("BuyParts".into(), entry("BuyParts", Level::Propose, Route::Requester, "EstimateRepair"));
    }
    table.seal();
    table
}

/// What [`per_task_on_store`] saw: each step's outcome, then the figures of tasks `job-1` and `job-2`
/// (spent, reserved) and the budget's total (spent, reserved).
pub(crate) type PerTaskSteps = (Vec<String>, (u64, u64), (u64, u64), (u64, u64));

/// Spends of one budget with `per_task` through a runtime on `store` (the store conformance suite's
/// per-task case): operator grants, an automatic grant and a settlement, in two tasks.
pub(crate) fn per_task_on_store(store: impl Store + Send + Sync + 'static) -> Result<PerTaskSteps, RuntimeError> {
    let shop = Shop::new();
    let rt = Runtime::new(workshop_buying_parts(), shop.clone())
        .with_clock(ManualClock::at(1_000_000))
        .with_versions(shop)
        .with_naming(Tickets)
        .with_store(store);
    let buy = |amount: i64, key: &str| -> Result<Proposal, RuntimeError> {
        let call = Call::new("Estimator", "EstimateRepair", "BuyParts").with_arguments(json!({"amount": amount}));
        rt.propose(&ProposalRequest::new(call.for_person("Mia"), key, "Brake pads."))
    };
    let approve = |p: &Proposal| rt.approve(&p.id, "Mia", &p.fingerprint, ApproveMode::Once);
    let word = |r: Result<Proposal, RuntimeError>| match r {
        Ok(p) => format!("{} {}", p.id, p.status),
        Err(RuntimeError::Refused { refusal, message }) => format!("refused ({refusal:?}): {message}"),
        Err(e) => e.to_string(),
    };
    let mut steps = Vec::new();
    let first = buy(600, "job-1")?;
    steps.push(word(approve(&first)));
    let second = buy(500, "job-1")?;
    steps.push(word(approve(&second)));
    let elsewhere = buy(500, "job-2")?;
    steps.push(word(approve(&elsewhere)));
    steps.push(word(buy(100, "job-1")));
    let ran = rt.execute(&first.id, None, |ctx| {
        RunOutcome::Done(json!({"operation": ctx.operation, "amount": 600, "outcome": "accepted"}))
    })?;
    steps.push(format!("{} {}", ran.proposal.id, ran.proposal.status));
    steps.push(word(approve(&second)));
    let figures = |task: &str| rt.task_spending("Parts", task).map(|t| (t.spent, t.reserved));
    let total = rt.budget("Parts")?;
    Ok((steps, figures("job-1")?, figures("job-2")?, (total.spent, total.reserved)))
}

/// Two hosts on one place take turns holding task `job-1` by a lease (spec §5a "Leases"; the store
/// conformance suite's lease case): each step's outcome, and how many times the tool ran. `a` and `b` are
/// two stores on the same data (two hosts); both runtimes read one clock, which the steps move.
pub(crate) fn leases_on_stores(
    a: impl Store + Send + Sync + 'static,
    b: impl Store + Send + Sync + 'static,
) -> Result<(Vec<String>, u32), RuntimeError> {
    let clock = ManualClock::at(1_000_000);
    let host = || {
        let shop = Shop::new();
        Runtime::new(workshop_buying_parts(), shop.clone())
            .with_clock(clock.clone())
            .with_versions(shop)
            .with_naming(Tickets)
    };
    let host_a = host().with_store(a);
    let host_b = host().with_store(b);
    let buy = |amount: i64| {
        let call = Call::new("Estimator", "EstimateRepair", "BuyParts").with_arguments(json!({"amount": amount}));
        ProposalRequest::new(call.for_person("Mia"), "job-1", "Brake pads.")
    };
    let word = |r: Result<String, RuntimeError>| match r {
        Ok(w) => w,
        Err(RuntimeError::Refused { refusal, message }) => format!("refused ({refusal:?}): {message}"),
        Err(e) => e.to_string(),
    };
    let lease_words =
        |l: &Lease| format!("`{}` holds `{}` with fence {} until {}", l.holder, l.key, l.fence, l.expires_at);
    let runs = std::cell::Cell::new(0u32);
    let run = |ctx: &RunContext<'_>| {
        runs.set(runs.get() + 1);
        // Not conclusive (no outcome): the reservation waits for a settlement.
        RunOutcome::Done(json!({"operation": ctx.operation, "amount": 600}))
    };
    let mut steps = Vec::new();
    let first = host_a.take_task("job-1", "host-a", 30)?;
    steps.push(lease_words(&first));
    steps.push(word(host_b.take_task("job-1", "host-b", 30).map(|l| lease_words(&l))));
    let p = host_a.holding(&first).propose(&buy(600))?;
    steps.push(format!("{} {}", p.id, p.status));
    steps.push(word(
        host_b.approve(&p.id, "Mia", &p.fingerprint, ApproveMode::Once).map(|p| format!("{} {}", p.id, p.status)),
    ));
    steps.push(word(host_b.execute(&p.id, None, run).map(|e| format!("{} {}", e.proposal.id, e.proposal.status))));
    // host-a stalls past its lease; host-b takes the task over.
    clock.advance(31);
    let second = host_b.take_task("job-1", "host-b", 30)?;
    steps.push(lease_words(&second));
    let a = host_a.holding(&first);
    steps.push(word(a.execute(&p.id, None, run).map(|e| format!("{} {}", e.proposal.id, e.proposal.status))));
    steps.push(word(host_a.renew_task(&first, 30).map(|l| lease_words(&l))));
    let executed = host_b.holding(&second).execute(&p.id, None, run)?;
    steps.push(format!("{} {}", executed.proposal.id, executed.proposal.status));
    let receipt = json!({"operation": operation_id(&p), "amount": 600, "outcome": "accepted"});
    steps.push(word(a.settle(&p.id, &receipt).map(|b| format!("spent {}", b.spent))));
    steps.push(word(host_a.propose(&buy(100)).map(|p| format!("{} {}", p.id, p.status))));
    steps.push(word(host_b.holding(&second).settle(&p.id, &receipt).map(|b| format!("spent {}", b.spent))));
    let renewed = host_b.renew_task(&second, 60)?;
    steps.push(lease_words(&renewed));
    let released = host_b.release_task(&renewed)?;
    steps.push(lease_words(&released));
    // Released: one host alone may go on without a lease; the fenced lease stays fenced.
    steps.push(word(host_a.propose(&buy(100)).map(|p| format!("{} {}", p.id, p.status))));
    steps.push(word(a.propose(&buy(200)).map(|p| format!("{} {}", p.id, p.status))));
    Ok((steps, runs.get()))
}

fn set_price(price: i64, person: &str, skill: &str) -> Call {
    Call::new("Estimator", skill, "SetPrice")
        .with_arguments(json!({"repair": "T-7", "price": price}))
        .for_person(person)
}

fn propose(w: &World, price: i64, person: &str, key: &str) -> Result<Proposal, RuntimeError> {
    w.rt.propose(&ProposalRequest::new(
        set_price(price, person, "EstimateRepair"),
        key,
        "Pads, a cable and an hour of work.",
    ))
}

#[test]
fn levels_follow_the_skills_order_and_never_is_not_offered() {
    let w = world();
    let levels = w.rt.levels("Estimator", "EstimateRepair");
    let expected = [
        ("PartsFor", Level::Alone),
        ("NoteRepair", Level::Alone),
        ("SetPrice", Level::Propose),
        ("ScrapRepair", Level::Never),
    ];
    assert_eq!(levels, expected.iter().map(|(t, l)| (t.to_string(), *l)).collect::<Vec<_>>());
    let offered: Vec<String> = w.rt.offered_tools("Estimator", "EstimateRepair").into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["PartsFor", "NoteRepair", "SetPrice"]);
}

#[test]
fn unknown_names_are_never_with_the_exact_reason() {
    let table = workshop();
    let cases = [
        (Call::new("Nobody", "EstimateRepair", "PartsFor"), "unknown agent"),
        (Call::new("Estimator", "Nothing", "PartsFor"), "unknown skill"),
        (Call::new("Estimator", "EstimateRepair", "DeleteWorkspace"), "unknown tool"),
    ];
    for (call, reason) in cases {
        let d = decide_table(&table, &call);
        assert_eq!(d.level, Level::Never);
        assert_eq!(d.refusal.as_deref(), Some(reason));
    }
    let mut other = table.clone();
    other.skills.insert("Other".into(), other.skills["PriceFleetRepair"].clone());
    let d = decide_table(&other, &Call::new("Estimator", "Other", "PartsFor"));
    assert_eq!(d.refusal.as_deref(), Some("not one of the agent's skills"));
    let d = decide_table(&table, &Call::new("Estimator", "PriceFleetRepair", "NoteRepair"));
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("not one of the skill's tools")));
    let d = decide_table(&table, &set_price(45, "Stranger", "EstimateRepair"));
    assert_eq!((d.level, d.refusal.as_deref()), (Level::Never, Some("unknown person `Stranger`")));
}

#[test]
fn arguments_must_match_the_parameters() {
    let table = workshop();
    let call = |args: Value| Call::new("Estimator", "EstimateRepair", "SetPrice").with_arguments(args);
    let refused = |args: Value| decide_table(&table, &call(args)).refusal.unwrap_or_default();
    assert_eq!(refused(json!({"repair": "T-7"})), "argument `price` of `SetPrice` is missing");
    assert_eq!(refused(json!({"repair": "T-7", "price": 45, "tip": 1})), "`SetPrice` has no parameter `tip`");
    assert!(refused(json!({"repair": "T-7", "price": "45"})).contains("must be a non-negative integer amount"));
    assert_eq!(
        refused(json!({"repair": "T-7", "price": -45})),
        "the amount `price` of `SetPrice` is -45: an amount is never negative"
    );
    assert!(refused(json!({"repair": "T-7", "price": 45.5})).contains("a number with a fraction"));
    assert!(refused(json!({"repair": 7, "price": 45})).contains("the id of a `Repair`"));
    assert!(refused(json!(["T-7", 45])).contains("not a JSON object"));
    let ok = decide_table(&table, &call(json!({"repair": "T-7", "price": 45})));
    assert_eq!((ok.level, ok.refusal), (Level::Propose, None));
}

#[test]
fn an_alone_call_runs_only_as_far_as_both_may() -> R {
    let w = world();
    let note = Call::new("Estimator", "EstimateRepair", "NoteRepair")
        .with_arguments(json!({"repair": "T-7", "note": "Pads and a cable."}))
        .for_person("Mia");
    let ran = w.rt.run_alone(&note, |ctx| w.shop.run(ctx))?;
    assert_eq!(ran.runs_as, "Mia");
    assert_eq!(w.shop.get().note, "Pads and a cable.");
    let err = w.rt.run_alone(&set_price(45, "Mia", "EstimateRepair"), |ctx| w.shop.run(ctx)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::MustPropose));
    let scrap = Call::new("Estimator", "EstimateRepair", "ScrapRepair").with_arguments(json!({"repair": "T-7"}));
    let err = w.rt.run_alone(&scrap, |ctx| w.shop.run(ctx)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Never));
    assert!(err.to_string().contains("agent layer: never [ScrapRepair] at workshop.permits:12"), "{err}");
    assert_eq!(w.shop.get().writes, 1);
    Ok(())
}

#[test]
fn a_proposal_shows_what_a_person_reads_and_a_retry_returns_it() -> R {
    let w = world();
    let request =
        ProposalRequest::new(set_price(45, "Mia", "EstimateRepair"), "job-1", "Pads, a cable and an hour of work.")
            .with_evidence(vec![Evidence {
                tool: "NoteRepair".into(),
                arguments: json!({"repair": "T-7", "note": "Pads and a cable."}),
                answer: json!("noted"),
            }]);
    let p = w.rt.propose(&request)?;
    assert_eq!(p.status, Status::Waiting);
    assert_eq!(p.label, "Set the price");
    assert_eq!(p.covered_version.as_deref(), Some("r1"));
    let shown: Vec<(&str, &str)> = p.shown.iter().map(|a| (a.name.as_str(), a.shown.as_str())).collect();
    assert_eq!(shown, [("repair", "Ticket T-7"), ("price", "45")]);
    assert_eq!(p.evidence.len(), 1);
    assert_eq!(p.decider.persons, ["Mia"]);
    assert_eq!(w.shop.get().price, 0);
    let again = w.rt.propose(&request)?;
    assert_eq!(again.id, p.id);
    let other = propose(&w, 45, "Mia", "job-2")?;
    assert_ne!(other.id, p.id);
    assert_eq!(other.fingerprint, p.fingerprint);
    assert_eq!(w.rt.proposals()?.len(), 2);
    Ok(())
}

#[test]
fn mia_approves_and_the_call_fails_as_hers_noor_approves_and_it_runs_as_hers() -> R {
    let w = world();
    let p = propose(&w, 45, "Mia", "job-1")?;
    let err =
        w.rt.approve_and_run(&p.id, "Mia", &p.fingerprint, ApproveMode::Once, |c| w.shop.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Authority));
    assert!(err.to_string().contains("on behalf of `Mia`, who may not"), "{err}");
    let p = w.rt.proposal(&p.id)?;
    assert_eq!(p.status, Status::Failed);
    assert_eq!(w.shop.get().price, 0);

    let q = propose(&w, 45, "Mia", "job-2")?;
    let done = w.rt.approve_and_run(&q.id, "Noor", &q.fingerprint, ApproveMode::Once, |c| w.shop.run(c))?;
    assert_eq!(done.proposal.status, Status::Done);
    assert_eq!(done.proposal.ran_as.as_deref(), Some("Noor"));
    assert_eq!(done.proposal.grant.as_ref().and_then(|g| g.approver.as_deref()), Some("Noor"));
    assert_eq!(w.shop.get().price, 45);
    let again = w.rt.execute(&q.id, None, |c| w.shop.run(c))?;
    assert!(!again.ran);
    assert_eq!(again.proposal.receipt, done.proposal.receipt);
    assert_eq!(w.shop.get().writes, 1);
    Ok(())
}

#[test]
fn a_rejection_needs_a_reason_and_gives_it_to_the_agent() -> R {
    let w = world();
    let p = propose(&w, 45, "Mia", "job-1")?;
    let err = w.rt.reject(&p.id, "Noor", "  ").err().ok_or("rejected")?;
    assert_eq!(err.refusal(), Some(Refusal::ReasonRequired));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Waiting);
    let p = w.rt.reject(&p.id, "Noor", "Quote the cable separately.")?;
    assert_eq!(p.status, Status::Rejected);
    assert_eq!(p.answer_for_agent(), "rejected: Quote the cable separately.");
    assert_eq!(w.rt.execute(&p.id, None, |c| w.shop.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::Status));
    assert_eq!(w.shop.get().price, 0);
    Ok(())
}

#[test]
fn a_changed_covered_version_makes_the_approval_stale() -> R {
    let w = world();
    let p = propose(&w, 45, "Mia", "job-1")?;
    w.shop.bump_revision();
    let err =
        w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| w.shop.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert!(err.to_string().contains("the covered version is `r2` instead of `r1`"), "{err}");
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Stale);
    assert_eq!(w.shop.get().price, 0);
    // Final: approving again does nothing either.
    assert_eq!(
        w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once).err().and_then(|e| e.refusal()),
        Some(Refusal::Status)
    );
    Ok(())
}

#[test]
fn a_version_changed_between_approve_and_execute_is_stale_too() -> R {
    let w = world();
    let p = propose(&w, 45, "Noor", "job-1")?;
    w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    w.shop.bump_revision();
    let err = w.rt.execute(&p.id, None, |c| w.shop.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    assert_eq!(w.shop.get().writes, 0);
    Ok(())
}

#[test]
fn the_wrong_fingerprint_or_a_non_person_cannot_approve() -> R {
    let w = world();
    let p = propose(&w, 45, "Mia", "job-1")?;
    let other = propose(&w, 46, "Mia", "job-1")?;
    let err = w.rt.approve(&p.id, "Noor", &other.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::WrongFingerprint));
    let err = w.rt.approve(&p.id, "Estimator", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Waiting);
    Ok(())
}

#[test]
fn always_like_this_makes_one_rule_for_the_approver_until_revoked() -> R {
    let w = world();
    let p = propose(&w, 45, "Noor", "job-1")?;
    w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::AlwaysLikeThis, |c| w.shop.run(c))?;
    let rules = w.rt.rules()?;
    assert_eq!(rules.len(), 1);
    assert_eq!((rules[0].agent.as_str(), rules[0].tool.as_str()), ("Estimator", "SetPrice"));
    assert_eq!(rules[0].work_for, WorkFor::Person("Noor".into()));

    let next = ProposalRequest::new(set_price(50, "Noor", "EstimateRepair"), "job-2", "again");
    let handled = w.rt.call(&next, |c| w.shop.run(c))?;
    assert!(matches!(handled, Handled::Ran(_)));
    assert_eq!(w.shop.get().price, 50);
    assert_eq!(w.rt.proposals()?.len(), 1);
    assert_eq!(w.rt.rules()?[0].uses, 1);
    // Mia's work is not covered by Noor's rule.
    let mias = ProposalRequest::new(set_price(51, "Mia", "EstimateRepair"), "job-3", "for Mia");
    assert!(matches!(w.rt.call(&mias, |c| w.shop.run(c))?, Handled::Proposed(_)));

    let err = w.rt.revoke_rule(&rules[0].id, "Noor", "").err().ok_or("revoked")?;
    assert_eq!(err.refusal(), Some(Refusal::ReasonRequired));
    let err = w.rt.revoke_rule(&rules[0].id, "Mia", "mine").err().ok_or("revoked")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    w.rt.revoke_rule(&rules[0].id, "Noor", "Prices are mine again.")?;
    let next = ProposalRequest::new(set_price(55, "Noor", "EstimateRepair"), "job-4", "again");
    assert!(matches!(w.rt.call(&next, |c| w.shop.run(c))?, Handled::Proposed(_)));
    assert_eq!(w.shop.get().price, 50);
    Ok(())
}

#[test]
fn standing_rules_are_refused_for_never_and_for_the_wrong_people() -> R {
    let w = world();
    let rule = |tool: &str, work_for: WorkFor, by: &str| NewRule {
        agent: "Estimator".into(),
        tool: tool.into(),
        skill: None,
        work_for,
        by: by.into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,

        via: Vec::new(),
    };
    let err = w.rt.allow_alone(&rule("ScrapRepair", WorkFor::Everybody, "Noor")).err().ok_or("made")?;
    assert_eq!(err.refusal(), Some(Refusal::Rule));
    assert!(err.to_string().contains("no standing rule can make it alone"), "{err}");
    let err = w.rt.allow_alone(&rule("SetPrice", WorkFor::Person("Mia".into()), "Mia")).err().ok_or("made")?;
    assert!(err.to_string().contains("`widens_autonomy` does not admit them"), "{err}");
    let err = w.rt.allow_alone(&NewRule {
        skill: Some("PriceFleetRepair".into()),
        ..rule("NoteRepair", WorkFor::Everybody, "Noor")
    });
    assert!(err.err().ok_or("made")?.to_string().contains("not one of the tools of skill `PriceFleetRepair`"));
    let made = w.rt.allow_alone(&rule("SetPrice", WorkFor::Everybody, "Noor"))?;
    assert_eq!(made.covered.len(), 2);
    assert!(w.rt.rules()?.len() == 1);
    Ok(())
}

#[test]
fn a_rule_stops_applying_when_the_tool_changes() -> R {
    let w = world();
    w.rt.allow_alone(&NewRule {
        agent: "Estimator".into(),
        tool: "SetPrice".into(),
        skill: Some("EstimateRepair".into()),
        work_for: WorkFor::Everybody,
        by: "Noor".into(),
        scope: Scope::AnyArguments,
        expires_at: None,
        mode: None,

        via: Vec::new(),
    })?;
    assert_eq!(w.rt.decide(&set_price(45, "Mia", "EstimateRepair"))?.level, Level::Alone);
    let mut table = workshop();
    if let Some(t) = table.tools.get_mut("SetPrice") {
        t.definition_digest = sha256_hex(b"a new body");
    }
    table.seal();
    w.rt.replace_table(table)?;
    let d = w.rt.decide(&set_price(45, "Mia", "EstimateRepair"))?;
    assert_eq!((d.level, d.standing_rule), (Level::Propose, None));
    Ok(())
}

#[test]
fn a_routed_decision_is_not_the_requesters() -> R {
    let w = world();
    let request = ProposalRequest::new(
        set_price(38, "Mia", "PriceFleetRepair"),
        "fleet-1",
        "A fleet rate: pads, a cable and an hour.",
    );
    let p = w.rt.propose(&request)?;
    assert_eq!(p.decider.waiting_on(), "a decision from Noor");
    let err = w.rt.approve(&p.id, "Mia", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    assert_eq!(
        err.to_string(),
        "`Mia` may not decide proposal `P-1`: the decision is `Noor`'s because skill `PriceFleetRepair` routes `SetPrice` to person `Noor`; the work is for `Mia`, but the decision is not theirs"
    );
    assert_eq!(w.shop.get().price, 0);
    let done = w.rt.approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |c| w.shop.run(c))?;
    assert_eq!((done.proposal.status, w.shop.get().price), (Status::Done, 38));
    Ok(())
}

#[test]
fn grants_and_proposals_expire() -> R {
    let w = world();
    let p = propose(&w, 45, "Noor", "job-1")?;
    w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    w.clock.advance(DAY + 1);
    let err = w.rt.execute(&p.id, None, |c| w.shop.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::GrantExpired));
    let after = w.rt.proposal(&p.id)?;
    assert_eq!(after.status, Status::Granted);
    assert!(after.reason.unwrap_or_default().contains("expired"));
    // Approving again refreshes the grant.
    w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    assert_eq!(w.rt.execute(&p.id, None, |c| w.shop.run(c))?.proposal.status, Status::Done);

    let q = propose(&w, 46, "Noor", "job-2")?;
    w.clock.advance(7 * DAY);
    let err = w.rt.approve(&q.id, "Noor", &q.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::ProposalExpired));
    assert_eq!(w.rt.proposal(&q.id)?.status, Status::Expired);
    assert_eq!(w.shop.get().price, 45);
    Ok(())
}

#[test]
fn the_destination_is_part_of_what_was_approved() -> R {
    let w = world();
    let request = ProposalRequest::new(set_price(45, "Noor", "EstimateRepair"), "job-1", "why")
        .with_destination("https://a.example");
    let p = w.rt.propose(&request)?;
    let other = w.rt.propose(&ProposalRequest { destination: Some("https://b.example".into()), ..request.clone() })?;
    assert_ne!(p.fingerprint, other.fingerprint);
    w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once)?;
    let err = w.rt.execute(&p.id, Some("https://b.example"), |c| w.shop.run(c)).err().ok_or("ran")?;
    assert_eq!(err.refusal(), Some(Refusal::Destination));
    assert_eq!(w.rt.proposal(&p.id)?.status, Status::Granted);
    assert_eq!(w.rt.execute(&p.id, Some("https://a.example"), |c| w.shop.run(c))?.proposal.status, Status::Done);
    Ok(())
}

#[test]
fn a_changed_entry_makes_a_waiting_proposal_stale_and_a_never_fails_it() -> R {
    let w = world();
    let p = propose(&w, 45, "Noor", "job-1")?;
    let q = propose(&w, 46, "Noor", "job-2")?;
    let mut table = workshop();
    if let Some(e) =
        table.entries.get_mut("Estimator").and_then(|s| s.get_mut("EstimateRepair")).and_then(|t| t.get_mut("SetPrice"))
    {
        e.entry_digest = sha256_hex(b"the skill's lists changed");
    }
    table.seal();
    w.rt.replace_table(table)?;
    let err = w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::Stale));
    // A table in which the same entry is now reserved (never) with the same digest: refused, final.
    let mut table = workshop();
    if let Some(e) =
        table.entries.get_mut("Estimator").and_then(|s| s.get_mut("EstimateRepair")).and_then(|t| t.get_mut("SetPrice"))
    {
        e.reserved = true;
    }
    table.seal();
    w.rt.replace_table(table)?;
    let err = w.rt.approve(&q.id, "Noor", &q.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(err.refusal(), Some(Refusal::NowNever));
    assert_eq!(w.rt.proposal(&q.id)?.status, Status::Failed);
    assert_eq!(w.shop.get().writes, 0);
    Ok(())
}

#[test]
fn withdraw_and_revoke() -> R {
    let w = world();
    let p = propose(&w, 45, "Mia", "job-1")?;
    let err = w.rt.withdraw(&p.id, Principal::Person("Noor")).err().ok_or("withdrawn")?;
    assert_eq!(err.refusal(), Some(Refusal::NotDecider));
    assert_eq!(w.rt.withdraw(&p.id, Principal::Agent("Estimator"))?.status, Status::Withdrawn);
    let q = propose(&w, 46, "Mia", "job-2")?;
    w.rt.approve(&q.id, "Noor", &q.fingerprint, ApproveMode::Once)?;
    assert_eq!(w.rt.withdraw(&q.id, Principal::Person("Mia")).err().and_then(|e| e.refusal()), Some(Refusal::Status));
    assert_eq!(w.rt.revoke(&q.id, "Noor", "not now")?.status, Status::Revoked);
    assert_eq!(w.rt.revoke(&q.id, "Noor", "again")?.status, Status::Revoked);
    assert_eq!(w.rt.execute(&q.id, None, |c| w.shop.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::Status));
    assert_eq!(w.shop.get().writes, 0);
    Ok(())
}

#[test]
fn two_waiting_proposals_are_decided_independently_and_one_grant_runs_once() -> R {
    let w = world();
    let a = propose(&w, 45, "Noor", "job-a")?;
    let b = propose(&w, 45, "Noor", "job-b")?;
    assert_eq!(a.fingerprint, b.fingerprint);
    w.rt.approve(&a.id, "Noor", &a.fingerprint, ApproveMode::Once)?;
    assert_eq!(w.rt.proposal(&b.id)?.status, Status::Waiting);
    assert_eq!(
        w.rt.execute(&b.id, None, |c| w.shop.run(c)).err().and_then(|e| e.refusal()),
        Some(Refusal::NotApproved)
    );
    let runs = Arc::new(Mutex::new(0));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let _ = w.rt.execute(&a.id, None, |c| {
                    runs.lock().map(|mut n| *n += 1).ok();
                    w.shop.run(c)
                });
            });
        }
    });
    assert_eq!(*runs.lock().map_err(|e| e.to_string())?, 1);
    Ok(())
}

#[test]
fn every_step_is_audited() -> R {
    let w = world();
    let p = propose(&w, 45, "Mia", "job-1")?;
    let _ = w.rt.approve(&p.id, "Mia", "wrong", ApproveMode::Once);
    w.rt.reject(&p.id, "Noor", "no")?;
    let kinds: Vec<EventKind> = w.audit.events().iter().map(|e| e.kind).collect();
    // The store's first transaction installs the runtime's table, and the first call under `job-1`
    // binds the task (spec §5a): events too.
    assert_eq!(
        kinds,
        [EventKind::TableInstalled, EventKind::Task, EventKind::Proposal, EventKind::Refusal, EventKind::Rejection]
    );
    let refusal = &w.audit.events()[3];
    assert_eq!(refusal.fingerprint.as_deref(), Some(p.fingerprint.as_str()));
    assert_eq!(refusal.who.as_deref(), Some("Mia"));
    let sink = JsonLinesSink::new(Vec::new());
    for e in w.audit.events() {
        sink.record(&e);
    }
    let text = String::from_utf8(sink.into_inner())?;
    assert_eq!(text.lines().count(), 5);
    let first: Value = serde_json::from_str(text.lines().nth(2).ok_or("empty")?)?;
    assert_eq!(first["kind"], "proposal");
    assert_eq!(first["tool"], "SetPrice");
    Ok(())
}

#[test]
fn the_decision_serializes_for_permitc_decide() -> R {
    let d = decide_table(&workshop(), &set_price(45, "Mia", "PriceFleetRepair"));
    let v: Value = serde_json::from_str(&d.to_json())?;
    assert_eq!(v["level"], "propose");
    assert_eq!(v["decider"]["route"], json!({"person": "Noor"}));
    assert_eq!(v["decider"]["persons"], json!(["Noor"]));
    Ok(())
}

#[test]
fn a_table_that_does_not_verify_is_refused() -> R {
    let table = workshop();
    let text = table.to_pretty_json();
    assert!(Table::load(text.as_bytes()).is_ok());
    let tampered = text.replacen("\"level\": \"never\"", "\"level\": \"alone\"", 1);
    assert_ne!(tampered, text);
    assert!(matches!(Table::load(tampered.as_bytes()), Err(LoadError::DigestMismatch { .. })));
    let unknown = text.replacen("\"reserved\": false", "\"reserved\": false, \"allow_all\": true", 1);
    assert!(matches!(Table::load(unknown.as_bytes()), Err(LoadError::Malformed(_))));
    let format = text.replacen("\"format\": 1", "\"format\": 2", 1);
    assert!(matches!(Table::load(format.as_bytes()), Err(LoadError::UnknownFormat { found: 2, .. })));
    assert!(matches!(Table::load(b"{not json"), Err(LoadError::Malformed(_))));
    assert!(matches!(Table::load(&text.as_bytes()[..text.len() / 2]), Err(LoadError::Malformed(_))));
    Ok(())
}

#[test]
fn a_store_transaction_dropped_without_commit_changes_nothing() -> R {
    let store = MemoryStore::new();
    {
        let mut tx = store.begin()?;
        tx.next_number("proposal")?;
        tx.put_rule(&StandingRule {
            id: "R-1".into(),
            agent: "A".into(),
            tool: "T".into(),
            skill: None,
            work_for: WorkFor::Everybody,
            by: "P".into(),
            definition_digest: String::new(),
            covered: BTreeMap::new(),
            scope: Scope::AnyArguments,
            expires_at: None,
            mode: None,
            via: Vec::new(),
            task: None,
            created_at: 0,
            uses: 0,
            revoked: None,
        })?;
    }
    let mut tx = store.begin()?;
    assert!(tx.rules()?.is_empty());
    assert_eq!(tx.next_number("proposal")?, 1);
    drop(tx);
    // The audit chain rolls back with the rest.
    let event = AuditEvent {
        at: 0,
        kind: EventKind::Decision,
        who: None,
        agent: String::new(),
        skill: String::new(),
        tool: String::new(),
        proposal: None,
        fingerprint: None,
        rule: None,
        outcome: String::new(),
        reason: None,
        authorized_by: None,
    };
    let first = ChainedEvent::after(None, event.clone());
    {
        let mut tx = store.begin()?;
        tx.append_audit(&first)?;
        tx.commit()?;
    }
    {
        let mut tx = store.begin()?;
        tx.next_number("rule")?;
        tx.append_audit(&ChainedEvent::after(Some(&first.head()), event))?;
    }
    let mut tx = store.begin()?;
    assert_eq!(tx.audit_events()?, vec![first]);
    assert_eq!(tx.next_number("rule")?, 1);
    Ok(())
}

#[test]
fn a_tool_with_a_version_is_refused_when_the_host_cannot_say_it() -> R {
    let rt = Runtime::new(workshop(), AdmitAll);
    let err = rt
        .propose(&ProposalRequest::new(set_price(45, "Mia", "EstimateRepair"), "k", "why"))
        .err()
        .ok_or("proposed")?;
    assert_eq!(err.refusal(), Some(Refusal::UnknownVersion));
    assert!(rt.proposals()?.is_empty());
    Ok(())
}

#[test]
fn a_condition_decides_on_the_arguments_and_fails_closed() -> R {
    use crate::table::{CompareOp, Condition, Literal, NamedRow};
    let mut table = workshop();
    if let Some(e) =
        table.entries.get_mut("Estimator").and_then(|s| s.get_mut("EstimateRepair")).and_then(|t| t.get_mut("SetPrice"))
    {
        e.level = None;
        e.rows = vec![Row {
            layer: Layer::Agent,
            named: vec![NamedRow {
                level: Level::Alone,
                when: Some(Condition::Compare { param: "price".into(), op: CompareOp::Le, value: Literal::Int(50) }),
            }],
            class: Some(Level::Propose),
            inherited: None,
        }];
    }
    table.seal();
    let rt = Runtime::new(table.clone(), AdmitAll);
    assert_eq!(decide_table(&table, &set_price(45, "Mia", "EstimateRepair")).level, Level::Alone);
    assert_eq!(decide_table(&table, &set_price(60, "Mia", "EstimateRepair")).level, Level::Propose);
    let offered = rt.offered_tools("Estimator", "EstimateRepair");
    let set = offered.iter().find(|t| t.name == "SetPrice").ok_or("not offered")?;
    assert_eq!(set.level, None);
    // A condition that cannot be evaluated is `never`; here the argument check refuses first.
    let d = decide_table(
        &table,
        &Call::new("Estimator", "EstimateRepair", "SetPrice").with_arguments(json!({"repair": "T-7"})),
    );
    assert_eq!(d.level, Level::Never);
    Ok(())
}

fn with_subject(mut table: Table) -> Table {
    if let Some(t) = table.tools.get_mut("SetPrice") {
        t.subject = Some("repair".into());
    }
    table.seal();
    table
}

#[test]
fn a_new_proposal_for_the_same_subject_supersedes_the_waiting_one() -> R {
    let w = world();
    w.rt.replace_table(with_subject(workshop()))?;
    let first = propose(&w, 45, "Noor", "job-1")?;
    w.rt.approve(&first.id, "Noor", &first.fingerprint, ApproveMode::Once)?;
    let second = propose(&w, 50, "Noor", "job-1")?;
    assert_eq!(w.rt.proposal(&first.id)?.status, Status::Superseded);
    assert_eq!(w.rt.proposal(&first.id)?.reason, Some(format!("superseded by `{}`", second.id)));
    // Proposing the old content again returns the superseded record; it does not come back to life.
    let again = propose(&w, 45, "Noor", "job-1")?;
    assert_eq!((again.id.as_str(), again.status), (first.id.as_str(), Status::Superseded));
    // Another operation key is other work: no supersession.
    let other = propose(&w, 45, "Noor", "job-2")?;
    assert_eq!(w.rt.proposal(&second.id)?.status, Status::Waiting);
    w.rt.approve_and_run(&other.id, "Noor", &other.fingerprint, ApproveMode::Once, |c| w.shop.run(c))?;
    // Once one is done in a work item, a new proposal for the same subject there is refused.
    let err = propose(&w, 60, "Noor", "job-2").err().ok_or("proposed")?;
    assert_eq!(err.refusal(), Some(Refusal::Unresolved));
    Ok(())
}

#[test]
fn an_unconfirmed_outcome_is_unknown_and_never_runs_again() -> R {
    let w = world();
    let p = propose(&w, 45, "Noor", "job-1")?;
    let ex = w
        .rt
        .approve_and_run(&p.id, "Noor", &p.fingerprint, ApproveMode::Once, |_| RunOutcome::Unknown("timeout".into()))?;
    assert_eq!((ex.proposal.status, ex.proposal.reason.as_deref()), (Status::Unknown, Some("timeout")));
    assert_eq!(w.rt.execute(&p.id, None, |c| w.shop.run(c)).err().and_then(|e| e.refusal()), Some(Refusal::Status));
    assert_eq!(
        w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once).err().and_then(|e| e.refusal()),
        Some(Refusal::Status)
    );
    assert_eq!(w.rt.revoke(&p.id, "Noor", "the other side may have acted")?.status, Status::Revoked);
    let q = propose(&w, 46, "Noor", "job-2")?;
    let ex = w.rt.approve_and_run(&q.id, "Noor", &q.fingerprint, ApproveMode::Once, |_| {
        RunOutcome::Failed("refused by the app".into())
    })?;
    assert_eq!(ex.proposal.status, Status::Failed);
    assert_eq!(w.shop.get().writes, 0);
    Ok(())
}

#[test]
fn decide_table_resolves_the_decider_and_refuses_missing_arguments() {
    let table = workshop();
    let call =
        Call::new("Estimator", "PriceFleetRepair", "SetPrice").with_arguments(json!({"repair": "T-7", "price": 38}));
    let d = decide_table(&table, &call.for_person("Mia"));
    assert_eq!((d.level, d.decider.map(|x| x.persons)), (Level::Propose, Some(vec!["Noor".to_string()])));
    let d = decide_table(&table, &Call::new("Estimator", "EstimateRepair", "PartsFor"));
    assert_eq!(d.refusal.as_deref(), Some("argument `fault` of `PartsFor` is missing"));
}

#[test]
fn a_failing_sink_counts_its_failures() {
    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = JsonLinesSink::new(Broken);
    let rt = Runtime::new(workshop(), AdmitAll).with_audit(sink);
    let _ = rt.decide(&Call::new("Estimator", "EstimateRepair", "PartsFor"));
    let direct = JsonLinesSink::new(Broken);
    direct.record(&AuditEvent {
        at: 0,
        kind: EventKind::Decision,
        who: None,
        agent: String::new(),
        skill: String::new(),
        tool: String::new(),
        proposal: None,
        fingerprint: None,
        rule: None,
        outcome: String::new(),
        reason: None,
        authorized_by: None,
    });
    assert_eq!(direct.failures(), 1);
}

#[test]
fn the_runtime_is_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Runtime>();
}

/// The workshop with Ola (a Mechanic) and a Finance queue decided by the Mechanics, and the fleet job's
/// `SetPrice` routed to it (the table still to be sealed).
fn route_fleet_prices_to_the_finance_queue(table: &mut Table) {
    table.persons.insert("Ola".into(), PersonInfo { roles: vec!["Mechanic".into()], doc: None });
    table.queues.insert(
        "Finance".into(),
        crate::table::QueueInfo { decided_by: vec![Holder::Role("Mechanic".into())], doc: None },
    );
    if let Some(e) = table
        .entries
        .get_mut("Estimator")
        .and_then(|s| s.get_mut("PriceFleetRepair"))
        .and_then(|t| t.get_mut("SetPrice"))
    {
        e.route = Route::Queue("Finance".into());
    }
    if let Some(s) = table.skills.get_mut("PriceFleetRepair") {
        s.routes.insert("SetPrice".into(), Route::Queue("Finance".into()));
    }
}

#[test]
fn a_queue_member_decides_but_not_the_requester_in_it() -> R {
    let mut table = workshop();
    table.authority.decides_proposals.clear();
    route_fleet_prices_to_the_finance_queue(&mut table);
    table.seal();
    let w = world();
    w.rt.replace_table(table)?;
    let p = w.rt.propose(&ProposalRequest::new(set_price(38, "Mia", "PriceFleetRepair"), "fleet-1", "fleet rate"))?;
    // Spec §5: a queue's members decide, minus the person the work is for.
    assert_eq!(p.decider.persons, ["Ola"]);
    assert_eq!(p.decider.waiting_on(), "a decision from the Finance queue (Ola)");
    let err = w.rt.approve(&p.id, "Mia", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert_eq!(
        err.to_string(),
        "`Mia` may not decide proposal `P-1`: the work is for `Mia`, and skill `PriceFleetRepair` routes `SetPrice` to queue `Finance`, so the decision is someone else's; the decision is `Ola`'s"
    );
    let err = w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::Once).err().ok_or("approved")?;
    assert!(err.to_string().starts_with("`Noor` may not decide proposal `P-1`"), "{err}");
    assert_eq!(w.rt.approve(&p.id, "Ola", &p.fingerprint, ApproveMode::Once)?.status, Status::Granted);
    // Noor supervises: she may revoke it even though she may not decide it.
    assert_eq!(w.rt.revoke(&p.id, "Noor", "not this week")?.status, Status::Revoked);
    Ok(())
}

#[test]
fn a_person_sees_what_waits_for_them() -> R {
    let w = world();
    let mine = propose(&w, 45, "Mia", "job-1")?;
    let fleet = w.rt.propose(&ProposalRequest::new(set_price(38, "Mia", "PriceFleetRepair"), "fleet-1", "fleet"))?;
    let ids = |v: Vec<Proposal>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(ids(w.rt.waiting_for("Mia")?), vec![mine.id.clone()]);
    assert_eq!(ids(w.rt.waiting_for("Noor")?), [mine.id, fleet.id]);
    assert!(w.rt.waiting_for("Estimator")?.is_empty());
    Ok(())
}

#[test]
fn records_round_trip_through_json_for_a_durable_store() -> R {
    let w = world();
    let p = propose(&w, 45, "Noor", "job-1")?;
    let p = w.rt.approve(&p.id, "Noor", &p.fingerprint, ApproveMode::AlwaysLikeThis)?;
    let back: Proposal = serde_json::from_str(&serde_json::to_string(&p)?)?;
    assert_eq!(back, p);
    let rule = w.rt.rules()?.into_iter().next().ok_or("no rule")?;
    let back: StandingRule = serde_json::from_str(&serde_json::to_string(&rule)?)?;
    assert_eq!(back, rule);
    Ok(())
}

/// `waiting_page_for` is `waiting_for` read a page at a time through the store's list columns: for every
/// person (one in a queue, the requester in it, the routed person, the `decides_proposals` holder), newest
/// first, paged, with counts that add up; with `own_requests`, their own requests decided by others too.
#[test]
fn the_waiting_page_of_each_person_is_what_they_may_decide_newest_first() -> R {
    let mut table = workshop();
    route_fleet_prices_to_the_finance_queue(&mut table);
    table.persons.insert("Sam".into(), PersonInfo { roles: vec![], doc: None });
    table.seal();
    let w = world();
    w.rt.replace_table(table)?;
    let mut n = 0;
    for person in ["Mia", "Noor", "Ola", "Sam"] {
        for skill in ["EstimateRepair", "PriceFleetRepair"] {
            n += 1;
            w.rt.propose(&ProposalRequest::new(set_price(30 + n, person, skill), format!("job-{n}"), "why"))?;
        }
    }
    let everyone = w.rt.waiting()?;
    assert_eq!(everyone.len(), 8);
    let mut some_own_only = false;
    for person in ["Mia", "Noor", "Ola", "Sam", "Nobody"] {
        let mut expected: Vec<String> = w.rt.waiting_for(person)?.into_iter().map(|p| p.id).collect();
        expected.reverse();
        let (page, counts) = w.rt.waiting_page_for(person, false, 0, 100)?;
        let ids: Vec<String> = page.proposals.iter().map(|p| p.id.clone()).collect();
        assert_eq!(ids, expected, "{person}");
        assert_eq!(page.total, expected.len(), "{person}");
        assert_eq!(counts.iter().map(|c| c.count).sum::<usize>(), expected.len(), "{person}");
        // A page at a time.
        let mut paged = Vec::new();
        for offset in (0..expected.len().max(1)).step_by(3) {
            paged.extend(w.rt.waiting_page_for(person, false, offset, 3)?.0.proposals.into_iter().map(|p| p.id));
        }
        assert_eq!(paged, expected, "{person}");
        // With their own requests.
        let mut with_own: Vec<String> = everyone
            .iter()
            .filter(|p| w.rt.may_decide(p, person).is_ok() || p.requester.as_deref() == Some(person))
            .map(|p| p.id.clone())
            .collect();
        with_own.reverse();
        let (page, counts) = w.rt.waiting_page_for(person, true, 0, 100)?;
        assert_eq!(page.proposals.iter().map(|p| p.id.clone()).collect::<Vec<_>>(), with_own, "{person}");
        assert_eq!(counts.iter().map(|c| c.count).sum::<usize>(), with_own.len(), "{person}");
        some_own_only |= with_own.len() > expected.len();
    }
    assert!(some_own_only, "someone has requests decided by others");
    // Noor holds `decides_proposals` (the workshop's manager): everything waiting is hers.
    assert_eq!(w.rt.waiting_page_for("Noor", false, 0, 100)?.0.total, 8);
    // Ola, in the Finance queue, decides the queue's proposals but not her own.
    let (ola, _) = w.rt.waiting_page_for("Ola", false, 0, 100)?;
    assert!(ola.proposals.iter().all(|p| p.requester.as_deref() != Some("Ola") || p.skill == "EstimateRepair"));
    assert!(ola.proposals.iter().any(|p| p.skill == "PriceFleetRepair"));
    // Past its expiry a proposal waits for nobody.
    w.clock.advance(7 * 24 * 3600);
    assert_eq!(w.rt.waiting_page_for("Noor", false, 0, 100)?.0.total, 0);
    Ok(())
}
