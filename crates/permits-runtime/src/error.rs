//! The runtime's errors: a refusal (with its kind and a message a person reads), an unknown record, or a
//! store failure.

use serde::Serialize;

/// Why the runtime refused (spec §5). A refusal never runs anything; some also make the proposal final (the
/// message says so, and [`crate::Proposal::status`] shows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The call's level is `never`: an unknown agent, skill, tool or person, a tool outside the skill,
    /// arguments that do not match the tool's parameters, or the rules.
    Never,
    /// The call must be proposed to a person first (its level is not `alone`).
    MustPropose,
    /// The host could not supply the covered version (`version P.F`) of the call.
    UnknownVersion,
    /// The person may not decide (or revoke, or withdraw) this proposal.
    NotDecider,
    /// The fingerprint passed with the approval is not the proposal's.
    WrongFingerprint,
    /// The tool, the entry, the arguments, the covered version or the destination changed since the
    /// proposal: it is now `stale`, final.
    Stale,
    /// On the current table the call is `never`: the proposal is final.
    NowNever,
    /// Execution of a proposal with no grant.
    NotApproved,
    /// The proposal expired undecided: it is now `expired`, final.
    ProposalExpired,
    /// The grant has expired; the proposal stays `granted` until approved again or revoked.
    GrantExpired,
    /// The grant's basis does not authorize an execution (`unknown`).
    Basis,
    /// The host's authority refused the agent's account or the person the call runs for: the proposal is
    /// `failed`, final.
    Authority,
    /// The destination the host is about to use is not the approved one.
    Destination,
    /// A rejection (or a rule's revocation) without a reason.
    ReasonRequired,
    /// The proposal's status does not allow the action (e.g. approving a `rejected` one).
    Status,
    /// A standing rule cannot be made (level, skill, or who asks).
    Rule,
    /// An earlier proposal for the same subject in the same work is `sending`, `unknown` or `done`: resolve
    /// it first, or use a new operation key.
    Unresolved,
    /// The budget refuses (spec §6): the amount does not fit under the ceiling that applies, or an
    /// automatic grant no longer fits the current allowance. A proposal keeps its status.
    Budget,
    /// A receipt that does not name the operation and amount, or a settlement of something not awaiting
    /// one (spec §6 "Settlement"): nothing changes.
    NotConclusive,
    /// An input over one of the runtime's documented limits (spec §5a "Bounded input", [`crate::limits`]):
    /// nothing is stored.
    TooLarge,
    /// An input outside what the operation takes, though within every limit: empty where a value is needed,
    /// a lease of 0 seconds (spec §5a "Leases"). Nothing is stored. (Over a limit is [`Refusal::TooLarge`].)
    InvalidRequest,
    /// An execution under a claim token other than the one that consumed the grant (spec §5a "Idempotent
    /// execution"): nothing runs.
    Claimed,
    /// `settle` or `resolve` of an operation whose execution was never admitted (spec §5a "Settlement
    /// follows a send"): nothing changes.
    NotSent,
    /// The execution protocol's order was not kept (a host that runs the tool itself): the execution is not
    /// claimed with this token, not confirmed yet (or confirmed already), or the table changed since the
    /// claim (claim it again). Nothing runs.
    NotClaimed,
    /// Spec §5a "Leases": the task is held by another host's lease, or the lease presented is no longer
    /// the key's current one ("this host no longer holds the task") or has expired. Nothing changes.
    NotHolder,
}

impl Refusal {
    /// The refusal's stable code, as the service's errors and the Python binding's `Refused.kind` name it:
    /// its serde name in snake case (`must_propose`, `too_large`, `invalid_request`, …).
    pub fn code(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "refused".into())
    }
}

/// An error of a [`crate::Runtime`] operation.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The runtime refused; `message` is lowercase, names users in backticks, and says why.
    #[error("{message}")]
    Refused {
        /// The kind of refusal.
        refusal: Refusal,
        /// What a person (or the agent) is told.
        message: String,
    },
    /// No proposal has this id.
    #[error("there is no proposal `{0}`")]
    UnknownProposal(String),
    /// No standing rule has this id.
    #[error("there is no standing rule `{0}`")]
    UnknownRule(String),
    /// No proposal or alone run has this id.
    #[error("there is no execution `{0}`")]
    UnknownExecution(String),
    /// No call ever bound this operation key (spec §5a "Tasks").
    #[error("there is no task `{0}`")]
    UnknownTask(String),
    /// The table declares no budget of this name.
    #[error("there is no budget `{0}`")]
    UnknownBudget(String),
    /// A table was not installed, or this runtime's table is not the store's current one (spec §5a).
    #[error("{0}")]
    Table(#[from] crate::signing::TableRefusal),
    /// The store failed; nothing of the operation was recorded.
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
}

impl RuntimeError {
    /// The kind of refusal, if this is a refusal.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            RuntimeError::Refused { refusal, .. } => Some(*refusal),
            _ => None,
        }
    }

    pub(crate) fn refused(refusal: Refusal, message: impl Into<String>) -> RuntimeError {
        RuntimeError::Refused { refusal, message: message.into() }
    }
}

/// A failure of the store (spec §5): the transaction it happened in was rolled back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

#[cfg(test)]
mod tests {
    use super::Refusal;

    #[test]
    fn a_refusal_code_is_its_snake_case_name() {
        assert_eq!(Refusal::MustPropose.code(), "must_propose");
        assert_eq!(Refusal::InvalidRequest.code(), "invalid_request");
        assert_eq!(Refusal::Never.code(), "never");
    }
}
