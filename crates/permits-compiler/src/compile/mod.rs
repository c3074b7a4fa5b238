//! Compile: the level of every offered (agent, skill, tool) exactly as spec §3, the checks that need
//! levels, and the decision table of spec §4. The driver is here; the stages are its modules: `levels`
//! (each triple's layers and level), `lints` (the warnings that need levels), `emit` (the table) and
//! `test_blocks` (the package's `test` expectations, on the one evaluator).
//!
//! Inheritance ("a wrapper cannot launder a tool the agent must not run alone") is computed in one pass
//! over the condensation: each component carries the set of restrictively named tools it reaches, so the
//! cost does not grow with the number of layers times tools.

use std::path::Path;

use crate::check::{self, Model, NodeId};
use crate::diagnostics::{Code, Diagnostic};
use crate::effects::{self, Effects};
use crate::syntax::{self, Loaded, Sources, Span};
use crate::table::{Level, Reason, Route, Row, Table};

mod emit;
mod levels;
pub use levels::LinkDecision;
mod lints;
mod test_blocks;

pub use emit::build_table;
use levels::{TripleFacts, check_spend_binding};
use test_blocks::run_tests;

/// The compiler's name and version, as written in `header.compiler`.
pub const COMPILER: &str = concat!("permitc ", env!("CARGO_PKG_VERSION"));

/// Everything the analysis knows about a package that checked clean enough to analyse.
#[derive(Debug)]
pub struct Analysis<'a> {
    /// The sources, for places.
    pub sources: &'a Sources,
    /// The resolved package.
    pub model: Model<'a>,
    /// Inferred effects.
    pub effects: Effects,
    /// Every offered triple's decision, sorted by (agent, skill, tool).
    pub decisions: Vec<TripleDecision<'a>>,
    /// What every delegating link adds for each tool its descendants can be offered (spec §3b), sorted
    /// by (agent, skill, tool).
    pub links: Vec<LinkDecision<'a>>,
}

/// The compiled decision for one offered triple, with the spans of its reasons (for `explain`).
#[derive(Debug)]
pub struct TripleDecision<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The skill.
    pub skill: &'a str,
    /// The tool.
    pub tool: NodeId,
    /// The level, when it does not depend on the arguments.
    pub level: Option<Level>,
    /// Every level the triple can take, least strict first (one element when `level` is set).
    pub possible: Vec<Level>,
    /// Per layer, what it says.
    pub rows: Vec<Row>,
    /// Why, each reason with the span of its rule (none for a synthetic default).
    pub because: Vec<(Reason, Option<Span>)>,
    /// Who decides.
    pub route: Route,
    /// Where the route is written, if it is.
    pub route_span: Option<Span>,
    /// Whether the tool writes the reserved entity.
    pub reserved: bool,
    /// What each mode that says something about the tool adds (spec §3c), in mode name order.
    pub modes: Vec<ModeDecision<'a>>,
}

/// What one mode says about one offered triple.
#[derive(Debug)]
pub struct ModeDecision<'a> {
    /// The mode.
    pub mode: &'a str,
    /// The triple's level in the mode, when it does not depend on the arguments.
    pub level: Option<Level>,
    /// Every level the triple can take in the mode, least strict first.
    pub possible: Vec<Level>,
    /// The mode's row for the tool.
    pub row: Row,
    /// Why the mode's row gives its level, each reason with the span of its rule.
    pub because: Vec<(Reason, Option<Span>)>,
}

/// The outcome of one `test` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestOutcome {
    /// The test's name.
    pub name: String,
    /// How many expectations it holds.
    pub expectations: usize,
    /// Each expectation that failed: the triple, expected and actual level, and why.
    pub failures: Vec<TestFailure>,
}

/// One failed expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestFailure {
    /// `(agent, skill, tool)`.
    pub triple: String,
    /// The level written in the test.
    pub expected: Level,
    /// The level the table gives.
    pub actual: Level,
    /// Why the table gives it (the deciding rules, or why the triple is not offered).
    pub why: String,
}

