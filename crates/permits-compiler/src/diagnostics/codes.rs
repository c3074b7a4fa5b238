//! Every diagnostic code, with its severity and what it means, written once (spec §7: codes are stable:
//! tools and CI configurations match on them). The README's table of codes is checked against [`Code::ALL`]
//! by a test.

use super::Severity;

/// Declares [`Code`]: one variant per code, with its stable name, its severity and its meaning.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $severity:ident, $meaning:literal;)*) => {
        /// A stable diagnostic code. `Display` and [`Code::as_str`] give its name (`permits::check::unknown`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// Every code, in stage order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable name: `permits::STAGE::KIND`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)*
                }
            }

            /// The severity every diagnostic with this code has.
            pub fn severity(self) -> Severity {
                match self {
                    $(Code::$variant => Severity::$severity,)*
                }
            }

            /// What the code means, in one line (SARIF rules, the README's table).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(Code::$variant => $meaning,)*
                }
            }
        }
    };
}

codes! {
    /// A path could not be read (missing, unreadable).
    LoadIo = "permits::load::io", Error, "a path could not be read (missing, unreadable)";
    /// A package folder holds no `.permits` files.
    LoadEmpty = "permits::load::empty", Error, "a package folder holds no `.permits` files";
    /// A source file is not valid UTF-8.
    LoadUtf8 = "permits::load::utf8", Error, "a source file is not valid UTF-8";
    /// The text does not follow the grammar.
    SyntaxParse = "permits::syntax::parse", Error, "the text does not follow the grammar";
    /// A NUL byte in a source file.
    SyntaxNul = "permits::syntax::nul", Error, "a NUL byte in a source file";
    /// An identifier with a non-ASCII character (confusable names are an attack on reviewers).
    SyntaxNonAscii = "permits::syntax::non_ascii", Error, "an identifier with a non-ASCII character (confusable names are an attack on reviewers)";
    /// A reserved word used as a name.
    SyntaxReserved = "permits::syntax::reserved", Error, "a reserved word used as a name";
    /// A bad escape in a string.
    SyntaxEscape = "permits::syntax::escape", Error, "a bad escape in a string";
    /// Parentheses nested deeper than the bound (checked before parsing).
    SyntaxTooDeep = "permits::syntax::too_deep", Error, "parentheses nested deeper than the bound (checked before parsing)";
    /// A duration or number out of range.
    SyntaxNumber = "permits::syntax::number", Error, "a duration or number out of range";
    /// A name defined twice in one package.
    CheckDuplicate = "permits::check::duplicate", Error, "a name defined twice in one package";
    /// A name that refers to nothing (with the nearest name suggested).
    CheckUnknown = "permits::check::unknown", Error, "a name that refers to nothing (with the nearest name suggested)";
    /// A name of the wrong kind (a function in a list, a skill where a tool belongs).
    CheckWrongKind = "permits::check::wrong_kind", Error, "a name of the wrong kind (a function in a list, a skill where a tool belongs)";
    /// A tool without its label.
    CheckMissingLabel = "permits::check::missing_label", Error, "a tool without its label";
    /// An `extern tool` without a claim.
    CheckExternClaim = "permits::check::extern_claim", Error, "an `extern tool` without a claim";
    /// An operation or call in an `extern tool` (it has no body to prove).
    CheckExternBody = "permits::check::extern_body", Error, "an operation or call in an `extern tool` (it has no body to prove)";
    /// A `pinned` digest that is not `sha256:` and 64 lowercase hex digits.
    CheckPinned = "permits::check::pinned", Error, "a `pinned` digest that is not `sha256:` and 64 lowercase hex digits";
    /// A statement that may appear once appears again (two `version`s, two sponsors, a class set twice).
    CheckRepeated = "permits::check::repeated", Error, "a statement that may appear once appears again (two `version`s, two sponsors, a class set twice)";
    /// A parameter type that is not `string`, `int`, `bool`, `money`, `shell` or an entity.
    CheckType = "permits::check::type", Error, "a parameter type that is not `string`, `int`, `bool`, `money`, `shell` or an entity";
    /// A tool with a second `shell` parameter (spec §2: at most one per tool).
    CheckShellTwice = "permits::check::shell_twice", Error, "a tool with a second `shell` parameter (a tool has at most one)";
    /// `version P.F` or `subject P` that does not fit the parameters.
    CheckVersion = "permits::check::version", Error, "`version P.F` or `subject P` that does not fit the parameters";
    /// A field an entity does not declare.
    CheckField = "permits::check::field", Error, "a field an entity does not declare";
    /// `reads` set in a `may` block (reads is always alone).
    CheckReadsSetting = "permits::check::reads_setting", Error, "`reads` set in a `may` block (reads is always alone)";
    /// A preset that is not the first statement of its `may` block.
    CheckPreset = "permits::check::preset", Error, "a preset that is not the first statement of its `may` block";
    /// A `route` for a tool the skill (or none of the agent's skills) lists.
    CheckRouteUnlisted = "permits::check::route_unlisted", Error, "a `route` for a tool the skill (or none of the agent's skills) lists";
    /// A `delegates` entry naming a skill that is not one of the agent's skills (spec §3b).
    CheckDelegateSkill = "permits::check::delegate_skill", Error, "a `delegates` entry naming a skill that is not one of the agent's skills";
    /// Skills that delegate to each other in a cycle (spec §3b).
    CheckDelegationCycle = "permits::check::delegation_cycle", Error, "skills that delegate to each other in a cycle";
    /// A queue that nobody can decide.
    CheckQueueUndecidable = "permits::check::queue_undecidable", Error, "a queue that nobody can decide";
    /// An agent without a sponsor.
    CheckNoSponsor = "permits::check::no_sponsor", Error, "an agent without a sponsor";
    /// A budget with a missing, unknown, repeated or mistyped field, or a figure out of range.
    CheckBudget = "permits::check::budget", Error, "a budget with a missing, unknown, repeated or mistyped field, or a figure out of range";
    /// A budget whose automatic allowance (`alone_up_to`) is above its ceiling (warning).
    CheckBudgetAllowance = "permits::check::budget_allowance", Warning, "a budget whose automatic allowance (`alone_up_to`) is above its ceiling (warning)";
    /// A budget whose `per_task` is above its ceiling.
    CheckBudgetPerTask = "permits::check::budget_per_task", Error, "a budget whose `per_task` is above its ceiling (no task could ever hold it)";
    /// `spend BUDGET by PARAM` where PARAM is not a `money` parameter of the tool.
    CheckSpend = "permits::check::spend", Error, "`spend BUDGET by PARAM` where PARAM is not a `money` parameter of the tool";
    /// A tool that spends from a budget through what it calls, without a `spend` of its own saying how much.
    CheckSpendUnbound = "permits::check::spend_unbound", Error, "a tool that spends from a budget through what it calls, without a `spend` of its own saying how much";
    /// A condition names a parameter the tool does not have.
    CheckConditionParam = "permits::check::condition_param", Error, "a condition names a parameter the tool does not have";
    /// A condition compares a parameter with a value or operator of the wrong type.
    CheckConditionType = "permits::check::condition_type", Error, "a condition compares a parameter with a value or operator of the wrong type";
    /// `<`, `<=`, `>=` or `>` on a `shell` parameter (spec §3a).
    CheckShellOrder = "permits::check::shell_order", Error, "`<`, `<=`, `>=` or `>` on a `shell` parameter: its parts are text, compared with `==`, `!=`, `in` and `matches`";
    /// A condition on a `shell` parameter whose pattern or literal can never match a part (spec §3a).
    CheckShellPattern = "permits::check::shell_pattern", Error, "a condition on a `shell` parameter whose pattern or literal can never match a part (it holds a separator or a control character)";
    /// A decimal number where money or a whole number is expected (spec §2: money is never a float).
    CheckDecimal = "permits::check::decimal", Error, "a decimal number where money or a whole number is expected (money is a whole number of minor units, like cents)";
    /// A condition that can never hold (warning): its entry never applies.
    CheckConditionNever = "permits::check::condition_never", Warning, "a condition that can never hold (warning): its entry never applies";
    /// A condition that always holds (warning): write the entry without it.
    CheckConditionAlways = "permits::check::condition_always", Warning, "a condition that always holds (warning): write the entry without it";
    /// A doc comment above a declaration that does not keep one (a `may` block, an authority statement).
    CheckDocDropped = "permits::check::doc_dropped", Warning, "a doc comment above a declaration that does not keep one (a `may` block, an authority statement)";
    /// A name listed twice in one list (warning).
    CheckListedTwice = "permits::check::listed_twice", Warning, "a name listed twice in one list (warning)";
    /// A claim that is safer than what the body proves: the tool is claimed safer than it is.
    EffectsUnderstated = "permits::effects::understated", Error, "a claim that is safer than what the body proves: the tool is claimed safer than it is";
    /// A claim wider than what the body proves (warning; the level uses the claim).
    EffectsOverstated = "permits::effects::overstated", Warning, "a claim wider than what the body proves (warning; the level uses the claim)";
    /// A `call dynamic`: every class and the reserved subject, so `never` (warning).
    EffectsDynamic = "permits::effects::dynamic", Warning, "a `call dynamic`: every class and the reserved subject, so `never` (warning)";
    /// A tool writes the reserved entity `permits`, so it is `never` for every agent (warning).
    EffectsReserved = "permits::effects::reserved", Warning, "a tool writes the reserved entity `permits`, so it is `never` for every agent (warning)";
    /// A tool in two lists of one layer (warning; the strictest wins).
    LevelsTwoLists = "permits::levels::two_lists", Warning, "a tool in two lists of one layer (warning; the strictest wins)";
    /// A conditional entry shadowed by an unconditional entry as strict or stricter in its layer (warning).
    LevelsShadowed = "permits::levels::shadowed", Warning, "a conditional entry shadowed by an unconditional entry as strict or stricter in its layer (warning)";
    /// A class set to `alone` in the package-wide or a skill layer, which only tighten (warning).
    LevelsAloneIgnored = "permits::levels::alone_ignored", Warning, "a class set to `alone` in the package-wide or a skill layer, which only tighten (warning)";
    /// `alone` in a mode, which only tightens (warning).
    LevelsModeAlone = "permits::levels::mode_alone", Warning, "`alone` in a mode (a preset, a class setting or a list): modes only tighten, so it says nothing (warning)";
    /// A skill's entry or setting that would loosen its agent and cannot take effect (warning).
    LevelsSkillLoosens = "permits::levels::skill_loosens", Warning, "a skill's entry or setting that would loosen its agent and cannot take effect (warning)";
    /// A tool named `alone` that inherits a stricter level from a tool it calls (warning).
    LevelsAloneInherits = "permits::levels::alone_inherits", Warning, "a tool named `alone` that inherits a stricter level from a tool it calls (warning)";
    /// A route for a triple that is `alone` or `never`: it can never be used (warning).
    LevelsRouteUnused = "permits::levels::route_unused", Warning, "a route for a triple that is `alone` or `never`: it can never be used (warning)";
    /// A package that has files but compiles to zero decisions.
    LevelsNoDecisions = "permits::levels::no_decisions", Error, "a package that has files but compiles to zero decisions";
    /// An expectation of a `test` block that the compiled table does not meet.
    TestFailed = "permits::test::failed", Error, "an expectation of a `test` block that the compiled table does not meet";
    /// An expectation written without arguments whose level depends on the arguments (spec §7).
    TestDependsOnArguments = "permits::test::depends_on_arguments", Error, "an expectation written without arguments whose level depends on the arguments";
    /// A `--via` link of `permitc decide` or `explain` that is not `AGENT.SKILL`, or names an agent or skill the package does not declare.
    UsageVia = "permits::usage::via", Error, "a `--via` link that is not `AGENT.SKILL`, or names an agent or skill the package does not declare";
    /// A `--head` of `permitc audit verify` that is not `SEQ:HASH`.
    UsageHead = "permits::usage::head", Error, "a `--head` of `permitc audit verify` that is not `SEQ:HASH`";
    /// `permitc audit verify` cannot read the store or export it is given (exit 2).
    AuditUnreadable = "permits::audit::unreadable", Error, "`permitc audit verify` cannot read the store or export it is given (exit 2)";
    /// `permitc audit verify` of a PostgreSQL ledger by a permitc built without the feature `postgres` (exit 2).
    AuditNoPostgres = "permits::audit::no_postgres", Error, "`permitc audit verify` of a PostgreSQL ledger by a permitc built without the feature `postgres` (exit 2)";
    /// An audit chain that does not verify: an event changed after it was written, a broken link, or not the expected head (exit 1).
    AuditBroken = "permits::audit::broken", Error, "an audit chain that does not verify: an event changed after it was written, a broken link, or not the expected head (exit 1)";
}

impl Code {
    /// The code with this name; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == name)
    }

    /// Whether the code is a failed `test` expectation: the table was built, only its tests failed.
    pub fn is_test_failure(self) -> bool {
        matches!(self, Code::TestFailed | Code::TestDependsOnArguments)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
