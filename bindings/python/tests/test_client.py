"""`permits.Client` against the real `permitd` on loopback (port 0): the workshop's steps and support triage
A–E over HTTP, with the values of the service's own tests (crates/permits-service/tests/service/), the
execution protocol's retries, the long poll, the errors, and what a host key can never do.

The test is the host: it keeps the workshop's repair T-7 (or the desk's ticket), states its covered version,
checks its own permissions when it claims, and runs the tools itself. A person's approval goes through the
service with that person's key, straight over HTTP (the client has no person's operations).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_support import Service, approve, raw

import permits
from permits.client import Admission

WHY = "Pads, a cable and an hour of work."


@pytest.fixture
def workshop(permitd: Path, workdir: Path) -> Iterator[Service]:
    service = Service.on_fixture(permitd, "workshop", workdir)
    yield service
    service.stop()


class Workshop:
    """The workshop's app: repair T-7, and who may do what in it."""

    def __init__(self) -> None:
        self.note = ""
        self.price = 0
        self.revision = 1

    def version(self) -> str:
        return f"r{self.revision}"

    def admits(self, claimed: permits.Claimed) -> Admission:
        roles = {"Estimator": "Helper"}
        people = {"Noor": "Manager", "Mia": "Mechanic"}
        if claimed.accounts[0] not in roles:
            return ("agent", f"`{claimed.accounts[0]}` has no account in the workshop")
        if claimed.runs_as not in people:
            return ("person", f"`{claimed.runs_as}` has no account in the workshop")
        if claimed.tool == "SetPrice" and people[claimed.runs_as] != "Manager":
            return ("person", "only a manager may set a price")
        return None

    def run(self, claimed: permits.Claimed) -> Any:
        if claimed.tool == "NoteRepair":
            self.note = claimed.arguments["note"]
            return "noted"
        if claimed.tool == "SetPrice":
            self.price = claimed.arguments["price"]
            return {"price": self.price, "set_as": claimed.runs_as}
        return ["brake pads", "brake cable"]


def estimate(
    host: permits.Client, app: Workshop, person: str, skill: str, key: str, price: int, why: str = WHY
) -> permits.Claimed | permits.Proposal:
    """The scripted agent: the note alone (EstimateRepair only), then SetPrice; the answer to SetPrice."""
    evidence: list[dict[str, Any]] = []
    if skill == "EstimateRepair":
        note = {"repair": "T-7", "note": "Pads and a cable."}
        ran = host.call(
            "Estimator", skill, "NoteRepair", note, requester=person, operation_key=key, claim_token=f"{key}-note",
            why="note what is needed",
        )
        assert isinstance(ran, permits.Claimed)
        done = host.execute(ran.id, f"{key}-note", app.run, admits=app.admits)
        assert done.status == "done"
        evidence.append({"tool": "NoteRepair", "arguments": note, "answer": done.receipt})
    answer = host.call(
        "Estimator", skill, "SetPrice", {"repair": "T-7", "price": price}, requester=person, operation_key=key,
        claim_token=f"{key}-price", why=why, evidence=evidence, covered_version=app.version(),
        shown={"repair": "Ticket T-7"},
    )
    if isinstance(answer, permits.Claimed):
        assert host.execute(answer.id, f"{key}-price", app.run, admits=app.admits).status == "done"
    return answer


def proposed(answer: permits.Claimed | permits.Proposal) -> permits.Proposal:
    assert isinstance(answer, permits.Proposal), answer
    return answer


def test_the_table_as_offered(workshop: Service) -> None:
    host = permits.Client(workshop.url, workshop.key("--agents", "Estimator"))
    assert host.levels("Estimator", "EstimateRepair") == [
        ("PartsFor", "alone"), ("NoteRepair", "alone"), ("SetPrice", "propose"), ("ScrapRepair", "never"),
    ]
    offered = host.offered_tools("Estimator", "EstimateRepair")
    assert [t.name for t in offered] == ["PartsFor", "NoteRepair", "SetPrice"]
    assert offered[2].label == "Set the price"
    assert offered[2].to_dict()["level"] == "propose"
    assert host.health()["ok"] is True
    assert host.table()["table_digest"] == host.health()["table_digest"]
    decision = host.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45}, requester="Mia")
    assert isinstance(decision, permits.Decision)
    assert (decision.level, decision.decider and decision.decider.persons) == ("propose", ["Mia"])


