"""The bicycle workshop (shared/cases/workshop.md), outcomes 1-9, from Python: the same fixture table and the
same values as crates/permits-runtime/tests/runtime/workshop.rs, with the host written in Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import DAY, NOW, fixture

import permits

WHY = "Pads, a cable and an hour of work."


@dataclass
class Repair:
    fault: str = "rear brake does not bite"
    note: str = ""
    price: int = 0
    revision: int = 1


@dataclass
class Workshop:
    """The workshop's app: repair T-7 and who may do what in it."""

    repair: Repair = field(default_factory=Repair)

    def rewrite_fault(self, fault: str) -> None:
        self.repair.fault = fault
        self.repair.revision += 1

    def run(self, ctx: permits.RunContext) -> Any:
        if ctx.tool == "PartsFor":
            return ["brake pads", "brake cable"]
        if ctx.tool == "NoteRepair":
            self.repair.note = ctx.arguments["note"]
            return "noted"
        if ctx.tool == "SetPrice":
            self.repair.price = ctx.arguments["price"]
            return {"price": self.repair.price, "set_as": ctx.runs_as}
        return permits.Failed(f"the app has no `{ctx.tool}`")

    def authority(self, who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool | str:
        """Mechanics and managers may read and update repairs; only a manager or the Helper account (the
        estimator's) may set a price."""
        roles = {("agent", "Estimator"): "Helper", ("person", "Noor"): "Manager", ("person", "Mia"): "Mechanic"}
        role = roles.get((who.kind, who.name))
        if role is None:
            return f"`{who.name}` has no account in the workshop"
        if tool == "SetPrice" and role not in ("Manager", "Helper"):
            return "only a manager may set a price"
        return True

    def versions(self, q: permits.VersionQuery) -> str | None:
        if q.entity == "Repair" and q.id == "T-7" and q.field == "revision":
            return f"r{self.repair.revision}"
        return None

    def naming(self, tool: str, param: permits.Param, value: Any) -> str:
        if param.entity == "Repair" and isinstance(value, str):
            return f"Ticket {value}"
        return value if isinstance(value, str) else str(value)


@dataclass
class World:
    rt: permits.Runtime
    app: Workshop
    audit: list[permits.AuditEvent]


@pytest.fixture
def w() -> World:
    app = Workshop()
    audit: list[permits.AuditEvent] = []
    rt = permits.Runtime(
        fixture("workshop"),
        authority=app.authority,
        clock=permits.ManualClock(NOW),
        versions=app.versions,
        naming=app.naming,
        audit=audit.append,
    )
    return World(rt, app, audit)


def estimate(w: World, person: str, skill: str, key: str, price: int, why: str) -> permits.Ran | permits.Proposal:
    """The scripted agent: note alone (EstimateRepair only), then SetPrice."""
    evidence: list[permits.Evidence] = []
    if skill == "EstimateRepair":
        note = {"repair": "T-7", "note": "Pads and a cable."}
        ran = w.rt.call(
            "Estimator", skill, "NoteRepair", note, requester=person, operation_key=key, why="note what is needed", run=w.app.run
        )
        assert isinstance(ran, permits.Ran), "the note was not alone"
        assert ran.outcome == "done"
        evidence.append(permits.Evidence("NoteRepair", note, ran.receipt))
    return w.rt.call(
        "Estimator",
        skill,
        "SetPrice",
        {"repair": "T-7", "price": price},
        requester=person,
        operation_key=key,
        why=why,
        evidence=evidence,
        run=w.app.run,
    )


def proposed(handled: permits.Ran | permits.Proposal) -> permits.Proposal:
    assert isinstance(handled, permits.Proposal), "ran alone instead of proposing"
    return handled


def test_outcome_1_the_table(w: World) -> None:
    assert w.rt.levels("Estimator", "EstimateRepair") == [
        ("PartsFor", "alone"),
        ("NoteRepair", "alone"),
        ("SetPrice", "propose"),
        ("ScrapRepair", "never"),
    ]
    assert [t.name for t in w.rt.offered_tools("Estimator", "EstimateRepair")] == ["PartsFor", "NoteRepair", "SetPrice"]
    assert w.rt.level("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45}, requester="Mia") == "propose"


def test_outcome_2_mia_asks_for_an_estimate(w: World) -> None:
    p = proposed(estimate(w, "Mia", "EstimateRepair", "mia-1", 45, WHY))
    assert w.app.repair.note == "Pads and a cable."
    assert p.status == "waiting"
    assert w.app.repair.price == 0
    assert p.label == "Set the price"
    assert p.shown == [("repair", "Ticket T-7"), ("price", "45")]
    assert p.why == WHY
    assert len(p.evidence) == 1
    assert p.evidence[0].tool == "NoteRepair"
    assert p.evidence[0].answer == "noted"
    assert p.covered_version == "r1"
    assert p.requester == "Mia"
    assert p.decider.persons == ["Mia"]
    assert len(p.fingerprint) == 64
    d = p.to_dict()
    assert d["status"] == "waiting" and d["arguments"] == {"repair": "T-7", "price": 45}


def test_outcome_3_mia_approves_and_it_fails_as_hers(w: World) -> None:
    p = proposed(estimate(w, "Mia", "EstimateRepair", "mia-1", 45, WHY))
    with pytest.raises(permits.Refused) as err:
        w.rt.approve_and_run(p.id, "Mia", p.fingerprint, run=w.app.run)
    assert err.value.kind == "authority"
    assert str(err.value) == "`Estimator` runs `SetPrice` on behalf of `Mia`, who may not: only a manager may set a price"
    p = w.rt.proposal(p.id)
    assert p.status == "failed"
    assert p.answer_for_agent() == f"failed: {err.value}"
    assert w.app.repair.price == 0


def test_outcome_4_noor_approves_and_it_runs_as_her(w: World) -> None:
    first = proposed(estimate(w, "Mia", "EstimateRepair", "mia-1", 45, WHY))
    with pytest.raises(permits.Refused):
        w.rt.approve_and_run(first.id, "Mia", first.fingerprint, run=w.app.run)
    p = proposed(estimate(w, "Mia", "EstimateRepair", "mia-2", 45, WHY))
    assert p.id != first.id
    done = w.rt.approve_and_run(p.id, "Noor", p.fingerprint, run=w.app.run)
    assert done.proposal.status == "done"
    assert w.app.repair.price == 45
    grant = done.proposal.grant
    assert grant is not None and grant.approver == "Noor"
    assert done.proposal.tool == "SetPrice"
    assert done.proposal.ran_as == "Noor"
    assert done.proposal.receipt == {"price": 45, "set_as": "Noor"}


def test_outcome_5_a_no_gives_the_reason(w: World) -> None:
    p = proposed(estimate(w, "Mia", "EstimateRepair", "mia-1", 45, WHY))
    with pytest.raises(permits.Refused) as err:
        w.rt.reject(p.id, "Noor", "")
    assert err.value.kind == "reason_required"
    assert str(err.value) == "a rejection needs a reason: the agent is told it"
    assert w.rt.proposal(p.id).status == "waiting"
    p = w.rt.reject(p.id, "Noor", "Quote the cable separately.")
    assert p.status == "rejected"
    assert p.reason == "Quote the cable separately."
    assert p.answer_for_agent() == "rejected: Quote the cable separately."
    assert w.app.repair.price == 0


def test_outcome_6_a_yes_does_not_cover_what_changed(w: World) -> None:
    p = proposed(estimate(w, "Mia", "EstimateRepair", "mia-1", 45, WHY))
    w.app.rewrite_fault("front brake does not bite")
    assert w.app.repair.revision == 2
    with pytest.raises(permits.Refused) as err:
        w.rt.approve_and_run(p.id, "Noor", p.fingerprint, run=w.app.run)
    assert err.value.kind == "stale"
    assert "the covered version is `r2` instead of `r1`" in str(err.value)
    p = w.rt.proposal(p.id)
    assert p.status == "stale"
    assert "look again" in p.answer_for_agent()
    assert w.app.repair.price == 0


def test_outcome_7_from_now_on_alone(w: World) -> None:
    p = proposed(estimate(w, "Noor", "EstimateRepair", "noor-1", 45, WHY))
    done = w.rt.approve_and_run(p.id, "Noor", p.fingerprint, mode="always_like_this", run=w.app.run)
    assert done.proposal.status == "done"
    rules = w.rt.rules()
    assert len(rules) == 1
    rule = rules[0]
    assert (rule.agent, rule.tool) == ("Estimator", "SetPrice")
    assert rule.work_for == "Noor"

    ran = estimate(w, "Noor", "EstimateRepair", "noor-2", 50, WHY)
    assert isinstance(ran, permits.Ran), "the next estimate proposed"
    assert ran.decision.standing_rule == rule.id
    assert w.app.repair.price == 50
    assert len(w.rt.proposals()) == 1
    assert w.rt.rules()[0].uses == 1

    revoked = w.rt.revoke_rule(rule.id, "Noor", "Prices are mine again.")
    assert revoked.revoked is not None and revoked.revoked.why == "Prices are mine again."
    p = proposed(estimate(w, "Noor", "EstimateRepair", "noor-3", 55, WHY))
    assert p.status == "waiting"
    assert w.app.repair.price == 50
    assert len(w.rt.proposals()) == 2


def test_a_rule_covers_only_its_scope_and_ends_at_its_expiry() -> None:
    app = Workshop()
    clock = permits.ManualClock(NOW)
    audit: list[permits.AuditEvent] = []
    rt = permits.Runtime(
        fixture("workshop"), authority=app.authority, clock=clock, versions=app.versions, audit=audit.append
    )
    price = {"repair": "T-7", "price": 45}

    def level(arguments: dict[str, Any]) -> tuple[str, str | None]:
        d = rt.decide("Estimator", "EstimateRepair", "SetPrice", arguments, requester="Noor")
        return d.level, d.standing_rule

    assert level(price) == ("propose", None)
    rule = rt.allow_alone(
        "Estimator",
        "SetPrice",
        work_for="Noor",
        by="Noor",
        skill="EstimateRepair",
        scope="these",
        arguments={"price": 45, "repair": "T-7"},
        expires_at=NOW + DAY,
    )
    assert (rule.scope, rule.expires_at) == ('these arguments: {"price":45,"repair":"T-7"}', NOW + DAY)
    created = [e for e in audit if e.kind == "rule_created"]
    assert [e.reason for e in created] == [f'these arguments: {{"price":45,"repair":"T-7"}}; expires at {NOW + DAY}']
    assert level(price) == ("alone", rule.id)
    # Other arguments are not covered.
    assert level({"repair": "T-7", "price": 46}) == ("propose", None)
    # At its expiry it stops applying.
    clock.advance(DAY)
    assert level(price) == ("propose", None)
    # A rule already expired is refused; the default is any arguments, until revoked.
    with pytest.raises(permits.Refused) as err:
        rt.allow_alone("Estimator", "SetPrice", work_for="Noor", by="Noor", expires_at=clock.now())
    assert err.value.kind == "rule"
    wide = rt.allow_alone("Estimator", "SetPrice", work_for="Noor", by="Noor", skill="EstimateRepair")
    assert (wide.scope, wide.expires_at) == ("any arguments", None)
    assert level({"repair": "T-7", "price": 46}) == ("alone", wide.id)


@pytest.mark.parametrize(
    ("scope", "arguments", "message"),
    [
        ("these", None, 'scope="these" needs arguments=: the exact arguments the rule covers'),
        ("any", {"price": 1}, 'arguments= is for scope="these": a rule for any arguments takes none'),
        (None, {"price": 1}, 'arguments= is for scope="these": a rule for any arguments takes none'),
        ("some", None, 'scope is "these" or "any", not `some`'),
    ],
)
def test_a_rule_scope_is_these_arguments_or_any(
    w: World, scope: Any, arguments: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(permits.InputError) as err:
        w.rt.allow_alone("Estimator", "SetPrice", work_for="Noor", by="Noor", scope=scope, arguments=arguments)
    assert str(err.value) == message
    assert w.rt.rules() == []


def test_outcome_8_what_it_never_does_takes_no_rule(w: World) -> None:
    with pytest.raises(permits.Refused) as err:
        w.rt.allow_alone("Estimator", "ScrapRepair", work_for=permits.EVERYBODY, by="Noor")
    assert err.value.kind == "rule"
    assert str(err.value).startswith("`Estimator` never calls `ScrapRepair` in `EstimateRepair`")
    assert "never [ScrapRepair]" in str(err.value)
    assert w.rt.rules() == []


def test_outcome_9_a_routed_decision_is_not_the_requesters(w: World) -> None:
    p = proposed(estimate(w, "Mia", "PriceFleetRepair", "fleet-1", 38, "A fleet rate: pads, a cable and an hour."))
    assert p.decider.persons == ["Noor"]
    assert p.decider.waiting_on() == "a decision from Noor"
    assert p.answer_for_agent() == "proposed `SetPrice`: waiting on a decision from Noor"
    with pytest.raises(permits.Refused) as err:
        w.rt.approve_and_run(p.id, "Mia", p.fingerprint, run=w.app.run)
    assert err.value.kind == "not_decider"
    assert str(err.value) == (
        "`Mia` may not decide proposal `P-1`: the decision is `Noor`'s because skill `PriceFleetRepair` routes "
        "`SetPrice` to person `Noor`; the work is for `Mia`, but the decision is not theirs"
    )
    assert w.app.repair.price == 0
    done = w.rt.approve_and_run(p.id, "Noor", p.fingerprint, run=w.app.run)
    assert done.proposal.status == "done"
    assert w.app.repair.price == 38


def test_every_step_is_in_the_audit(w: World) -> None:
    p = proposed(estimate(w, "Mia", "EstimateRepair", "mia-1", 45, WHY))
    with pytest.raises(permits.Refused):
        w.rt.approve_and_run(p.id, "Mia", p.fingerprint, run=w.app.run)
    failed = next(e for e in w.audit if e.outcome == "refused" and e.proposal == p.id)
    assert failed.who == "Mia"
    assert failed.fingerprint == p.fingerprint
    assert (failed.agent, failed.skill, failed.tool) == ("Estimator", "EstimateRepair", "SetPrice")
    assert "only a manager may set a price" in (failed.reason or "")
    assert failed.kind == "refusal"
    assert failed.to_dict()["kind"] == "refusal"
    assert w.rt.audit_failures == 0
