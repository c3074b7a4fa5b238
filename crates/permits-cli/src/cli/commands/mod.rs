//! One module per subcommand.

use super::*;

mod audit;
mod check;
mod compile;
mod decide;
mod diff;
mod explain;
mod fmt;
mod graph;
mod keygen;
mod test;

pub(super) use audit::audit_verify;
pub(super) use check::check;
pub(super) use compile::compile_cmd;
pub(super) use decide::{TripleCall, decide};
pub(super) use diff::diff_cmd;
pub(super) use explain::explain;
pub(super) use fmt::fmt;
pub(super) use graph::graph;
pub(super) use keygen::keygen;
pub(super) use test::test;
