//! Every diagnostic code, with what it means. Codes are stable: tools and CI configurations match on them.

/// A path could not be read (missing, unreadable).
pub const LOAD_IO: &str = "permits::load::io";
/// A package folder holds no `.permits` files.
pub const LOAD_EMPTY: &str = "permits::load::empty";
/// A source file is not valid UTF-8.
pub const LOAD_UTF8: &str = "permits::load::utf8";

/// The text does not follow the grammar.
pub const SYNTAX_PARSE: &str = "permits::syntax::parse";
/// A NUL byte in a source file.
pub const SYNTAX_NUL: &str = "permits::syntax::nul";
/// An identifier with a non-ASCII character (confusable names are an attack on reviewers).
pub const SYNTAX_NON_ASCII: &str = "permits::syntax::non_ascii";
/// A reserved word used as a name.
pub const SYNTAX_RESERVED: &str = "permits::syntax::reserved";
/// A bad escape in a string.
pub const SYNTAX_ESCAPE: &str = "permits::syntax::escape";
/// Parentheses nested deeper than the bound (checked before parsing).
pub const SYNTAX_TOO_DEEP: &str = "permits::syntax::too_deep";
/// A duration or number out of range.
pub const SYNTAX_NUMBER: &str = "permits::syntax::number";

/// A name defined twice in one package.
pub const CHECK_DUPLICATE: &str = "permits::check::duplicate";
/// A name that refers to nothing (with the nearest name suggested).
pub const CHECK_UNKNOWN: &str = "permits::check::unknown";
/// A name of the wrong kind (a function in a list, a skill where a tool belongs).
pub const CHECK_WRONG_KIND: &str = "permits::check::wrong_kind";
/// A tool without its label.
pub const CHECK_MISSING_LABEL: &str = "permits::check::missing_label";
/// An `extern tool` without a claim.
pub const CHECK_EXTERN_CLAIM: &str = "permits::check::extern_claim";
/// An operation or call in an `extern tool` (it has no body to prove).
pub const CHECK_EXTERN_BODY: &str = "permits::check::extern_body";
/// A statement that may appear once appears again (two `version`s, two sponsors, a class set twice).
pub const CHECK_REPEATED: &str = "permits::check::repeated";
/// A parameter type that is not `string`, `int`, `bool`, `money` or an entity.
pub const CHECK_TYPE: &str = "permits::check::type";
/// `version P.F` or `subject P` that does not fit the parameters.
pub const CHECK_VERSION: &str = "permits::check::version";
/// A field an entity does not declare.
pub const CHECK_FIELD: &str = "permits::check::field";
/// `reads` set in a `may` block (reads is always alone).
pub const CHECK_READS_SETTING: &str = "permits::check::reads_setting";
/// A preset that is not the first statement of its `may` block.
pub const CHECK_PRESET: &str = "permits::check::preset";
/// A `route` for a tool the skill (or none of the agent's skills) lists.
pub const CHECK_ROUTE_UNLISTED: &str = "permits::check::route_unlisted";
/// A queue that nobody can decide.
pub const CHECK_QUEUE_UNDECIDABLE: &str = "permits::check::queue_undecidable";
/// An agent without a sponsor.
pub const CHECK_NO_SPONSOR: &str = "permits::check::no_sponsor";
/// A budget with a missing, unknown, repeated or mistyped field, or a figure out of range.
pub const CHECK_BUDGET: &str = "permits::check::budget";
/// A budget whose automatic allowance (`alone_up_to`) is above its ceiling (warning).
pub const CHECK_BUDGET_ALLOWANCE: &str = "permits::check::budget_allowance";
/// `spend BUDGET by PARAM` where PARAM is not a `money` parameter of the tool.
pub const CHECK_SPEND: &str = "permits::check::spend";
/// A tool that spends from a budget through what it calls, without a `spend` of its own saying how much.
pub const CHECK_SPEND_UNBOUND: &str = "permits::check::spend_unbound";
/// A condition names a parameter the tool does not have.
pub const CHECK_CONDITION_PARAM: &str = "permits::check::condition_param";
/// A condition compares a parameter with a value or operator of the wrong type.
pub const CHECK_CONDITION_TYPE: &str = "permits::check::condition_type";
/// A condition that can never hold (warning): its entry never applies.
pub const CHECK_CONDITION_NEVER: &str = "permits::check::condition_never";
/// A condition that always holds (warning): write the entry without it.
pub const CHECK_CONDITION_ALWAYS: &str = "permits::check::condition_always";
/// A doc comment above a declaration that does not keep one (a `may` block, an authority statement).
pub const CHECK_DOC_DROPPED: &str = "permits::check::doc_dropped";
/// A name listed twice in one list (warning).
pub const CHECK_LISTED_TWICE: &str = "permits::check::listed_twice";

