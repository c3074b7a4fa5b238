//! The compiler's integration tests, one binary: the corpus snapshots, the differential test against a naive reading of the spec, `fmt`, pinned digests, the README's table of codes, and the targeted tests of effects, levels and the table's evaluator that kill what mutation testing found (docs/mutants.md).

mod canonical;
mod common;
mod corpus;
mod digests;
mod docs;
mod effects;
mod evaluator;
mod fmt;
mod levels;
mod reference;
