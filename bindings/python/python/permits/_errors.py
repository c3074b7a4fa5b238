"""The exceptions of `permits`: one hierarchy under `permits.Error`.

The native module raises these classes (it imports this module); they are plain Python so that
`InputError` can also be a `TypeError` and a `ValueError`, and `NotFound` a `LookupError`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Error", "InputError", "NotFound", "Refused", "ServiceError", "StoreError", "TableError", "ToolError"]


class Error(Exception):
    """Every error `permits` raises. A Rust panic, which should never happen, is one too ("internal")."""


class Refused(Error):
    """The runtime refused: nothing ran, and `message` says why (lowercase, names in backticks).

    `kind` is the runtime's refusal kind (`never`, `must_propose`, `not_decider`, `wrong_fingerprint`, `stale`,
    `now_never`, `not_approved`, `proposal_expired`, `grant_expired`, `basis`, `authority`, `destination`,
    `reason_required`, `status`, `rule`, `unresolved`, `budget`, `not_conclusive`, `unknown_version`, `too_large`,
    `invalid_request` (an empty lease holder or key, a lease of 0 seconds), `claimed`, `not_sent`, `not_holder`: spec §5a "Leases", the task is leased to another holder, or the
    lease presented is no longer its current one — "this host no longer holds the task" — or has expired), or
    one of
    the service's own refusals of a key, from `permits.Client`: `not_your_agent` (a host key for other
    agents), `host_only`, `person_only` (only a person's key decides, and a host key is never one); or one
    of the binding's own: `callback` (a host callback raised or answered with the wrong type: the transaction it
    was called in was rolled back; the exception is `__cause__`) and `reentry` (a callback called back into
    the runtime).
    """

    kind: str
    message: str

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class StoreError(Error):
    """The store failed (a locked database past its busy timeout, a full disk, a corrupt record): the
    transaction was rolled back, nothing of the operation was recorded."""


class TableError(Error):
    """A table could not be loaded: `kind` is `io`, `malformed`, `unknown_format`, `digest_mismatch`,
    `unsigned` (`Table.load(trust=…)` found no `PATH.sig`), `other_table`, `untrusted_key` or
    `bad_signature` (its signature names another table, another key, or does not verify); or the runtime
    did not install it, or its table is not the store's current one (then nothing changes): the same four,
    `rollback`, `not_current` (`replace_table` or `install_table` first) or `not_supervisor`; or, from
    `permits.Client`, `table` (the service's runtime refused for its table: the message says why)."""

    kind: str

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class NotFound(Error, LookupError):
    """No proposal, standing rule, task, budget or execution has this id: `kind` is `proposal`, `rule`, `task`
    (an operation key no call bound), `budget` or `execution` (an alone run's id, `A-n`)."""

    kind: str
    id: str

    def __init__(self, kind: str, id: str, message: str) -> None:  # noqa: A002 - the record's id
        super().__init__(message)
        self.kind = kind
        self.id = id


class InputError(Error, TypeError, ValueError):
    """An argument of the wrong type or out of range (bytes where a str is expected, NaN, an integer beyond
    64 bits, a value nested too deep, …). Raised before the runtime is asked: nothing is stored."""


class ToolError(Error):
    """The tool raised, or returned something that is not JSON. It may have acted, so the runtime recorded
    the outcome as `unknown` (an alone spend stays reserved until `settle`); `result` is what the runtime
    returned (a `Ran` or an `Execution`), and the tool's exception is `__cause__`."""

    result: Any

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


class ServiceError(Error):
    """`permits.Client` could not get an answer from the approval service, or got one that is not the API's:
    the service is unreachable (`code="unreachable"`), did not answer in time (`timeout`), answered something
    that is not its JSON (`bad_answer`), refused the key (`unauthorized`: none, unknown or revoked), or
    failed inside (`internal`, or another code the service gave). `status` is the HTTP status when there was
    one. `sent` is `False` only when the request certainly never reached the service (the connection was
    refused): then nothing was done. With `sent=True` the operation may have been done: an operation the
    client retries safely was retried already (see `permits.Client`); for the others (`withdraw`, `settle`),
    read the record to learn what happened before you try again.
    """

    code: str
    message: str
    status: int | None
    sent: bool

    def __init__(self, code: str, message: str, status: int | None = None, sent: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.sent = sent


# Shown as `permits.Refused` (where they are re-exported), not `permits._errors.Refused`.
for _class in (Error, Refused, StoreError, TableError, NotFound, InputError, ToolError, ServiceError):
    _class.__module__ = "permits"
