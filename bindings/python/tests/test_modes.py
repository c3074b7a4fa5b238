"""Modes and per-task budgets through the binding and the client (spec §3c, §6 "Per task"; issue #20), on the
research desk (crates/permits-runtime/tests/fixtures/research-desk.json), with the values of
crates/permits-cli/tests/it/modes.rs, per_task.rs and crates/permits-service/tests/service/modes.rs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, fixture
from service_support import Service, raw

import permits

EDIT = {"path": "src/lib.rs", "text": "fix"}
READ = {"path": "src/lib.rs"}


def desk() -> permits.Runtime:
    return permits.Runtime(fixture("research-desk"), authority=permits.ADMIT_ALL, clock=permits.ManualClock(NOW))


def test_a_call_names_its_mode_and_its_task_keeps_it() -> None:
    rt = desk()
    assert [t.name for t in rt.offered_tools("Coder", "FixBug", mode="Plan")] == ["ReadFile"]
    assert [t.name for t in rt.offered_tools("Coder", "FixBug")] == ["ReadFile", "EditFile", "GitPush"]
    assert rt.offered_tools("Coder", "FixBug", mode="Plam") == []
    assert rt.levels("Coder", "FixBug", mode="Plan") == [("ReadFile", "alone"), ("EditFile", "never"), ("GitPush", "never")]
    d = rt.decide("Coder", "FixBug", "EditFile", EDIT, requester="Ben", mode="Plan")
    assert (d.level, d.mode) == ("never", "Plan")
    assert rt.decide("Coder", "FixBug", "EditFile", EDIT, requester="Ben").mode is None
    ran = rt.run_alone("Coder", "FixBug", "ReadFile", READ, requester="Ben", operation_key="T-plan", mode="Plan", run=lambda ctx: "read")
    assert ran.decision.level == "alone"
    task = rt.task("T-plan")
    assert task is not None and task.mode == "Plan"
    with pytest.raises(permits.Refused) as refused:
        rt.run_alone("Coder", "FixBug", "ReadFile", READ, requester="Ben", operation_key="T-plan", run=lambda ctx: "read")
    assert refused.value.kind == "never"
    assert "not this task's mode (`T-plan` runs in mode `Plan`, not no mode)" in str(refused.value)
    # SendMail would wait for the requester, and nobody is at the keyboard: never, and nothing is proposed.
    with pytest.raises(permits.Refused) as unattended:
        rt.propose(
            "Researcher", "Look", "SendMail", {"to": "a@x.example"},
            requester="Ben", operation_key="T-mail", why="tell them", mode="Unattended",
        )
    assert unattended.value.kind == "never"
    assert "unattended: nobody to ask" in str(unattended.value)
    # A proposal in a mode carries it.
    push = rt.propose("Coder", "FixBug", "GitPush", {"branch": "fix-1"}, requester="Ben", operation_key="T-night", why="push", mode="Unattended")
    assert (push.mode, push.status) == ("Unattended", "waiting")


def test_approved_for_this_task_the_same_call_runs_alone_in_the_task_only() -> None:
    """Task-scoped approval from Python (spec §5a): `mode="for_this_task"` makes a task rule — the same call in
    the task runs alone, in another task it is proposed again, and `end_task` ends it."""
    rt = desk()
    mail = {"to": "a@x.example"}
    p = rt.propose("Researcher", "Look", "SendMail", mail, requester="Ben", operation_key="T1", why="tell a")
    rt.approve(p.id, "Ben", p.fingerprint, mode="for_this_task")
    rule = rt.rules()[-1]
    assert (rule.task, rule.mode) == ("T1", None)
    def send(key: str) -> permits.Ran:
        return rt.run_alone("Researcher", "Look", "SendMail", mail, requester="Ben", operation_key=key, run=lambda ctx: "sent")

    ran = send("T1")
    assert (ran.decision.level, ran.decision.task_rule) == ("alone", True)
    with pytest.raises(permits.Refused):
        send("T2")
    rt.end_task("T1")
    with pytest.raises(permits.Refused):
        send("T1")
    with pytest.raises(permits.InputError):
        rt.approve(p.id, "Ben", p.fingerprint, mode="for_this_tusk")  # type: ignore[arg-type]


def test_a_per_task_budget_caps_one_task() -> None:
    rt = desk()
    assert rt.budget("Research").per_task == 2000

    def buy(amount: int, key: str) -> permits.Proposal:
        return rt.propose("Researcher", "Look", "BuyCredits", {"amount": amount}, requester="Ben", operation_key=key, why="credits")

    first = buy(1500, "T3")
    rt.approve(first.id, "Ben", first.fingerprint)
    done = rt.execute(first.id, run=lambda ctx: {"operation": ctx.operation, "amount": 1500, "outcome": "accepted"})
    assert done.proposal.status == "done"
    second = buy(800, "T3")
    with pytest.raises(permits.Refused) as refused:
        rt.approve(second.id, "Ben", second.fingerprint)
    assert refused.value.kind == "budget"
    assert str(refused.value) == (
        "budget `Research`, task `T3`: per task: 1500 of 2000 cents held (1500 spent, 0 reserved); "
        "800 cents more would exceed it (500 left)"
    )
    elsewhere = buy(800, "T4")
    assert rt.approve(elsewhere.id, "Ben", elsewhere.fingerprint).status == "granted"
    budget = rt.budget("Research")
    assert (budget.spent, budget.reserved) == (1500, 800)
    # A spend that names no task cannot be held against any task's cap.
    with pytest.raises(permits.Refused) as untasked:
        rt.run_alone("Researcher", "Look", "BuyCredits", {"amount": 300}, requester="Ben", run=lambda ctx: "bought")
    assert untasked.value.kind == "budget"
    assert "needs the task's operation key, and this call names none" in str(untasked.value)


@pytest.fixture
def research_desk(permitd: Path, workdir: Path) -> Iterator[Service]:
    service = Service.on_fixture(permitd, "research-desk", workdir)
    yield service
    service.stop()


def test_the_client_passes_the_mode(research_desk: Service) -> None:
    host = permits.Client(research_desk.url, research_desk.key("--agents", "Coder,Researcher"))
    assert [t.name for t in host.offered_tools("Coder", "FixBug", mode="Plan")] == ["ReadFile"]
    assert host.levels("Coder", "FixBug", mode="Plan") == [("ReadFile", "alone"), ("EditFile", "never"), ("GitPush", "never")]
    assert len(host.offered_tools("Coder", "FixBug")) == 3
    d = host.decide("Coder", "FixBug", "EditFile", EDIT, requester="Ben", mode="Plan")
    assert (d.level, d.mode) == ("never", "Plan")
    claimed = host.call("Coder", "FixBug", "ReadFile", READ, requester="Ben", operation_key="T-plan", claim_token="tok-1", mode="Plan")
    assert isinstance(claimed, permits.Claimed)
    assert host.task("T-plan").mode == "Plan"
    with pytest.raises(permits.Refused) as refused:
        host.call("Coder", "FixBug", "ReadFile", READ, requester="Ben", operation_key="T-plan", claim_token="tok-2")
    assert refused.value.kind == "never"
    assert "not this task's mode" in str(refused.value)
    # A rule made through the service (with a person's key) is for its mode.
    ben = research_desk.key("--person", "Ben")
    status, made = raw(
        research_desk.url, ben, "POST", "/v1/rules",
        {"agent": "Researcher", "tool": "SendMail", "skill": "Look", "work_for": {"person": "Ben"}, "scope": "any_arguments", "mode": "Unattended"},
    )
    assert status == 200, made
    rule: Any = made["rule"]
    assert rule["mode"] == "Unattended"
    mail = {"to": "a@x.example"}
    assert host.decide("Researcher", "Look", "SendMail", mail, requester="Ben", mode="Unattended").standing_rule == rule["id"]
    assert host.decide("Researcher", "Look", "SendMail", mail, requester="Ben").level == "propose"
    assert [r.mode for r in host.rules()] == ["Unattended"]
    assert host.budget("Research").per_task == 2000
