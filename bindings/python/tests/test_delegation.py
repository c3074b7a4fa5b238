"""Delegation through the binding and the client (spec §3b; issue #21), on the research desk
(crates/permits-runtime/tests/fixtures/research-desk.json), with the values of
crates/permits-cli/tests/it/delegation.rs and crates/permits-service/tests/service/delegation.rs. A chain is
`via=["Agent.Skill", …]`, nearest first, root last, as `permitc decide --via` takes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import NOW, fixture
from service_support import Service, approve

import permits

FETCH = {"url": "https://a.example/x"}
MAIL = {"to": "a@x.example"}


def desk() -> permits.Runtime:
    return permits.Runtime(fixture("research-desk"), authority=permits.ADMIT_ALL, clock=permits.ManualClock(NOW))


def test_a_delegated_call_is_never_looser_than_its_links() -> None:
    rt = desk()
    assert rt.decide("Researcher", "Look", "WebFetch", FETCH, requester="Ben").level == "alone"
    d = rt.decide("Researcher", "Look", "WebFetch", FETCH, requester="Ben", via=["Coder.FixBug"])
    assert (d.level, d.via) == ("propose", ["Coder.FixBug"])
    assert "reaches_out: propose" in [r.rule for r in d.reasons]
    assert rt.decide("Researcher", "Look", "SendMail", MAIL, requester="Ben", via=["Coder.FixBug"]).level == "never"
    undeclared = rt.decide("Coder", "FixBug", "ReadFile", {"path": "a"}, via=["Researcher.Look"])
    assert (undeclared.level, undeclared.refusal) == (
        "never",
        "not a declared delegation: `Researcher.Look` does not delegate to `Coder.FixBug`",
    )
    assert [t.name for t in rt.offered_tools("Researcher", "Look", via=["Coder.FixBug"])] == ["ReadFile", "WebFetch", "BuyCredits"]
    assert rt.levels("Researcher", "Look", via=["Coder.FixBug"]) == [
        ("ReadFile", "alone"), ("WebFetch", "propose"), ("SendMail", "never"), ("BuyCredits", "propose"),
    ]
    assert rt.offered_tools("Coder", "FixBug", via=["Researcher.Look"]) == []


def test_a_delegated_proposal_carries_its_chain_and_its_rule_is_for_that_chain_only() -> None:
    """Outcome 7: "always like this" on the Researcher's SendMail via Reviewer.Review makes a rule for that
    chain: via Reviewer it runs alone, directly it is still proposed."""
    rt = desk()
    p = rt.propose("Researcher", "Look", "SendMail", MAIL, requester="Ben", operation_key="T7", why="tell them", via=["Reviewer.Review"])
    assert (p.status, p.via) == ("waiting", ["Reviewer.Review"])
    rt.approve(p.id, "Ben", p.fingerprint, mode="always_like_this")
    [rule] = rt.rules()
    assert rule.via == ["Reviewer.Review"]
    again = rt.decide("Researcher", "Look", "SendMail", MAIL, requester="Ben", via=["Reviewer.Review"])
    assert (again.level, again.standing_rule) == ("alone", rule.id)
    direct = rt.decide("Researcher", "Look", "SendMail", MAIL, requester="Ben")
    assert (direct.level, direct.standing_rule, direct.via) == ("propose", None, [])
    made = rt.allow_alone("Researcher", "WebFetch", skill="Look", work_for="Ben", by="Ben", via=["Coder.FixBug"])
    assert made.via == ["Coder.FixBug"]
    assert rt.decide("Researcher", "Look", "WebFetch", FETCH, requester="Ben", via=["Coder.FixBug"]).standing_rule == made.id
    assert rt.decide("Researcher", "Look", "WebFetch", FETCH, requester="Ben", via=["Reviewer.Review"]).level == "propose"


def test_a_delegated_call_runs_in_its_roots_task() -> None:
    rt = desk()
    ran = rt.run_alone("Researcher", "Look", "ReadFile", {"path": "a"}, requester="Ben", operation_key="T-root", via=["Coder.FixBug"], run=lambda ctx: "read")
    assert (ran.decision.level, ran.decision.via) == ("alone", ["Coder.FixBug"])
    task = rt.task("T-root")
    assert task is not None and (task.root_agent, task.root_skill) == ("Coder", "FixBug")
    result = rt.call("Researcher", "Look", "WebFetch", FETCH, requester="Ben", operation_key="T-root", why="look", via=["Coder.FixBug"], run=lambda ctx: "page")
    assert isinstance(result, permits.Proposal) and result.via == ["Coder.FixBug"]


@pytest.mark.parametrize(
    ("via", "words"),
    [
        ("Coder.FixBug", "via is a list of \"Agent.Skill\" strs"),
        (["Coder"], "not `Coder`"),
        (["Coder.Fix.Bug"], "not `Coder.Fix.Bug`"),
        ([".FixBug"], "not `.FixBug`"),
        ([3], "expected a str"),
    ],
)
def test_a_malformed_chain_is_an_input_error(via: object, words: str) -> None:
    rt = desk()
    with pytest.raises(permits.InputError) as e:
        rt.decide("Researcher", "Look", "WebFetch", FETCH, via=via)  # type: ignore[arg-type]
    assert words in str(e.value)


@pytest.fixture
def research_desk(permitd: Path, workdir: Path) -> Iterator[Service]:
    service = Service.on_fixture(permitd, "research-desk", workdir)
    yield service
    service.stop()


def test_the_client_passes_the_chain(research_desk: Service) -> None:
    """The client against the real permitd: the offer, decide and call along a chain, a host key for the child
    alone refused, Ben's approval, then claim (both agents' accounts) → confirm → receipt."""
    host = permits.Client(research_desk.url, research_desk.key("--agents", "Coder,Researcher"))
    child = permits.Client(research_desk.url, research_desk.key("--agents", "Researcher"))
    ben = research_desk.key("--person", "Ben")
    assert [t.name for t in host.offered_tools("Researcher", "Look", via=["Coder.FixBug"])] == ["ReadFile", "WebFetch", "BuyCredits"]
    assert host.levels("Researcher", "Look", via=["Coder.FixBug"])[1] == ("WebFetch", "propose")
    d = host.decide("Researcher", "Look", "WebFetch", FETCH, requester="Ben", via=["Coder.FixBug"])
    assert (d.level, d.via) == ("propose", ["Coder.FixBug"])
    with pytest.raises(permits.Refused) as refused:
        child.decide("Researcher", "Look", "WebFetch", FETCH, requester="Ben", via=["Coder.FixBug"])
    assert refused.value.kind == "not_your_agent"
    with pytest.raises(permits.InputError):
        host.decide("Researcher", "Look", "WebFetch", FETCH, via=["Coder"])
    p = host.call("Researcher", "Look", "WebFetch", FETCH, requester="Ben", operation_key="T1", claim_token="tok-1", why="look", via=["Coder.FixBug"])
    assert isinstance(p, permits.Proposal)
    assert (p.status, p.via) == ("waiting", ["Coder.FixBug"])
    approve(research_desk.url, ben, p.id, p.fingerprint)
    claimed = host.claim(p.id, "run-1")
    assert (claimed.status, claimed.accounts, claimed.runs_as) == ("granted", ["Researcher", "Coder"], "Ben")
    assert host.confirm(p.id, "run-1").status == "sending"
    done = host.receipt(p.id, "run-1", {"status": 200})
    assert done.status == "done"
    assert host.proposal(p.id).via == ["Coder.FixBug"]
