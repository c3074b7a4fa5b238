"""What the binding passes on from the Rust API since the service: `execute(claim_token=)` (idempotent
execution, spec §5a), `run_alone(operation_key=)` and the task it binds (`task`, `end_task`), standing rules
for nobody's work (`work_for=None`, `WorkFor::Nobody`), and `resolve`. The values of
crates/permits-runtime/tests/runtime/holes.rs (hole 3) where they exist."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import NOW, fixture

import permits

PRICE = {"repair": "T-7", "price": 45}


def workshop() -> permits.Runtime:
    return permits.Runtime(
        fixture("workshop"), authority=permits.ADMIT_ALL, clock=permits.ManualClock(NOW), versions=lambda q: "r1"
    )


def granted(rt: permits.Runtime, key: str) -> permits.Proposal:
    p = rt.propose("Estimator", "EstimateRepair", "SetPrice", PRICE, requester="Noor", operation_key=key, why="a price")
    return rt.approve(p.id, "Noor", p.fingerprint)


def test_a_retried_execute_with_the_same_claim_token_runs_nothing() -> None:
    rt = workshop()
    p = granted(rt, "k-1")
    runs: list[str] = []

    def lost(ctx: permits.RunContext) -> Any:
        runs.append("first")
        return permits.Unknown("the connection dropped")

    first = rt.execute(p.id, run=lost, claim_token="claim-1")
    assert (first.ran, first.proposal.status) == (True, "unknown")

    def twice(ctx: permits.RunContext) -> Any:
        runs.append("again")
        return "twice"

    again = rt.execute(p.id, run=twice, claim_token="claim-1")
    assert (again.ran, again.proposal.status, again.proposal.to_dict()["claim"]) == (False, "unknown", "claim-1")
    with pytest.raises(permits.Refused) as other:
        rt.execute(p.id, run=twice, claim_token="claim-2")
    assert other.value.kind == "claimed"
    # Without a token, a retry while `unknown` is refused by its status.
    with pytest.raises(permits.Refused) as untokened:
        rt.execute(p.id, run=twice)
    assert untokened.value.kind == "status"
    assert runs == ["first"]
    # Once done, the same token returns the stored receipt.
    q = granted(rt, "k-2")
    assert rt.execute(q.id, run=lambda ctx: {"price": 80}, claim_token="claim-3").proposal.receipt == {"price": 80}
    replay = rt.execute(q.id, run=lambda ctx: "not this", claim_token="claim-3")
    assert (replay.ran, replay.proposal.receipt) == (False, {"price": 80})


def test_run_alone_in_a_task() -> None:
    rt = workshop()
    assert rt.task("t-1") is None
    note = {"repair": "T-7", "note": "Pads."}
    ran = rt.run_alone("Estimator", "EstimateRepair", "NoteRepair", note, requester="Mia", operation_key="t-1",
                       run=lambda ctx: "noted")
    assert ran.outcome == "done"
    task = rt.task("t-1")
    assert task is not None
    assert (task.key, task.root_agent, task.root_skill, task.person, task.ended_at) == (
        "t-1", "Estimator", "EstimateRepair", "Mia", None,
    )
    assert task.to_dict()["bound_at"] == NOW
    # The task is Mia's: another person's call under its key is not the task's.
    with pytest.raises(permits.Refused) as other:
        rt.run_alone("Estimator", "EstimateRepair", "NoteRepair", note, requester="Noor", operation_key="t-1",
                     run=lambda ctx: "noted")
    assert other.value.kind == "never"
    assert "not this task's person" in other.value.message
    # Without a key, no task.
    rt.run_alone("Estimator", "EstimateRepair", "NoteRepair", note, requester="Noor", run=lambda ctx: "noted")
    ended = rt.end_task("t-1")
    assert ended.ended_at == NOW
    assert rt.end_task("t-1").ended_at == NOW
    with pytest.raises(permits.NotFound) as missing:
        rt.end_task("never-bound")
    assert (missing.value.kind, missing.value.id) == ("task", "never-bound")


def test_a_standing_rule_for_nobodys_work() -> None:
    rt = workshop()
    rule = rt.allow_alone("Estimator", "SetPrice", work_for=None, by="Noor", skill="EstimateRepair")
    assert rule.work_for is None
    assert rule.to_dict()["work_for"] == "nobody"
    nobody = rt.decide("Estimator", "EstimateRepair", "SetPrice", PRICE)
    assert (nobody.level, nobody.standing_rule) == ("alone", rule.id)
    for_mia = rt.decide("Estimator", "EstimateRepair", "SetPrice", PRICE, requester="Mia")
    assert (for_mia.level, for_mia.standing_rule) == ("propose", None)
    # Only a supervisor makes one.
    with pytest.raises(permits.Refused) as refused:
        rt.allow_alone("Estimator", "SetPrice", work_for=None, by="Mia", skill="EstimateRepair")
    assert refused.value.kind == "rule"
    assert "work done for nobody" in refused.value.message


def test_a_supervisor_resolves_an_unknown_outcome() -> None:
    rt = workshop()
    p = granted(rt, "k-1")
    rt.execute(p.id, run=lambda ctx: permits.Unknown("timed out"), claim_token="c")
    with pytest.raises(permits.Refused):
        rt.resolve(p.id, "Mia", {"operation": "k-1:P-1", "outcome": "accepted"})
    done = rt.resolve(p.id, "Noor", {"operation": "k-1:P-1", "outcome": "accepted"})
    assert done.status == "done"
