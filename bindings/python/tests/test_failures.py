"""Kinds of failure that must be impossible (shared/cases/failure-classes.md), the runtime's share, from
Python: the values of crates/permits-runtime/tests/runtime/failures.rs, on the workshop's fixture tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from conftest import DAY, NOW, fixture

import permits


@dataclass
class Host:
    revision: int = 0
    runs: int = 0

    def run(self, ctx: permits.RunContext) -> Any:
        self.runs += 1
        return {"run": self.runs}

    def authority(self, who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool | str:
        if (who.kind, who.name, tool) == ("person", "Mia", "SetPrice"):
            return "only a manager may set a price"
        return True

    def versions(self, q: permits.VersionQuery) -> str | None:
        return f"r{self.revision + 1}" if q.id == "T-7" else None


def runtime(table: str = "workshop") -> tuple[permits.Runtime, Host, permits.ManualClock]:
    host = Host()
    clock = permits.ManualClock(NOW)
    rt = permits.Runtime(fixture(table), authority=host.authority, versions=host.versions, clock=clock)
    return rt, host, clock


def propose(rt: permits.Runtime, price: int, person: str, key: str, lifetime: int | None = None) -> permits.Proposal:
    return rt.propose(
        "Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": price},
        requester=person, operation_key=key, why="a price", lifetime=lifetime,
    )  # fmt: skip


def kind(f: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(permits.Refused) as err:
        f(*args, **kwargs)
    return err.value.kind


def test_kind_3_nothing_makes_a_never_tool_run() -> None:
    rt, host, _ = runtime()
    scrap = ("Estimator", "EstimateRepair", "ScrapRepair", {"repair": "T-7"})
    assert kind(rt.propose, *scrap, requester="Noor", operation_key="k", why="scrap it") == "never"
    assert rt.proposals() == []
    assert kind(rt.run_alone, *scrap, requester="Noor", run=host.run) == "never"
    rule = {"work_for": permits.EVERYBODY, "by": "Noor", "skill": "EstimateRepair"}
    assert kind(rt.allow_alone, "Estimator", "ScrapRepair", **rule) == "rule"
    # A decider's yes with a valid fingerprint, then the policy says never: nothing runs.
    p = propose(rt, 45, "Noor", "k")
    rt.approve(p.id, "Noor", p.fingerprint)
    rt.replace_table(fixture("workshop-never-setprice"))
    assert kind(rt.execute, p.id, run=host.run) == "stale"
    assert rt.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45}, requester="Noor").level == "never"
    assert rt.level("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45}, requester="Noor") == "never"
    assert host.runs == 0


def test_kind_5_unknown_means_never() -> None:
    t = fixture("workshop")
    args = {"repair": "T-7", "price": 45}
    for (agent, skill, tool), reason in [
        (("Estimatr", "EstimateRepair", "SetPrice"), "unknown agent"),
        (("Estimator", "EstimateRepairs", "SetPrice"), "unknown skill"),
        (("Estimator", "EstimateRepair", "EmailCustomer"), "unknown tool"),
        (("Estimator", "PriceFleetRepair", "NoteRepair"), "not one of the skill's tools"),
    ]:
        d = t.decide(agent, skill, tool, args)
        assert (d.level, d.refusal) == ("never", reason)
        assert t.level(agent, skill, tool, args) == "never"
    d = t.decide("Estimator", "EstimateRepair", "SetPrice", {**args, "discount": 5}, requester="Mia")
    assert (d.level, d.refusal) == ("never", "`SetPrice` has no parameter `discount`")
    d = t.decide("Estimator", "EstimateRepair", "SetPrice", args, requester="Eve")
    assert (d.level, d.refusal) == ("never", "unknown person `Eve`")


def test_kind_7_identical_proposals_are_decided_independently() -> None:
    rt, host, _ = runtime()
    a = propose(rt, 45, "Noor", "work-a")
    b = propose(rt, 45, "Noor", "work-b")
    assert a.id != b.id and a.fingerprint == b.fingerprint
    rt.approve(a.id, "Noor", a.fingerprint)
    assert rt.proposal(b.id).status == "waiting"
    assert kind(rt.execute, b.id, run=host.run) == "not_approved"
    assert rt.execute(a.id, run=host.run).ran
    assert not rt.execute(a.id, run=host.run).ran
    assert host.runs == 1
    rt.reject(b.id, "Noor", "one is enough")
    assert rt.proposal(a.id).status == "done"


def test_kind_8_approve_once_is_not_approve_always() -> None:
    rt, host, _ = runtime()
    p = propose(rt, 45, "Noor", "k1")
    rt.approve_and_run(p.id, "Noor", p.fingerprint, run=host.run)
    assert rt.rules() == []
    again = rt.call(
        "Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45},
        requester="Noor", operation_key="k2", why="again", run=host.run,
    )  # fmt: skip
    assert isinstance(again, permits.Proposal)
    assert host.runs == 1


def test_kind_10_a_standing_rule_follows_the_tools_content_not_its_name() -> None:
    rt, host, _ = runtime()
    rule = rt.allow_alone("Estimator", "SetPrice", work_for="Noor", by="Noor")
    assert len(rule.covered) == 2
    price = {"repair": "T-7", "price": 45}
    assert rt.decide("Estimator", "EstimateRepair", "SetPrice", price, requester="Noor").level == "alone"
    rt.replace_table(fixture("workshop-new-body"))
    d = rt.decide("Estimator", "EstimateRepair", "SetPrice", price, requester="Noor")
    assert (d.level, d.standing_rule) == ("propose", None)
    assert host.runs == 0


def test_kind_12_silence_is_not_consent_and_withdrawing_ends_a_proposal() -> None:
    rt, host, clock = runtime()
    p = propose(rt, 45, "Mia", "k")
    clock.advance(7 * DAY)
    assert rt.expire_due() == [p.id]
    assert rt.proposal(p.id).status == "expired"
    assert kind(rt.approve_and_run, p.id, "Noor", p.fingerprint, run=host.run) == "proposal_expired"
    assert kind(rt.execute, p.id, run=host.run) == "proposal_expired"
    q = propose(rt, 46, "Mia", "k2", lifetime=60)
    clock.advance(61)
    assert rt.proposal(q.id).status == "expired"
    w = propose(rt, 47, "Mia", "k3")
    assert kind(rt.withdraw, w.id, permits.Principal.person("Noor")) == "not_decider"
    assert rt.withdraw(w.id, permits.Principal.agent("Estimator")).status == "withdrawn"
    assert rt.waiting_for("Mia") == []
    assert host.runs == 0


def test_kind_13_host_failures_fail_closed() -> None:
    # The host cannot say the covered version: nothing is proposed.
    rt = permits.Runtime(fixture("workshop"), authority=permits.ADMIT_ALL)
    assert kind(propose, rt, 45, "Noor", "k") == "unknown_version"
    assert rt.proposals() == []
    # The host's authority refuses the person it runs for: failed, final.
    rt, host, _ = runtime()
    p = propose(rt, 45, "Mia", "k")
    assert kind(rt.approve_and_run, p.id, "Mia", p.fingerprint, run=host.run) == "authority"
    assert rt.proposal(p.id).status == "failed"
    assert host.runs == 0


def test_a_runtime_whose_table_is_not_the_stores_current_one_changes_nothing(tmp_path: Any) -> None:
    """The values of holes.rs `hole_7_a_runtime_whose_table_is_not_the_stores_current_one_changes_nothing`."""
    db = tmp_path / "ledger.db"
    host = Host()

    def opened(name: str) -> permits.Runtime:
        clock = permits.ManualClock(NOW)
        return permits.Runtime(fixture(name), authority=host.authority, versions=host.versions, clock=clock, store=db)

    first, second = opened("workshop"), opened("workshop")
    propose(first, 45, "Noor", "k-1")
    # Another host installs a newer table in the shared store: the second runtime is behind.
    third = opened("workshop")
    third.replace_table(fixture("workshop-never-setprice"))
    with pytest.raises(permits.TableError) as err:
        propose(second, 46, "Noor", "k-2")
    assert err.value.kind == "not_current"
    assert str(err.value).endswith("load the current table or install a newer one; nothing changes")
    assert [p.operation_key for p in third.proposals()] == ["k-1"]
    # Once it loads the current table it works, on that table; a new runtime on it installs its own.
    second.replace_table(fixture("workshop-never-setprice"))
    decided = second.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 46}, requester="Noor")
    assert decided.level == "never"
    fourth = opened("workshop")
    with pytest.raises(permits.TableError) as err:
        propose(fourth, 47, "Noor", "k-3")
    assert err.value.kind == "not_current"
    fourth.install_table()
    assert propose(fourth, 47, "Noor", "k-3").status == "waiting"
