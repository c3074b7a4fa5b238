"""Bad input from Python: wrong types for every parameter, None, huge ints, NaN, bytes where a str is expected,
deeply nested dicts, callbacks that raise or answer with the wrong type → a typed exception (a
`permits.Error`), never a crash and never an allow, and nothing stored."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, fixture

import permits

ARGS = {"repair": "T-7", "price": 45}
NOTE = {"repair": "T-7", "note": "Pads and a cable."}


def versions(q: permits.VersionQuery) -> str | None:
    return "r1"


def workshop(**kwargs: Any) -> permits.Runtime:
    kwargs.setdefault("authority", permits.ADMIT_ALL)
    kwargs.setdefault("versions", versions)
    return permits.Runtime(fixture("workshop"), clock=kwargs.pop("clock", permits.ManualClock(NOW)), **kwargs)


def ok(ctx: permits.RunContext) -> Any:
    return "ok"


def nothing_stored(rt: permits.Runtime) -> None:
    assert rt.proposals() == []
    assert rt.rules() == []


def proposal(rt: permits.Runtime) -> permits.Proposal:
    return rt.propose(
        "Estimator", "EstimateRepair", "SetPrice", ARGS, requester="Noor", operation_key="k", why="a price"
    )


# Every method, with good keyword arguments; each parameter is then replaced by bad values in turn.
GOOD: dict[str, dict[str, Any]] = {
    "decide": {"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice", "arguments": ARGS, "requester": "Mia"},
    "level": {"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice", "arguments": ARGS, "requester": "Mia"},
    "propose": {
        "agent": "Estimator",
        "skill": "EstimateRepair",
        "tool": "SetPrice",
        "arguments": ARGS,
        "requester": "Mia",
        "operation_key": "k",
        "why": "a price",
        "evidence": [permits.Evidence("NoteRepair", NOTE, "noted")],
        "destination": "https://example.test/",
        "lifetime": 60,
    },
    "call": {
        "agent": "Estimator",
        "skill": "EstimateRepair",
        "tool": "SetPrice",
        "arguments": ARGS,
        "requester": "Mia",
        "operation_key": "k",
        "why": "a price",
        "run": ok,
        "evidence": [],
        "destination": None,
        "lifetime": None,
    },
    "run_alone": {
        "agent": "Estimator",
        "skill": "EstimateRepair",
        "tool": "NoteRepair",
        "arguments": NOTE,
        "run": ok,
        "operation_key": "k",
    },
    "approve": {"proposal_id": "P-1", "person": "Noor", "fingerprint": "0" * 64, "mode": "once"},
    "approve_and_run": {"proposal_id": "P-1", "person": "Noor", "fingerprint": "0" * 64, "run": ok, "mode": "once"},
    "execute": {"proposal_id": "P-1", "run": ok, "destination": None, "claim_token": "t"},
    "reject": {"proposal_id": "P-1", "person": "Noor", "reason": "no"},
    "revoke": {"proposal_id": "P-1", "person": "Noor", "why": "no"},
    "withdraw": {"proposal_id": "P-1", "by": permits.Principal.agent("Estimator")},
    "allow_alone": {"agent": "Estimator", "tool": "SetPrice", "work_for": "Noor", "by": "Noor", "skill": "EstimateRepair"},
    "revoke_rule": {"rule_id": "R-1", "by": "Noor", "why": "no"},
    "task": {"operation_key": "k"},
    "end_task": {"operation_key": "k"},
    "resolve": {"proposal_id": "P-1", "by": "Noor", "receipt": {"operation": "k:P-1", "outcome": "accepted"}},
    "proposal": {"proposal_id": "P-1"},
    "waiting_for": {"person": "Noor"},
    "budget": {"name": "Supplies"},
    "raise_ceiling": {"budget": "Supplies", "by": "Noor"},
    "settle": {"holder": "A-1", "receipt": {"operation": "A-1", "amount": 1, "outcome": "accepted"}},
    "levels": {"agent": "Estimator", "skill": "EstimateRepair"},
    "offered_tools": {"agent": "Estimator", "skill": "EstimateRepair"},
}

# Parameters that may be None (and then take their default).
OPTIONAL = {"requester", "evidence", "destination", "lifetime", "mode", "skill", "arguments"}
NOT_TEXT: list[Any] = [None, b"Estimator", bytearray(b"x"), 1, 1.5, True, ["Estimator"], {"a": 1}, object()]
# What each non-text parameter refuses (None included where it is required).
BAD: dict[str, list[Any]] = {
    "arguments": [b"{}", "{}", [("repair", "T-7")], 1, {1: "x"}, {"price": math.nan}, {"price": 2**64}, {"a": object()}],
    "evidence": ["NoteRepair", [1], [{"tool": "NoteRepair"}], [{"tool": 1, "arguments": {}, "answer": 1}], {"a": 1}],
    "lifetime": [-1, 2**64, 1.5, "60", True],
    "mode": ["always", "ONCE", 1, True],
    "run": [None, "not callable", 1],
    "work_for": [b"Noor", 1, ["Noor"]],
    "receipt": [{"a": math.inf}, {"a": {1, 2}}, b"x", float("nan")],
}
BAD_FOR: dict[tuple[str, str], list[Any]] = {
    ("withdraw", "by"): [None, "Estimator", 1, ("agent", "Estimator")],
    # Optional here (None: no task, no claim token), so only wrong types.
    ("run_alone", "operation_key"): [b"k", 1, ["k"]],
    ("execute", "claim_token"): [b"t", 1, ["t"]],
}


def cases() -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    for method, good in GOOD.items():
        for param in good:
            values = BAD_FOR.get((method, param)) or BAD.get(param) or NOT_TEXT
            if param in OPTIONAL:
                values = [v for v in values if v is not None]
            out.extend((method, param, value) for value in values)
    return out


@pytest.mark.parametrize(("method", "param", "value"), cases(), ids=lambda v: repr(v)[:30])
def test_a_wrong_value_for_any_parameter_is_an_input_error(method: str, param: str, value: Any) -> None:
    rt = workshop()
    kwargs = dict(GOOD[method])
    kwargs[param] = value
    with pytest.raises(permits.InputError):
        getattr(rt, method)(**kwargs)
    nothing_stored(rt)


def test_input_errors_are_type_and_value_errors_and_say_what_is_wrong() -> None:
    rt = workshop()
    with pytest.raises(TypeError, match=r"expected a str, not `bytes`: decode the bytes to a str first"):
        rt.level("Estimator", b"EstimateRepair", "SetPrice")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"arguments\[\"price\"\] is NaN: not a JSON number"):
        rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": math.nan})
    with pytest.raises(permits.InputError, match=r"is an integer out of range"):
        rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 2**64})
    with pytest.raises(permits.InputError, match=r"has the key 1: keys must be str"):
        rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": {1: 2}})
    with pytest.raises(permits.InputError, match=r"is a str that is not valid Unicode"):
        rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "\ud800"})
    with pytest.raises(permits.InputError, match="the arguments must be a dict"):
        rt.decide("Estimator", "EstimateRepair", "SetPrice", [1, 2])  # type: ignore[arg-type]
    nothing_stored(rt)


def test_deeply_nested_and_cyclic_values_are_refused_at_the_limit() -> None:
    rt = workshop()
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(permits._permits.MAX_DEPTH - 2):  # with the arguments' dict and `repair`'s: 64 levels
        inner["d"] = {}
        inner = inner["d"]
    # At the limit: a value, refused by the runtime as a mistyped argument (`never`), not by the binding.
    assert rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": deep, "price": 1}).level == "never"
    inner["d"] = {}
    with pytest.raises(permits.InputError, match="nests deeper than 64 levels"):
        rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": deep, "price": 1})
    cycle: dict[str, Any] = {}
    cycle["again"] = cycle
    with pytest.raises(permits.InputError, match="nests deeper"):
        rt.propose("Estimator", "EstimateRepair", "SetPrice", {"repair": cycle}, operation_key="k", why="w")
    listed: list[Any] = []
    listed.append(listed)
    with pytest.raises(permits.InputError):
        rt.settle("A-1", listed)
    nothing_stored(rt)


def test_64_bit_integers_are_json_and_the_runtime_decides_them() -> None:
    rt = workshop()
    # 2**63 fits JSON's u64 but not the table's int: the runtime says never, with the reason.
    d = rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 2**63}, requester="Mia")
    assert d.level == "never" and d.refusal is not None
    price = {"repair": "T-7", "price": 2**63 - 1}
    assert rt.level("Estimator", "EstimateRepair", "SetPrice", price, requester="Mia") == "propose"
    # Money is never negative: never, whatever the size.
    price = {"repair": "T-7", "price": -(2**63)}
    assert rt.level("Estimator", "EstimateRepair", "SetPrice", price, requester="Mia") == "never"


def test_the_constructor_refuses_wrong_types(tmp_path: Path) -> None:
    table = fixture("workshop")
    bad: list[dict[str, Any]] = [
        {"table": "workshop.json", "authority": permits.ADMIT_ALL},
        {"table": None, "authority": permits.ADMIT_ALL},
        {"table": table, "authority": None},
        {"table": table, "authority": "admit all"},
        {"table": table, "authority": permits.ADMIT_ALL, "store": 1},
        {"table": table, "authority": permits.ADMIT_ALL, "store": b"ledger.db"},
        {"table": table, "authority": permits.ADMIT_ALL, "versions": "r1"},
        {"table": table, "authority": permits.ADMIT_ALL, "naming": 1},
        {"table": table, "authority": permits.ADMIT_ALL, "clock": 1_767_225_600},
        {"table": table, "authority": permits.ADMIT_ALL, "audit": 1},
    ]
    for kwargs in bad:
        with pytest.raises(permits.InputError):
            permits.Runtime(**kwargs)
    with pytest.raises(TypeError):  # a missing required argument: Python's own TypeError
        permits.Runtime(table)  # type: ignore[call-arg]
    with pytest.raises(permits.StoreError, match="cannot open the database"):
        permits.Runtime(table, authority=permits.ADMIT_ALL, store=tmp_path / "no-such-folder" / "ledger.db")
    for value in [None, 1, b"x", object()]:
        with pytest.raises(permits.InputError):
            permits.Table.load(value)  # type: ignore[arg-type]
    with pytest.raises(permits.TableError) as err:
        permits.Table.load(tmp_path / "missing.json")
    assert err.value.kind == "io"
    with pytest.raises(permits.TableError) as err:
        permits.Table.from_json("{}")
    assert err.value.kind == "malformed"
    tampered = table.to_json().replace('"level": "never"', '"level": "alone"', 1)
    with pytest.raises(permits.TableError) as err:
        permits.Table.from_json(tampered)
    assert err.value.kind == "digest_mismatch"
    # A trusted key that is not one is bad input, before the table is read (tests/test_signed_tables.py).
    with pytest.raises(permits.InputError, match="is not 64 hex digits"):
        permits.Table.load(tmp_path / "t.json", trust=["ed25519:..."])


# -------------------------------------------------------------------------------------------------------
# Callbacks that raise or answer with the wrong type: a refusal (kind `callback`), never an allow, nothing
# stored.


def boom(*args: Any) -> Any:
    raise ValueError("boom")


def answer(value: Any) -> Callable[..., Any]:
    return lambda *args: value


def propose_price(rt: permits.Runtime) -> Any:
    return proposal(rt)


def call_note(rt: permits.Runtime) -> Any:
    return rt.call(
        "Estimator", "EstimateRepair", "NoteRepair", NOTE, requester="Noor", operation_key="k", why="note", run=ok
    )


@pytest.mark.parametrize(
    ("callback", "value", "operation"),
    [
        ("authority", boom, call_note),
        ("authority", answer(None), call_note),
        ("authority", answer(1), call_note),
        ("authority", answer(["yes"]), call_note),
        ("versions", boom, propose_price),
        ("versions", answer(7), propose_price),
        ("versions", answer(b"r1"), propose_price),
        ("naming", boom, propose_price),
        ("naming", answer(None), propose_price),
        ("naming", answer(45), propose_price),
        ("clock", boom, propose_price),
        ("clock", answer(1.5), propose_price),
        ("clock", answer(-1), propose_price),
        ("clock", answer(2**64), propose_price),
        ("clock", answer("now"), propose_price),
        ("clock", answer(True), propose_price),
    ],
    ids=lambda v: getattr(v, "__name__", repr(v))[:20],
)
def test_a_failing_callback_is_a_refusal_and_stores_nothing(
    callback: str, value: Callable[..., Any], operation: Callable[[permits.Runtime], Any]
) -> None:
    rt = workshop(**{callback: value})
    with pytest.raises(permits.Refused) as err:
        operation(rt)
    assert err.value.kind == "callback", err.value
    assert str(err.value).startswith(f"the `{callback}` callback failed: ")
    assert err.value.__cause__ is not None
    if callback != "clock":
        nothing_stored(rt)


def test_an_authority_that_raises_at_execution_leaves_the_grant_and_runs_nothing() -> None:
    state = {"raise": False, "runs": 0}

    def authority(who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool:
        if state["raise"]:
            raise RuntimeError("the directory is down")
        return True

    def run(ctx: permits.RunContext) -> Any:
        state["runs"] += 1
        return "set"

    rt = workshop(authority=authority)
    p = proposal(rt)
    rt.approve(p.id, "Noor", p.fingerprint)
    state["raise"] = True
    with pytest.raises(permits.Refused) as err:
        rt.execute(p.id, run=run)
    assert err.value.kind == "callback"
    assert "RuntimeError: the directory is down" in str(err.value)
    # Rolled back: still granted (not failed, not sending), nothing ran; once the directory is back, it runs.
    assert rt.proposal(p.id).status == "granted"
    assert state["runs"] == 0
    state["raise"] = False
    assert rt.execute(p.id, run=run).proposal.status == "done"
    assert state["runs"] == 1


def test_a_tool_that_raises_is_recorded_unknown_and_raised_as_a_tool_error() -> None:
    rt = workshop()
    p = proposal(rt)
    rt.approve(p.id, "Noor", p.fingerprint)
    with pytest.raises(permits.ToolError) as err:
        rt.execute(p.id, run=boom)
    assert isinstance(err.value.__cause__, ValueError)
    result = err.value.result
    assert isinstance(result, permits.Execution)
    assert result.ran and result.proposal.status == "unknown"
    assert "the tool raised ValueError: boom" in (result.proposal.reason or "")
    # Not JSON: the same.
    with pytest.raises(permits.ToolError) as err:
        call_note_with(rt, answer(object()))
    assert isinstance(err.value.result, permits.Ran)
    assert err.value.result.outcome == "unknown"
    # A tool's own outcomes.
    assert call_note_with(rt, answer(permits.Failed("the pen is empty"))).reason == "the pen is empty"
    assert call_note_with(rt, answer(permits.Unknown("timed out"))).outcome == "unknown"


def call_note_with(rt: permits.Runtime, run: Callable[..., Any]) -> Any:
    return rt.call("Estimator", "EstimateRepair", "NoteRepair", NOTE, requester="Noor", operation_key="k", why="n", run=run)


def test_an_audit_sink_that_raises_is_counted_and_undoes_nothing(tmp_path: Path) -> None:
    rt = workshop(audit=boom)
    p = proposal(rt)
    assert rt.proposal(p.id).status == "waiting"
    assert rt.audit_failures == 3  # the table's install, the task's binding and the proposal
    assert rt.last_audit_failure == "ValueError: boom"
    log = tmp_path / "audit.jsonl"
    rt = workshop(audit=log)
    proposal(rt)
    assert '"kind":"proposal"' in log.read_text()
    assert rt.audit_failures == 0


def test_unknown_ids_are_not_found() -> None:
    rt = workshop()
    for method, args in [("proposal", ("P-9",)), ("approve", ("P-9", "Noor", "x")), ("revoke_rule", ("R-9", "Noor", "why"))]:
        with pytest.raises(permits.NotFound) as err:
            getattr(rt, method)(*args)
        assert isinstance(err.value, LookupError)
    with pytest.raises(permits.NotFound) as err:
        rt.budget("Supplies")
    assert (err.value.kind, err.value.id) == ("budget", "Supplies")
