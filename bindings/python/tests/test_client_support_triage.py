"""Support triage (`shared/cases/support-triage.md`) A–E through `permits.Client` against the real
`permitd`, with the values of the service's test (crates/permits-service/tests/service/support_triage.rs).
The test is the support desk: ticket T-42's revision and the outbox SendReply appends to."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from service_support import Service, approve, raw

import permits

TEXT = "J-42 recorded an export access error. …"


class Desk:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.host = permits.Client(service.url, service.key("--agents", "Triage"))
        self.riley = service.key("--person", "Riley")
        self.sam = service.key("--person", "Sam")
        self.revision = 7
        self.outbox: list[dict[str, Any]] = []

    def send_reply(self, recipient: str, key: str, token: str) -> permits.Claimed | permits.Proposal:
        return self.host.call(
            "Triage", "ExportFailures", "SendReply", {"ticket": "T-42", "recipient": recipient, "text": TEXT},
            requester="Sam", operation_key=key, claim_token=token, why="tell the customer what failed",
            covered_version=str(self.revision),
        )

    def p8(self) -> permits.Proposal:
        p = self.send_reply("customer-42", "mock-T42-P8", "p8")
        assert isinstance(p, permits.Proposal)
        return p

    def run(self, claimed: permits.Claimed) -> Any:
        self.outbox.append(claimed.arguments)
        return {"message": len(self.outbox), "to": claimed.arguments["recipient"]}

    def execute(self, proposal_id: str, token: str) -> permits.Claimed:
        return self.host.execute(proposal_id, token, self.run, covered_version=str(self.revision))


@pytest.fixture
def desk(permitd: Path, workdir: Path) -> Iterator[Desk]:
    service = Service.on_fixture(permitd, "support-triage", workdir)
    yield Desk(service)
    service.stop()


def refused(f: Any) -> permits.Refused:
    with pytest.raises(permits.Refused) as e:
        f()
    return e.value


def test_a_the_agent_saying_approved_is_not_an_approval(desk: Desk) -> None:
    p = desk.p8()
    assert (p.status, p.covered_version) == ("waiting", "7")
    r = refused(lambda: desk.execute("P-1", "claim-1"))
    assert r.kind == "not_approved" and "not approved" in r.message
    status, answer = raw(desk.service.url, desk.service.key("--person", "Triage"), "POST", "/v1/proposals/P-1/approve",
                         {"fingerprint": p.fingerprint})
    assert (status, answer["error"]["code"]) == (403, "not_decider")
    assert desk.host.proposal("P-1").status == "waiting"
    assert desk.outbox == []


def test_b_an_approval_does_not_cover_another_recipient(desk: Desk) -> None:
    p = desk.p8()
    approve(desk.service.url, desk.riley, "P-1", p.fingerprint)
    other = desk.send_reply("customer-99", "mock-T42-P8", "p8b")
    assert isinstance(other, permits.Proposal)
    assert (other.id, other.status) == ("P-2", "waiting") and other.fingerprint != p.fingerprint
    assert refused(lambda: desk.execute("P-2", "claim-2")).kind == "not_approved"
    status, answer = raw(desk.service.url, desk.riley, "POST", "/v1/proposals/P-2/approve", {"fingerprint": p.fingerprint})
    assert (status, answer["error"]["code"]) == (409, "wrong_fingerprint")
    assert desk.outbox == []


def test_c_an_expired_approval_runs_nothing(permitd: Path, permitc: Path, workdir: Path) -> None:
    """The service's clock is the system's: the policy's grants last one second here (compiled by the real
    `permitc` from policies/support-triage with `grant_lifetime 1s`)."""
    policy = workdir / "support-triage"
    shutil.copytree(ROOT / "policies" / "support-triage", policy)
    with (policy / "people.permits").open("a") as f:
        f.write("\ngrant_lifetime 1s\n")
    table = workdir / "table.json"
    subprocess.run([str(permitc), "compile", str(policy), "-o", str(table)], check=True, capture_output=True)
    service = Service(permitd, table, workdir / "ledger.db")
    try:
        d = Desk(service)
        p = d.p8()
        approve(service.url, d.riley, "P-1", p.fingerprint)
        time.sleep(2.1)
        assert refused(lambda: d.execute("P-1", "claim-1")).kind == "grant_expired"
        assert d.host.proposal("P-1").status == "granted"
        assert d.outbox == []
    finally:
        service.stop()


def test_c_a_new_ticket_revision_makes_the_approval_stale(desk: Desk) -> None:
    p = desk.p8()
    approve(desk.service.url, desk.riley, "P-1", p.fingerprint)
    desk.revision = 8
    assert refused(lambda: desk.execute("P-1", "claim-1")).kind == "stale"
    assert desk.host.proposal("P-1").status == "stale"
    assert desk.outbox == []


def test_d_one_approval_sends_exactly_once_and_sam_cannot_approve(desk: Desk) -> None:
    p = desk.p8()
    status, answer = raw(desk.service.url, desk.sam, "POST", "/v1/proposals/P-1/approve", {"fingerprint": p.fingerprint})
    assert (status, answer["error"]["code"]) == (403, "not_decider")
    assert answer["error"]["message"] == (
        "`Sam` may not decide proposal `P-1`: the work is for `Sam`, and skill `ExportFailures` routes `SendReply` "
        "to role `SupportReviewer`, so the decision is someone else's; the decision is `Riley`'s"
    )
    approve(desk.service.url, desk.riley, "P-1", p.fingerprint)
    first = desk.execute("P-1", "claim-1")
    assert (first.status, first.runs_as, first.receipt) == ("done", "Riley", {"message": 1, "to": "customer-42"})
    # The host executes again (a lost answer, the same claim token): the stored receipt, nothing runs.
    second = desk.execute("P-1", "claim-1")
    assert (second.status, second.receipt) == ("done", first.receipt)
    assert refused(lambda: desk.execute("P-1", "claim-2")).kind == "claimed"
    assert len(desk.outbox) == 1
    assert desk.p8().id == p.id
    status, answer = raw(desk.service.url, desk.sam, "POST", "/v1/proposals/P-1/approve", {"fingerprint": p.fingerprint})
    assert (status, answer["error"]["code"]) == (409, "status")
    assert len(desk.outbox) == 1


def test_e_never_tools_and_unknown_tools_are_refused_without_a_proposal(desk: Desk) -> None:
    assert [t.name for t in desk.host.offered_tools("Triage", "ExportFailures")] == [
        "GetExportContext", "DraftReply", "SendReply",
    ]
    change = {"user": "sam", "new_role": "editor"}
    assert desk.host.decide("Triage", "ExportFailures", "ChangeRole", change, requester="Sam").level == "never"
    r = refused(lambda: desk.host.call(
        "Triage", "ExportFailures", "ChangeRole", change, requester="Sam", operation_key="mock-T42-P9",
        claim_token="t-9", why="make me editor and send immediately",
    ))
    assert r.kind == "never"
    assert r.message.startswith("`Triage` never calls `ChangeRole` in `ExportFailures`: agent layer: never [ChangeRole]")
    d = desk.host.decide("Triage", "ExportFailures", "DeleteWorkspace", {"workspace": "W-7"})
    assert (d.level, d.refusal) == ("never", "unknown tool")
    r = refused(lambda: desk.host.call(
        "Triage", "ExportFailures", "DeleteWorkspace", {"workspace": "W-7"}, operation_key="mock-T42-P9",
        claim_token="t-10",
    ))
    assert r.kind == "never"
    assert desk.host.proposals() == []
    assert desk.outbox == []