/// A claim that is safer than what the body proves: the tool is claimed safer than it is.
pub const EFFECTS_UNDERSTATED: &str = "permits::effects::understated";
/// A claim wider than what the body proves (warning; the level uses the claim).
pub const EFFECTS_OVERSTATED: &str = "permits::effects::overstated";
/// A `call dynamic`: every class and the reserved subject, so `never` (warning).
pub const EFFECTS_DYNAMIC: &str = "permits::effects::dynamic";
/// A tool writes the reserved entity `permits`, so it is `never` for every agent (warning).
pub const EFFECTS_RESERVED: &str = "permits::effects::reserved";

/// A tool in two lists of one layer (warning; the strictest wins).
pub const LEVELS_TWO_LISTS: &str = "permits::levels::two_lists";
/// A conditional entry shadowed by an unconditional entry as strict or stricter in its layer (warning).
pub const LEVELS_SHADOWED: &str = "permits::levels::shadowed";
/// A class set to `alone` in the package-wide or a skill layer, which only tighten (warning).
pub const LEVELS_ALONE_IGNORED: &str = "permits::levels::alone_ignored";
/// A skill's entry or setting that would loosen its agent and cannot take effect (warning).
pub const LEVELS_SKILL_LOOSENS: &str = "permits::levels::skill_loosens";
/// A tool named `alone` that inherits a stricter level from a tool it calls (warning).
pub const LEVELS_ALONE_INHERITS: &str = "permits::levels::alone_inherits";
/// A route for a triple that is `alone` or `never`: it can never be used (warning).
pub const LEVELS_ROUTE_UNUSED: &str = "permits::levels::route_unused";
/// A package that has files but compiles to zero decisions.
pub const LEVELS_NO_DECISIONS: &str = "permits::levels::no_decisions";

/// An expectation of a `test` block that the compiled table does not meet.
pub const TEST_FAILED: &str = "permits::test::failed";
/// An expectation written without arguments whose level depends on the arguments (spec §7).
pub const TEST_DEPENDS: &str = "permits::test::depends_on_arguments";