def test_the_workshop_steps(workshop: Service) -> None:
    """Outcomes 2–4 and 6: proposed, Mia's yes fails as hers, Noor's runs as hers, a retried claim answers the
    same, another token is refused, a changed subject is stale."""
    host = permits.Client(workshop.url, workshop.key("--agents", "Estimator"))
    mia, noor = workshop.key("--person", "Mia"), workshop.key("--person", "Noor")
    app = Workshop()

    p = proposed(estimate(host, app, "Mia", "EstimateRepair", "mia-1", 45))
    assert app.note == "Pads and a cable."
    assert (p.id, p.status, p.label, p.why, p.covered_version) == ("P-1", "waiting", "Set the price", WHY, "r1")
    assert p.shown == [("repair", "Ticket T-7"), ("price", "45")]
    assert [(e.tool, e.answer) for e in p.evidence] == [("NoteRepair", "noted")]
    assert p.decider.persons == ["Mia"] and len(p.fingerprint) == 64
    assert p.answer_for_agent() == "proposed `SetPrice`: waiting on a decision from Mia"
    assert p.to_dict()["requester"] == "Mia"
    # A retry of the call (the same operation key and claim token) is the same proposal.
    again = proposed(estimate(host, app, "Mia", "EstimateRepair", "mia-1", 45))
    assert (again.id, again.fingerprint) == (p.id, p.fingerprint)

    # Outcome 3: Mia approves; the host's permissions refuse her as the person it runs as: failed, final.
    assert approve(workshop.url, mia, "P-1", p.fingerprint)["status"] == "granted"
    failed = host.execute("P-1", "claim-1", app.run, admits=app.admits, covered_version=app.version())
    expected = "`Estimator` runs `SetPrice` on behalf of `Mia`, who may not: only a manager may set a price"
    assert (failed.status, failed.reason, app.price) == ("failed", expected, 0)
    assert host.proposal("P-1").answer_for_agent() == f"failed: {expected}"

    # Outcome 4: Noor approves the next one; it runs as her, step by step.
    p2 = proposed(estimate(host, app, "Mia", "EstimateRepair", "mia-2", 45))
    assert p2.id == "P-2"
    approve(workshop.url, noor, "P-2", p2.fingerprint)
    claimed = host.claim("P-2", "claim-2", covered_version="r1")
    assert (claimed.status, claimed.accounts, claimed.runs_as, claimed.operation) == (
        "granted", ["Estimator"], "Noor", "mia-2:P-2",
    )
    assert claimed.claim_token == "claim-2" and not claimed.confirmed
    # A lost answer: the same claim again answers the same; another token is refused.
    assert host.claim("P-2", "claim-2", covered_version="r1").to_dict() == claimed.to_dict()
    with pytest.raises(permits.Refused) as other:
        host.claim("P-2", "claim-x", covered_version="r1")
    assert other.value.kind == "claimed"
    sending = host.confirm("P-2", "claim-2")
    assert (sending.status, sending.confirmed) == ("sending", True)
    assert host.confirm("P-2", "claim-2").status == "sending"
    # A host that lost the confirmation's answer and calls execute again with its token: nothing runs again.
    rerun = host.execute("P-2", "claim-2", lambda c: pytest.fail("ran twice"), admits=app.admits, covered_version="r1")
    assert (rerun.status, rerun.confirmed) == ("sending", True)
    done = host.receipt("P-2", "claim-2", app.run(sending))
    assert (done.status, done.receipt, app.price) == ("done", {"price": 45, "set_as": "Noor"}, 45)
    # The receipt again, and the claim again with the same token: the stored receipt, nothing runs.
    assert host.receipt("P-2", "claim-2", {"price": 99}).receipt == {"price": 45, "set_as": "Noor"}
    again_claimed = host.claim("P-2", "claim-2", covered_version="r1")
    assert (again_claimed.status, again_claimed.receipt) == ("done", {"price": 45, "set_as": "Noor"})
    with pytest.raises(permits.Refused) as other:
        host.claim("P-2", "claim-3", covered_version="r1")
    assert other.value.kind == "claimed"
    assert "its grant is consumed" in other.value.message
    final = host.proposal("P-2")
    assert (final.status, final.ran_as, final.grant and final.grant.approver) == ("done", "Noor", "Noor")
    assert host.execution("P-2").claim_token is None

    # Outcome 6: the repair changes after the proposal; the yes is stale at the claim.
    p3 = proposed(estimate(host, app, "Mia", "EstimateRepair", "mia-3", 50))
    app.revision = 2
    approve(workshop.url, noor, p3.id, p3.fingerprint)
    with pytest.raises(permits.Refused) as stale:
        host.execute(p3.id, "claim-4", app.run, admits=app.admits, covered_version=app.version())
    assert stale.value.kind == "stale"
    assert "the covered version is `r2` instead of `r1`" in stale.value.message
    assert host.proposal(p3.id).status == "stale"
    assert app.price == 45
    assert [x.id for x in host.proposals()] == ["P-1", "P-2", "P-3"]
    assert [x.id for x in host.proposals(status="done")] == ["P-2"]


