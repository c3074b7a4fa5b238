"""permits: what AI agents may do alone, must propose to a person, and never do — the runtime, in process.

Load a table that `permitc compile` wrote, build one `Runtime` over it with the host's callbacks, and pass
every tool call of the model through `Runtime.call`; or, against the approval service (`permitd`), a
`Client(url, host_key)`. See the README's "From Python" section.
"""

from __future__ import annotations

from permits._errors import Error, InputError, NotFound, Refused, ServiceError, StoreError, TableError, ToolError
from permits._permits import (
    ADMIT_ALL,
    EVERYBODY,
    AdmitAll,
    AuditEvent,
    BudgetStatus,
    Claimed,
    Decider,
    Decision,
    Everybody,
    Evidence,
    Execution,
    Failed,
    Grant,
    Lease,
    ManualClock,
    OfferedTool,
    Param,
    Principal,
    Proposal,
    Ran,
    Reason,
    RuleRevocation,
    RunContext,
    Runtime,
    StandingRule,
    Table,
    Task,
    Unknown,
    VersionQuery,
)
from permits.client import Client

__all__ = [
    "ADMIT_ALL",
    "EVERYBODY",
    "AdmitAll",
    "AuditEvent",
    "BudgetStatus",
    "Claimed",
    "Client",
    "Decider",
    "Decision",
    "Error",
    "Everybody",
    "Evidence",
    "Execution",
    "Failed",
    "Grant",
    "InputError",
    "Lease",
    "ManualClock",
    "NotFound",
    "OfferedTool",
    "Param",
    "Principal",
    "Proposal",
    "Ran",
    "Reason",
    "Refused",
    "RuleRevocation",
    "RunContext",
    "Runtime",
    "StandingRule",
    "ServiceError",
    "StoreError",
    "Table",
    "TableError",
    "Task",
    "ToolError",
    "Unknown",
    "VersionQuery",
]
