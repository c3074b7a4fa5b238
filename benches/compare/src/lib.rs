//! The same decisions as a compiled permits table, in Cedar and in Regorus (Rego), for
//! `benches/compare.rs`. Only unconditional entries are translated: a triple's level is a fact, so the
//! three engines answer the same question ("what level has (agent, skill, tool)?") from the same data.

use std::str::FromStr;

use cedar_policy::{Authorizer, Context, Decision, Entities, EntityUid, PolicySet, Request};
use permits::table::{Level, Table};
use serde_json::{Value, json};

/// The levels a policy can grant, strictest last; `never` is what nothing grants.
pub const GRANTED: [Level; 3] = [Level::Alone, Level::Propose, Level::ProposeEveryTime];

/// Cedar: principal `Seat::"agent/skill"`, resource `Tool::"T"`, one action per level. A tool has one
/// attribute per level, the set of seats that get it.
pub struct CedarModel {
    /// The four policies.
    pub policies: PolicySet,
    /// One entity per tool.
    pub entities: Entities,
    /// The authorizer.
    pub authorizer: Authorizer,
}

/// The three prebuilt requests of one call, one per granted level.
pub struct CedarCall(pub Vec<Request>);

impl CedarModel {
    /// Translates the unconditional entries of `table`.
    pub fn new(table: &Table) -> CedarModel {
        let mut policies = String::new();
        for level in GRANTED {
            let l = level.as_str();
            policies.push_str(&format!(
                "permit(principal, action == Action::\"{l}\", resource) when {{ resource.{l}.contains(principal) }};\n"
            ));
        }
        let mut tools = Vec::new();
        for name in table.tools.keys() {
            let mut attrs = serde_json::Map::new();
            for level in GRANTED {
                let mut seats = Vec::new();
                for (agent, skills) in &table.entries {
                    for (skill, entries) in skills {
                        if let Some(e) = entries.get(name) {
                            if e.level == Some(level) && !e.reserved {
                                seats.push(json!({ "__entity": { "type": "Seat", "id": format!("{agent}/{skill}") } }));
                            }
                        }
                    }
                }
                attrs.insert(level.as_str().to_string(), Value::Array(seats));
            }
            tools.push(json!({ "uid": { "type": "Tool", "id": name }, "attrs": attrs, "parents": [] }));
        }
        CedarModel {
            policies: PolicySet::from_str(&policies).expect("cedar policies"),
            entities: Entities::from_json_value(Value::Array(tools), None).expect("cedar entities"),
            authorizer: Authorizer::new(),
        }
    }

    /// The requests for (agent, skill, tool).
    pub fn call(agent: &str, skill: &str, tool: &str) -> CedarCall {
        let uid = |t: &str, id: &str| EntityUid::from_str(&format!("{t}::{}", Value::String(id.into()))).expect("uid");
        CedarCall(
            GRANTED
                .iter()
                .map(|l| {
                    Request::new(
                        uid("Seat", &format!("{agent}/{skill}")),
                        uid("Action", l.as_str()),
                        uid("Tool", tool),
                        Context::empty(),
                        None,
                    )
                    .expect("request")
                })
                .collect(),
        )
    }

    /// The level: the first action allowed, else `never`.
    pub fn decide(&self, call: &CedarCall) -> Level {
        for (level, request) in GRANTED.iter().zip(&call.0) {
            if self.authorizer.is_authorized(request, &self.policies, &self.entities).decision() == Decision::Allow {
                return *level;
            }
        }
        Level::Never
    }
}

/// Rego: the unconditional levels as data, and a rule that looks the triple up.
pub const REGO: &str = r#"package permits
import rego.v1

default level := "never"

level := l if {
    l := data.entries[input.agent][input.skill][input.tool]
}
"#;

/// A Regorus engine with [`REGO`] and the table's unconditional levels.
pub fn rego_engine(table: &Table) -> regorus::Engine {
    let mut entries = serde_json::Map::new();
    for (agent, skills) in &table.entries {
        let mut s = serde_json::Map::new();
        for (skill, tools) in skills {
            let mut t = serde_json::Map::new();
            for (tool, e) in tools {
                if let (Some(level), false) = (e.level, e.reserved) {
                    t.insert(tool.clone(), Value::String(level.as_str().into()));
                }
            }
            s.insert(skill.clone(), Value::Object(t));
        }
        entries.insert(agent.clone(), Value::Object(s));
    }
    let mut engine = regorus::Engine::new();
    engine.add_policy("permits.rego".into(), REGO.into()).expect("rego policy");
    engine.add_data_json(&json!({ "entries": entries }).to_string()).expect("rego data");
    engine
}

/// The Rego input of a call.
pub fn rego_input(agent: &str, skill: &str, tool: &str) -> regorus::Value {
    regorus::Value::from_json_str(&json!({ "agent": agent, "skill": skill, "tool": tool }).to_string()).expect("input")
}

/// The level Rego gives.
pub fn rego_decide(engine: &mut regorus::Engine, input: &regorus::Value) -> Level {
    engine.set_input(input.clone());
    let v = engine.eval_rule("data.permits.level".into()).expect("eval");
    Level::from_keyword(v.as_string().expect("a string").as_ref()).expect("a level")
}