/// Every code with what it means, for tools (SARIF rules) and the README's table.
pub const ALL: &[(&str, &str)] = &[
    (LOAD_IO, "a path could not be read (missing, unreadable)"),
    (LOAD_EMPTY, "a package folder holds no `.permits` files"),
    (LOAD_UTF8, "a source file is not valid UTF-8"),
    (SYNTAX_PARSE, "the text does not follow the grammar"),
    (SYNTAX_NUL, "a NUL byte in a source file"),
    (SYNTAX_NON_ASCII, "an identifier with a non-ASCII character (confusable names are an attack on reviewers)"),
    (SYNTAX_RESERVED, "a reserved word used as a name"),
    (SYNTAX_ESCAPE, "a bad escape in a string"),
    (SYNTAX_TOO_DEEP, "parentheses nested deeper than the bound (checked before parsing)"),
    (SYNTAX_NUMBER, "a duration or number out of range"),
    (CHECK_DUPLICATE, "a name defined twice in one package"),
    (CHECK_UNKNOWN, "a name that refers to nothing (with the nearest name suggested)"),
    (CHECK_WRONG_KIND, "a name of the wrong kind (a function in a list, a skill where a tool belongs)"),
    (CHECK_MISSING_LABEL, "a tool without its label"),
    (CHECK_EXTERN_CLAIM, "an `extern tool` without a claim"),
    (CHECK_EXTERN_BODY, "an operation or call in an `extern tool` (it has no body to prove)"),
    (CHECK_REPEATED, "a statement that may appear once appears again (two `version`s, two sponsors, a class set twice)"),
    (CHECK_TYPE, "a parameter type that is not `string`, `int`, `bool`, `money` or an entity"),
    (CHECK_VERSION, "`version P.F` or `subject P` that does not fit the parameters"),
    (CHECK_FIELD, "a field an entity does not declare"),
    (CHECK_READS_SETTING, "`reads` set in a `may` block (reads is always alone)"),
    (CHECK_PRESET, "a preset that is not the first statement of its `may` block"),
    (CHECK_ROUTE_UNLISTED, "a `route` for a tool the skill (or none of the agent's skills) lists"),
    (CHECK_QUEUE_UNDECIDABLE, "a queue that nobody can decide"),
    (CHECK_NO_SPONSOR, "an agent without a sponsor"),
    (CHECK_BUDGET, "a budget with a missing, unknown, repeated or mistyped field, or a figure out of range"),
    (CHECK_BUDGET_ALLOWANCE, "a budget whose automatic allowance (`alone_up_to`) is above its ceiling (warning)"),
    (CHECK_SPEND, "`spend BUDGET by PARAM` where PARAM is not a `money` parameter of the tool"),
    (CHECK_SPEND_UNBOUND, "a tool that spends from a budget through what it calls, without a `spend` of its own saying how much"),
    (CHECK_CONDITION_PARAM, "a condition names a parameter the tool does not have"),
    (CHECK_CONDITION_TYPE, "a condition compares a parameter with a value or operator of the wrong type"),
    (CHECK_CONDITION_NEVER, "a condition that can never hold (warning): its entry never applies"),
    (CHECK_CONDITION_ALWAYS, "a condition that always holds (warning): write the entry without it"),
    (CHECK_DOC_DROPPED, "a doc comment above a declaration that does not keep one (a `may` block, an authority statement)"),
    (CHECK_LISTED_TWICE, "a name listed twice in one list (warning)"),
    (EFFECTS_UNDERSTATED, "a claim that is safer than what the body proves: the tool is claimed safer than it is"),
    (EFFECTS_OVERSTATED, "a claim wider than what the body proves (warning; the level uses the claim)"),
    (EFFECTS_DYNAMIC, "a `call dynamic`: every class and the reserved subject, so `never` (warning)"),
    (EFFECTS_RESERVED, "a tool writes the reserved entity `permits`, so it is `never` for every agent (warning)"),
    (LEVELS_TWO_LISTS, "a tool in two lists of one layer (warning; the strictest wins)"),
    (LEVELS_SHADOWED, "a conditional entry shadowed by an unconditional entry as strict or stricter in its layer (warning)"),
    (LEVELS_ALONE_IGNORED, "a class set to `alone` in the package-wide or a skill layer, which only tighten (warning)"),
    (LEVELS_SKILL_LOOSENS, "a skill's entry or setting that would loosen its agent and cannot take effect (warning)"),
    (LEVELS_ALONE_INHERITS, "a tool named `alone` that inherits a stricter level from a tool it calls (warning)"),
    (LEVELS_ROUTE_UNUSED, "a route for a triple that is `alone` or `never`: it can never be used (warning)"),
    (LEVELS_NO_DECISIONS, "a package that has files but compiles to zero decisions"),
    (TEST_FAILED, "an expectation of a `test` block that the compiled table does not meet"),
    (TEST_DEPENDS, "an expectation written without arguments whose level depends on the arguments"),
];

/// Whether a code is a failed `test` expectation: the table was built, only its tests failed.
pub fn is_test_failure(code: &str) -> bool {
    code == TEST_FAILED || code == TEST_DEPENDS
}

/// What a code means; `None` for an unknown code.
pub fn describe(code: &str) -> Option<&'static str> {
    ALL.iter().find(|(c, _)| *c == code).map(|(_, d)| *d)
}
