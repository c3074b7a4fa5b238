//! The compiler's integration tests, one binary: the corpus snapshots, the differential test against a naive reading of the spec, `fmt`, pinned digests, and the README's table of codes.

mod canonical;
mod common;
mod corpus;
mod digests;
mod docs;
mod fmt;
mod reference;
