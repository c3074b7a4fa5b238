"""The exceptions of `permits`: one hierarchy under `permits.Error`.

The native module raises these classes (it imports this module); they are plain Python so that
`InputError` can also be a `TypeError` and a `ValueError`, and `NotFound` a `LookupError`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Error", "InputError", "NotFound", "Refused", "StoreError", "TableError", "ToolError"]


class Error(Exception):
    """Every error `permits` raises. A Rust panic, which should never happen, is one too ("internal")."""


class Refused(Error):
    """The runtime refused: nothing ran, and `message` says why (lowercase, names in backticks).

    `kind` is the runtime's refusal kind (`never`, `must_propose`, `not_decider`, `wrong_fingerprint`, `stale`,
    `now_never`, `not_approved`, `proposal_expired`, `grant_expired`, `basis`, `authority`, `destination`,
    `reason_required`, `status`, `rule`, `unresolved`, `budget`, `not_conclusive`, `unknown_version`, `too_large`,
    `claimed`, `not_sent`), or one of
    the binding's own: `callback` (a host callback raised or answered with the wrong type: the transaction it
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
    """A table could not be loaded: `kind` is `io`, `malformed`, `unknown_format`, `digest_mismatch` or
    `unsupported` (a signed table: `trust=` is not in this runtime yet); or the runtime did not install it, or
    its table is not the store's current one (then nothing changes): `unsigned`, `other_table`,
    `untrusted_key`, `bad_signature`, `rollback`, `not_current` (`replace_table` or `install_table` first)
    or `not_supervisor`."""

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


# Shown as `permits.Refused` (where they are re-exported), not `permits._errors.Refused`.
for _class in (Error, Refused, StoreError, TableError, NotFound, InputError, ToolError):
    _class.__module__ = "permits"
