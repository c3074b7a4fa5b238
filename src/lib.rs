//! # permits
//!
//! A language and compiler for what AI agents may do **alone**, what they must **propose** to a person
//! first, what they must propose **every time**, and what they **never** do; and the small runtime that
//! agents embed to apply the compiled decision table.
//!
//! The stages, in pipeline order (binding semantics: `shared/spec/LANGUAGE.md`):
//!
//! | module | stage |
//! |---|---|
//! | [`syntax`] | pest grammar → syntax tree, one package from a folder of `.permits` files (§1) |
//! | [`model`] | the resolved package: call-graph nodes, operations, effect sets, layers' rules (the IR) |
//! | [`check`] | name resolution and declaration checks (§1–§3) → the model |
//! | [`conditions`] | conditions on arguments: type checks, lowering, interval analysis (§3 item 5) |
//! | [`effects`] | call graph, effect inference over strongly connected components, witnesses, claims (§2) |
//! | [`compile`] | levels of every offered triple → the decision table (§3–§4) |
//! | [`diff`] | what changed between two tables, widenings marked (§7) |
//! | [`generate`] | a seeded synthetic policy generator, for benchmarks and property tests |
//! | [`graph`] | the call graph with effect sets as Graphviz DOT (§7) |
//! | [`table`] | the serialized decision table, canonical JSON and digests (§4) |
//! | [`runtime`] | decisions, proposals, approvals, routes, standing rules (§5) |
//! | [`cli`] | `permitc` (§7) |
//!
//! With `default-features = false` only [`table`] and [`runtime`] are built: they need serde, serde_json,
//! sha2 and thiserror, and no parser.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "compiler")]
pub mod check;
#[cfg(feature = "compiler")]
pub mod cli;
#[cfg(feature = "compiler")]
pub mod compile;
#[cfg(feature = "compiler")]
pub mod conditions;
#[cfg(feature = "compiler")]
pub mod diagnostics;
#[cfg(feature = "compiler")]
pub mod diff;
#[cfg(feature = "compiler")]
pub mod effects;
#[cfg(feature = "compiler")]
pub mod fmt;
#[cfg(feature = "compiler")]
pub mod generate;
#[cfg(feature = "compiler")]
pub mod graph;
#[cfg(feature = "compiler")]
pub mod model;
pub mod runtime;
#[cfg(feature = "compiler")]
pub mod syntax;
pub mod table;