def test_from_now_on_alone_and_the_rules_read(workshop: Service) -> None:
    """Outcome 7: Noor's "always like this" makes a rule; the next SetPrice for her runs alone."""
    host = permits.Client(workshop.url, workshop.key("--agents", "Estimator"))
    noor = workshop.key("--person", "Noor")
    app = Workshop()
    p = proposed(estimate(host, app, "Noor", "EstimateRepair", "noor-1", 45))
    approve(workshop.url, noor, p.id, p.fingerprint, "always_like_this")
    assert host.execute(p.id, "claim-1", app.run, admits=app.admits, covered_version="r1").status == "done"
    [rule] = host.rules()
    assert (rule.agent, rule.tool, rule.work_for) == ("Estimator", "SetPrice", "Noor")
    ran = estimate(host, app, "Noor", "EstimateRepair", "noor-2", 50)
    assert isinstance(ran, permits.Claimed) and ran.id.startswith("A-")
    assert (app.price, host.rules()[0].uses) == (50, 1)
    assert host.execution(ran.id).status == "done"
    task = host.task("noor-2")
    assert (task.key, task.root_agent, task.root_skill, task.person, task.ended_at) == (
        "noor-2", "Estimator", "EstimateRepair", "Noor", None,
    )
    ended = host.end_task("noor-2")
    assert ended.ended_at is not None
    assert host.end_task("noor-2").ended_at == ended.ended_at
    assert host.budgets() == []


def test_a_routed_decision_and_a_no(workshop: Service) -> None:
    """Outcomes 5 and 9 as the host sees them; the long poll answers as soon as the person decides."""
    host = permits.Client(workshop.url, workshop.key("--agents", "Estimator"))
    mia, noor = workshop.key("--person", "Mia"), workshop.key("--person", "Noor")
    app = Workshop()
    p = proposed(estimate(host, app, "Mia", "PriceFleetRepair", "fleet-1", 38, "A fleet rate."))
    assert p.decider.persons == ["Noor"]
    status, refused = raw(workshop.url, mia, "POST", "/v1/proposals/P-1/approve", {"fingerprint": p.fingerprint})
    assert (status, refused["error"]["code"]) == (403, "not_decider")
    # Nothing changes within the wait: the proposal as it is when the wait ends.
    started = time.monotonic()
    assert host.wait("P-1", 1).status == "waiting"
    assert 0.9 <= time.monotonic() - started < 10
    timer = threading.Timer(0.5, lambda: approve(workshop.url, noor, "P-1", p.fingerprint))
    timer.start()
    started = time.monotonic()
    granted = host.wait("P-1", 30)
    timer.join()
    assert granted.status == "granted" and time.monotonic() - started < 10
    assert host.execute("P-1", "claim-1", app.run, admits=app.admits, covered_version="r1").status == "done"
    assert app.price == 38
    # A no: the agent is told why; the wait knows the status it started from.
    q = proposed(estimate(host, app, "Mia", "EstimateRepair", "mia-9", 45))
    threading.Timer(0.3, lambda: raw(workshop.url, mia, "POST", f"/v1/proposals/{q.id}/reject", {"reason": "Quote the cable separately."})).start()
    rejected = host.wait(q.id, 30, status="waiting")
    assert (rejected.status, rejected.answer_for_agent()) == ("rejected", "rejected: Quote the cable separately.")
    # Withdraw: only a waiting one.
    w = proposed(estimate(host, app, "Mia", "EstimateRepair", "mia-10", 45))
    assert host.withdraw(w.id).status == "withdrawn"
    with pytest.raises(permits.Refused) as again:
        host.withdraw(w.id)
    assert again.value.kind == "status"