/// The result of compiling one package.
#[derive(Debug)]
pub struct Output {
    /// The package's sources.
    pub sources: Sources,
    /// The table, when nothing but failed `test` expectations is an error (a package whose tests fail
    /// still compiles, so `permitc test` can report them; `compile` writes no table then).
    pub table: Option<Table>,
    /// The outcome of every `test` block (run when the package compiles; a failure is also an error
    /// diagnostic).
    pub tests: Vec<TestOutcome>,
    /// Every diagnostic of every stage, errors and warnings, in stage order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Output {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Whether every error is a failed `test` expectation (`test::failed`, `test::depends_on_arguments`):
    /// the table was built, only its tests failed.
    pub fn only_tests_failed(&self) -> bool {
        self.diagnostics.iter().filter(|d| d.is_error()).all(|d| d.code.is_test_failure())
    }
}

/// Loads, checks and compiles the package at `path` (a folder or one file).
///
/// Errors: [`syntax::ReadError`] when the path cannot be read; every problem in the sources is a
/// diagnostic in the [`Output`].
pub fn compile_package(path: &Path) -> Result<Output, syntax::ReadError> {
    Ok(compile_loaded(syntax::load_package(path)?))
}

/// Compiles the package at `path` and returns its table, or the rendered diagnostics (plain text, no
/// colour) when it has errors or cannot be read. A convenience for tests and hosts that compile at start.
///
/// Errors: the rendered diagnostics, as one string.
pub fn compile_path(path: &Path) -> Result<Table, String> {
    let out = compile_package(path).map_err(|e| e.to_string())?;
    match out.table {
        Some(t) if !out.has_errors() => Ok(t),
        _ => Err(crate::diagnostics::render_plain(&out.diagnostics, &out.sources)),
    }
}

/// Runs check, effects and levels on a loaded package and builds the table when nothing is an error.
pub fn compile_loaded(loaded: Loaded) -> Output {
    let Loaded { sources, package, mut diagnostics } = loaded;
    // A file that does not parse fails the package; analysing the rest would only add errors caused by
    // the missing file (an unknown name defined there, zero decisions).
    let unparsed = package.files.len() < sources.len();
    let mut tests = Vec::new();
    let table = if unparsed {
        None
    } else {
        let (analysis, mut diags) = analyze(&package, &sources);
        diagnostics.append(&mut diags);
        let errors = diagnostics.iter().any(Diagnostic::is_error);
        match analysis {
            Some(a) if !errors => {
                let table = build_table(&a);
                let (outcomes, mut failed) = run_tests(&a, &table);
                tests = outcomes;
                diagnostics.append(&mut failed);
                Some(table)
            }
            _ => None,
        }
    };
    Output { sources, table, tests, diagnostics }
}

/// Check, infer and decide. Returns the analysis and the diagnostics of these stages. Call it only on a
/// package whose every file parsed ([`compile_loaded`] does so).
pub fn analyze<'a>(package: &'a syntax::ast::Package, sources: &'a Sources) -> (Option<Analysis<'a>>, Vec<Diagnostic>) {
    let (model, mut diagnostics) = check::check(package);
    let (effects, mut d) = effects::infer(&model, sources);
    diagnostics.append(&mut d);
    diagnostics.append(&mut check_spend_binding(&model, &effects));
    let mut analysis = Analysis { sources, model, effects, decisions: Vec::new(), links: Vec::new() };
    let mut d = decide_all(&mut analysis);
    diagnostics.append(&mut d);
    if analysis.decisions.is_empty() && !sources.is_empty() && !diagnostics.iter().any(Diagnostic::is_error) {
        diagnostics.push(
            Diagnostic::new(Code::LevelsNoDecisions, "the package compiles to zero decisions")
                .help("give an agent a `skills [..]` list whose skills list `tools [..]`; a package that decides nothing has lost something"),
        );
    }
    (Some(analysis), diagnostics)
}

/// The levels of every offered triple, then the warnings that need them; the decisions sorted by (agent,
/// skill, tool).
fn decide_all(a: &mut Analysis<'_>) -> Vec<Diagnostic> {
    let facts = levels::compute(a);
    let diags = lints::lints(a, &facts);
    let mut decisions: Vec<TripleDecision<'_>> = facts.into_iter().map(TripleFacts::into_decision).collect();
    decisions.sort_by(|x, y| {
        (x.agent, x.skill, a.model.nodes[x.tool].name).cmp(&(y.agent, y.skill, a.model.nodes[y.tool].name))
    });
    a.decisions = decisions;
    a.links = levels::compute_links(a);
    diags
}
