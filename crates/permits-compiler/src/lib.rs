//! # permits-compiler
//!
//! The compiler: a package of `.permits` files → the decision table (binding semantics: the project's
//! language reference, `docs/language.md`). It depends on the table format (`permits-table`) and never on
//! the runtime. The stages, in pipeline order:
//!
//! | module | stage |
//! |---|---|
//! | [`syntax`] | pest grammar → syntax tree, one package from a folder of `.permits` files (§1) |
//! | [`diagnostics`] | every stage's `Diagnostic`, its stable [`diagnostics::Code`], rendering |
//! | [`model`] | the resolved package: call-graph nodes, operations, effect sets, layers' rules (the IR) |
//! | [`check`] | name resolution and declaration checks (§1–§3) → the model |
//! | [`conditions`] | conditions on arguments: type checks, lowering, interval analysis (§3 item 5) |
//! | [`effects`] | call graph, effect inference over strongly connected components, witnesses, claims (§2) |
//! | [`compile`] | levels of every offered triple → the decision table (§3–§4); `test` blocks (§7) |
//! | [`explain`] | why a triple gets its level: an [`explain::Explanation`] value (§7) |
//! | [`diff`] | what changed between two tables, widenings marked (§7) |
//! | [`graph`] | the call graph with effect sets as Graphviz DOT (§7) |
//! | [`fmt`] | the canonical layout of a source file (§7) |

use permits_table as table;

pub mod check;
pub mod compile;
pub mod conditions;
pub mod diagnostics;
pub mod diff;
pub mod effects;
pub mod explain;
pub mod fmt;
pub mod graph;
pub mod model;
pub mod syntax;
