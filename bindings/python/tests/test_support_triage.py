"""Support triage (shared/cases/support-triage.md), outcomes A-E, from Python: the same fixture table and values
as crates/permits-runtime/tests/runtime/support_triage.rs, with a fake support desk whose SendReply appends to
an outbox."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import DAY, NOW, fixture

import permits

TEXT = "J-42 recorded an export access error. …"


@dataclass
class Desk:
    revision: int = 7
    outbox: list[dict[str, Any]] = field(default_factory=list)

    def run(self, ctx: permits.RunContext) -> Any:
        if ctx.tool == "SendReply":
            self.outbox.append(ctx.arguments)
            return {"message": len(self.outbox), "to": ctx.arguments["recipient"]}
        if ctx.tool == "GetExportContext":
            return {"job": "J-42", "status": "failed", "log": "access denied"}
        return permits.Failed(f"the desk has no `{ctx.tool}`")

    def versions(self, q: permits.VersionQuery) -> str | None:
        if q.entity == "Ticket" and q.id == "T-42" and q.field == "revision":
            return str(self.revision)
        return None


@dataclass
class World:
    rt: permits.Runtime
    desk: Desk
    clock: permits.ManualClock
    audit: list[permits.AuditEvent]


@pytest.fixture
def w() -> World:
    desk = Desk()
    clock = permits.ManualClock(NOW)
    audit: list[permits.AuditEvent] = []
    rt = permits.Runtime(
        fixture("support-triage"), authority=permits.ADMIT_ALL, clock=clock, versions=desk.versions, audit=audit.append
    )
    return World(rt, desk, clock, audit)


def reply(recipient: str) -> dict[str, Any]:
    return {"ticket": "T-42", "recipient": recipient, "text": TEXT}


def p8(w: World) -> permits.Proposal:
    """Proposal P-8: the reply to customer-42 under operation key `mock-T42-P8`."""
    return w.rt.propose(
        "Triage",
        "ExportFailures",
        "SendReply",
        reply("customer-42"),
        requester="Sam",
        operation_key="mock-T42-P8",
        why="tell the customer what failed",
    )


def test_the_levels_of_the_policy(w: World) -> None:
    assert w.rt.levels("Triage", "ExportFailures") == [
        ("GetExportContext", "alone"),
        ("DraftReply", "alone"),
        ("SendReply", "propose"),
        ("ChangeRole", "never"),
        ("RerunExport", "never"),
    ]


def test_a_the_agent_saying_approved_is_not_an_approval(w: World) -> None:
    p = p8(w)
    assert p.status == "waiting"
    assert p.covered_version == "7"
    # The agent's own output claims "approved"; the host executes on that claim.
    with pytest.raises(permits.Refused) as err:
        w.rt.execute(p.id, run=w.desk.run)
    assert err.value.kind == "not_approved"
    assert "not approved" in str(err.value)
    # Nor can the agent approve it itself.
    with pytest.raises(permits.Refused) as err:
        w.rt.approve(p.id, "Triage", p.fingerprint)
    assert err.value.kind == "not_decider"
    assert w.rt.proposal(p.id).status == "waiting"
    assert w.desk.outbox == []


def test_b_an_approval_does_not_cover_another_recipient(w: World) -> None:
    p = p8(w)
    w.rt.approve(p.id, "Riley", p.fingerprint)
    other = w.rt.propose(
        "Triage",
        "ExportFailures",
        "SendReply",
        reply("customer-99"),
        requester="Sam",
        operation_key="mock-T42-P8",
        why="tell the customer",
    )
    assert other.id != p.id
    assert other.fingerprint != p.fingerprint
    assert other.status == "waiting"
    with pytest.raises(permits.Refused) as err:
        w.rt.execute(other.id, run=w.desk.run)
    assert err.value.kind == "not_approved"
    # P-8's fingerprint approves nothing but P-8.
    with pytest.raises(permits.Refused) as err:
        w.rt.approve(other.id, "Riley", p.fingerprint)
    assert err.value.kind == "wrong_fingerprint"
    assert w.desk.outbox == []


def test_c_an_expired_approval_runs_nothing(w: World) -> None:
    p = p8(w)
    w.rt.approve(p.id, "Riley", p.fingerprint)
    w.clock.advance(DAY + 1)
    with pytest.raises(permits.Refused) as err:
        w.rt.execute(p.id, run=w.desk.run)
    assert err.value.kind == "grant_expired"
    assert w.rt.proposal(p.id).status == "granted"
    assert w.desk.outbox == []


def test_c_a_new_ticket_revision_makes_the_approval_stale(w: World) -> None:
    p = p8(w)
    w.rt.approve(p.id, "Riley", p.fingerprint)
    w.desk.revision = 8
    with pytest.raises(permits.Refused) as err:
        w.rt.execute(p.id, run=w.desk.run)
    assert err.value.kind == "stale"
    assert w.rt.proposal(p.id).status == "stale"
    assert w.desk.outbox == []


def test_d_one_approval_sends_exactly_once_and_sam_cannot_approve(w: World) -> None:
    p = p8(w)
    with pytest.raises(permits.Refused) as err:
        w.rt.approve(p.id, "Sam", p.fingerprint)
    assert err.value.kind == "not_decider"
    assert str(err.value) == (
        "`Sam` may not decide proposal `P-1`: the work is for `Sam`, and skill `ExportFailures` routes "
        "`SendReply` to role `SupportReviewer`, so the decision is someone else's; the decision is `Riley`'s"
    )
    w.rt.approve(p.id, "Riley", p.fingerprint)
    first = w.rt.execute(p.id, run=w.desk.run)
    assert first.ran
    assert first.proposal.status == "done"
    assert first.proposal.ran_as == "Riley"
    second = w.rt.execute(p.id, run=w.desk.run)
    assert not second.ran
    assert second.proposal.receipt == first.proposal.receipt == {"message": 1, "to": "customer-42"}
    assert len(w.desk.outbox) == 1
    # A retry of the proposal under the same key is the same, done, proposal.
    assert p8(w).id == p.id
    with pytest.raises(permits.Refused) as err:
        w.rt.approve(p.id, "Sam", p.fingerprint)
    assert err.value.kind == "status"
    assert len(w.desk.outbox) == 1


def test_e_never_tools_and_unknown_tools_are_refused_without_a_proposal(w: World) -> None:
    offered = [t.name for t in w.rt.offered_tools("Triage", "ExportFailures")]
    assert offered == ["GetExportContext", "DraftReply", "SendReply"]
    change = {"user": "sam", "new_role": "editor"}
    d = w.rt.decide("Triage", "ExportFailures", "ChangeRole", change, requester="Sam")
    assert d.level == "never"
    with pytest.raises(permits.Refused) as err:
        w.rt.call(
            "Triage",
            "ExportFailures",
            "ChangeRole",
            change,
            requester="Sam",
            operation_key="mock-T42-P9",
            why="make me editor and send immediately",
            run=w.desk.run,
        )
    assert err.value.kind == "never"
    assert str(err.value).startswith(
        "`Triage` never calls `ChangeRole` in `ExportFailures`: agent layer: never [ChangeRole]"
    )
    d = w.rt.decide("Triage", "ExportFailures", "DeleteWorkspace", {"workspace": "W-7"})
    assert (d.level, d.refusal) == ("never", "unknown tool")
    with pytest.raises(permits.Refused) as err:
        w.rt.propose(
            "Triage", "ExportFailures", "DeleteWorkspace", {"workspace": "W-7"}, operation_key="mock-T42-P9", why="clean up"
        )
    assert err.value.kind == "never"
    assert w.rt.proposals() == []
    assert w.desk.outbox == []


def test_every_decision_has_an_auditable_reason(w: World) -> None:
    p = p8(w)
    with pytest.raises(permits.Refused):
        w.rt.approve(p.id, "Sam", p.fingerprint)
    w.rt.approve(p.id, "Riley", p.fingerprint)
    w.rt.execute(p.id, run=w.desk.run)
    w.rt.decide("Triage", "ExportFailures", "DeleteWorkspace")
    # The store's first transaction installs the table, and the first call under the operation key binds
    # the task: events of their own.
    assert [e.kind for e in w.audit[:2]] == ["table_installed", "task"]
    events = w.audit[2:]
    kinds = [e.kind for e in events]
    assert kinds == ["proposal", "refusal", "grant", "execution", "execution", "decision"]
    for e in events[:5]:
        assert e.fingerprint == p.fingerprint
    assert events[1].who == "Sam"
    assert "role `SupportReviewer`" in (events[1].reason or "")
    assert (events[2].who, events[2].outcome) == ("Riley", "granted")
    assert events[4].outcome == "done"
    assert "unknown tool" in (events[5].reason or "")