def test_a_host_key_can_never_decide(workshop: Service) -> None:
    for name in ("approve", "reject", "revoke", "resolve", "allow_alone", "revoke_rule", "raise_ceiling", "approve_and_run"):
        assert not hasattr(permits.Client, name), name
    host_key = workshop.key("--agents", "Estimator")
    host = permits.Client(workshop.url, host_key)
    p = proposed(estimate(host, Workshop(), "Mia", "EstimateRepair", "mia-1", 45))
    person_only = [
        ("/v1/proposals/P-1/approve", {"fingerprint": p.fingerprint}),
        ("/v1/proposals/P-1/approve", {"fingerprint": p.fingerprint, "mode": "always_like_this"}),
        ("/v1/proposals/P-1/reject", {"reason": "no"}),
        ("/v1/proposals/P-1/revoke", {"why": "no"}),
        ("/v1/proposals/P-1/resolve", {"receipt": {"operation": "mia-1:P-1", "outcome": "accepted"}}),
        ("/v1/rules", {"agent": "Estimator", "tool": "SetPrice", "work_for": "everybody", "scope": "any_arguments"}),
    ]
    for path, body in person_only:
        status, answer = raw(workshop.url, host_key, "POST", path, body)
        assert (status, answer["error"]["code"]) == (403, "person_only"), path
    assert host.proposal("P-1").status == "waiting"
    assert host.rules() == []
    # Another agent's host key cannot act for the Estimator.
    other = permits.Client(workshop.url, workshop.key("--agents", "Somebody"))
    with pytest.raises(permits.Refused) as refused:
        other.decide("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45})
    assert refused.value.kind == "not_your_agent"
    with pytest.raises(permits.Refused) as refused:
        other.claim("P-1", "t")
    assert refused.value.kind == "not_your_agent"


def test_errors(workshop: Service, tmp_path: Path) -> None:
    host = permits.Client(workshop.url, workshop.key("--agents", "Estimator"))
    with pytest.raises(permits.NotFound) as missing:
        host.proposal("P-404")
    assert (missing.value.kind, missing.value.id) == ("proposal", "P-404")
    with pytest.raises(permits.NotFound) as missing:
        host.task("no-such-key")
    assert (missing.value.kind, missing.value.id) == ("task", "no-such-key")
    with pytest.raises(permits.NotFound) as missing:
        host.budget("Nothing")
    assert missing.value.kind == "budget"
    with pytest.raises(permits.Refused) as never:
        host.call("Estimator", "EstimateRepair", "ScrapRepair", {"repair": "T-7"}, operation_key="k", claim_token="t")
    assert never.value.kind == "never"
    assert never.value.message.startswith("`Estimator` never calls `ScrapRepair` in `EstimateRepair`")
    with pytest.raises(permits.Refused) as no_version:
        host.call(
            "Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 1}, operation_key="k2",
            claim_token="t2", why="w",
        )
    assert no_version.value.kind == "unknown_version"
    # A revoked or unknown key: unauthorized, not retried, nothing done.
    with pytest.raises(permits.ServiceError) as unauthorized:
        permits.Client(workshop.url, "permits_not-a-key").proposals()
    assert (unauthorized.value.code, unauthorized.value.status) == ("unauthorized", 401)
    assert isinstance(unauthorized.value, permits.Error)
    # Nobody listening: unreachable, not sent, after the retries.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = permits.Client(f"http://127.0.0.1:{port}", "permits_x", retries=1, backoff=0.01)
    with pytest.raises(permits.ServiceError) as down:
        dead.withdraw("P-1")
    assert (down.value.code, down.value.sent, down.value.status) == ("unreachable", False, None)


def test_a_lost_answer_is_retried_only_where_safe(workshop: Service) -> None:
    """A server that accepts and never answers: a claim (safe) is sent 1 + retries times, a settle once."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        client = permits.Client(f"http://127.0.0.1:{port}", "permits_x", timeout=0.3, retries=2, backoff=0.01)
        with pytest.raises(permits.ServiceError) as timeout:
            client.claim("P-1", "t")
        assert (timeout.value.code, timeout.value.sent) == ("timeout", True)
        accepted = []
        silent.settimeout(0.2)
        while True:
            try:
                accepted.append(silent.accept()[0])
            except (socket.timeout, TimeoutError):
                break
        assert len(accepted) == 3
        with pytest.raises(permits.ServiceError):
            client.settle("P-1", {"operation": "k:P-1", "amount": 1, "outcome": "accepted"})
        settles = []
        while True:
            try:
                settles.append(silent.accept()[0])
            except (socket.timeout, TimeoutError):
                break
        assert len(settles) == 1
        for c in accepted + settles:
            c.close()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda c: c.decide(b"Estimator", "EstimateRepair", "SetPrice"), "agent must be a str"),
        (lambda c: c.decide("Estimator", "EstimateRepair", "SetPrice", {"price": float("nan")}), 'request["arguments"]["price"] is NaN'),
        (lambda c: c.decide("Estimator", "EstimateRepair", "SetPrice", {"price": 2**64}), "out of range"),
        (lambda c: c.decide("Estimator", "EstimateRepair", "SetPrice", {"price": b"45"}), "bytes"),
        (lambda c: c.decide("Estimator", "EstimateRepair", "SetPrice", [1, 2]), "must be a dict"),
        (lambda c: c.decide("Estimator", "EstimateRepair", "SetPrice", requester=7), "requester must be a str"),
        (lambda c: c.decide("Estimator", "EstimateRepair", "SetPrice", {"x": "\ud800"}), "surrogate"),
        (lambda c: c.call("Estimator", "E", "T", operation_key=None, claim_token="t"), "operation_key"),
        (lambda c: c.call("Estimator", "E", "T", operation_key="k", claim_token="t", lifetime=-1), "lifetime"),
        (lambda c: c.call("Estimator", "E", "T", operation_key="k", claim_token="t", lifetime=True), "lifetime"),
        (lambda c: c.call("Estimator", "E", "T", operation_key="k", claim_token="t", shown={"a": 1}), "shown"),
        (lambda c: c.call("Estimator", "E", "T", operation_key="k", claim_token="t", evidence=[{"tool": 1}]), "evidence"),
        (lambda c: c.claim("P-1", b"t"), "token must be a str"),
        (lambda c: c.refuse("P-1", "t", principal="robot", reason="r"), "principal"),
        (lambda c: c.receipt("P-1", "t", {"x": float("inf")}), "is inf"),
        (lambda c: c.receipt("P-1", "t", {1: "x"}), "keys must be str"),
        (lambda c: c.settle("P-1", "accepted"), "receipt must be a dict"),
        (lambda c: c.wait("P-1", float("nan")), "timeout"),
        (lambda c: c.decide("Estimator", "E", "T", _deep(40)), "deep"),
        (lambda c: c.receipt("P-1", "t", "x" * 300_000), "bytes"),
    ],
)
def test_bad_input_is_refused_before_any_request(call: Any, words: str) -> None:
    """Nothing listens at this address: an InputError proves no request was tried (it would be a
    ServiceError)."""
    client = permits.Client("http://127.0.0.1:9", "permits_x", retries=0)
    with pytest.raises(permits.InputError) as bad:
        call(client)
    assert words in str(bad.value)


def _deep(n: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(n):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("url", "key"),
    [("ftp://x", "k"), ("127.0.0.1:7878", "k"), ("http://h", "a\nb"), ("http://h", ""), ("http://h", b"k"), (7, "k")],
)
def test_a_bad_client(url: Any, key: Any) -> None:
    with pytest.raises(permits.InputError):
        permits.Client(url, key)


def test_a_tool_that_raises_is_reported_unknown(workshop: Service) -> None:
    host = permits.Client(workshop.url, workshop.key("--agents", "Estimator"))
    noor = workshop.key("--person", "Noor")
    p = proposed(estimate(host, Workshop(), "Noor", "EstimateRepair", "noor-1", 45))
    approve(workshop.url, noor, p.id, p.fingerprint)

    def broken(claimed: permits.Claimed) -> Any:
        raise ConnectionError("the till went away")

    with pytest.raises(ConnectionError):
        host.execute(p.id, "claim-1", broken, covered_version="r1")
    after = host.execution(p.id)
    assert (after.status, after.reason) == ("unknown", "the tool raised ConnectionError: the till went away")
    # Reported: a retry with the same token runs nothing.
    assert host.execute(p.id, "claim-1", broken, covered_version="r1").status == "unknown"
