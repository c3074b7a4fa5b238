"""The LangChain adapter end to end through LangChain's real agent runner (`create_agent`), driven by its
own fake chat model (`GenericFakeChatModel`, with a script of tool calls): alone calls run, a `never` call
is refused to the model, a proposal interrupts the graph carrying the proposal, and the resume's decision
goes through the runtime. No network: tracing is off (conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain")

from conftest import NOW, fixture
from langchain.agents import create_agent
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from test_workshop import Workshop

import permits
from permits.langchain import Approve, PermitsMiddleware, ProposalInterrupt, Reject


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model; binding tools changes nothing (the script says which tools it calls)."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> AIMessage:
    return AIMessage(content=text, tool_calls=[{"name": name, "args": args, "id": call_id}])


class Shop:
    """The workshop host of test_workshop.py, with its tools as LangChain tools."""

    def __init__(self) -> None:
        self.app = Workshop()
        self.audit: list[permits.AuditEvent] = []
        self.rt = permits.Runtime(
            fixture("workshop"),
            authority=self.app.authority,
            versions=self.app.versions,
            naming=self.app.naming,
            clock=permits.ManualClock(NOW),
            audit=self.audit.append,
        )
        repair = self.app.repair

        @tool
        def PartsFor(fault: str) -> list[str]:  # noqa: N802 - the table's tool name
            """The parts a fault needs."""
            return ["brake pads", "brake cable"]

        @tool
        def NoteRepair(repair: str, note: str) -> str:  # noqa: N802
            """Note what a repair needs."""
            self.app.repair.note = note
            return "noted"

        @tool
        def SetPrice(repair: str, price: int) -> dict[str, int]:  # noqa: N802
            """Set the repair's price."""
            self.app.repair.price = price
            return {"price": price}

        @tool
        def ScrapRepair(repair: str) -> str:  # noqa: N802
            """Scrap the repair."""
            raise AssertionError("a never tool ran")

        self.repair = repair
        self.tools: list[BaseTool] = [PartsFor, NoteRepair, SetPrice, ScrapRepair]

    def agent(self, script: list[AIMessage], requester: str = "Mia") -> Any:
        gate = PermitsMiddleware(self.rt, agent="Estimator", skill="EstimateRepair", requester=requester)
        model = ScriptedModel(messages=iter(script))
        return create_agent(model, self.tools, middleware=[gate], checkpointer=InMemorySaver())


ESTIMATE = [
    call("PartsFor", {"fault": "rear brake does not bite"}, "c1", "Looking up the parts."),
    call("NoteRepair", {"repair": "T-7", "note": "Pads and a cable."}, "c2"),
    call("SetPrice", {"repair": "T-7", "price": 45}, "c3", "Pads, a cable and an hour of work."),
    AIMessage(content="The estimate is set."),
]


def config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def interrupted(out: dict[str, Any]) -> ProposalInterrupt:
    interrupts = out["__interrupt__"]
    assert len(interrupts) == 1
    value: ProposalInterrupt = interrupts[0].value
    return value


def tool_messages(out: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def test_alone_calls_run_and_the_price_interrupts_with_the_proposal_then_runs_as_noor() -> None:
    s = Shop()
    agent = s.agent(ESTIMATE)
    out = agent.invoke({"messages": [HumanMessage("Estimate T-7 for Mia")]}, config("estimate-1"))
    # PartsFor and NoteRepair ran alone; SetPrice is held: the interrupt carries the proposal.
    assert [m.name for m in tool_messages(out)] == ["PartsFor", "NoteRepair"]
    assert s.repair.note == "Pads and a cable." and s.repair.price == 0
    shown = interrupted(out)
    p = s.rt.proposal(shown["id"])
    assert (shown["type"], shown["tool_call_id"], shown["fingerprint"]) == ("permits_proposal", "c3", p.fingerprint)
    assert shown["label"] == "Set the price"
    assert shown["shown"] == [("repair", "Ticket T-7"), ("price", "45")]
    assert shown["why"] == "Pads, a cable and an hour of work."
    assert shown["waiting_on"] == "a decision from Mia"
    assert shown["proposal"]["status"] == "waiting"
    assert shown["proposal"]["operation_key"] == "estimate-1"
    assert [e["tool"] for e in shown["proposal"]["evidence"]] == ["PartsFor", "NoteRepair"]
    assert p.status == "waiting" and p.covered_version == "r1"

    # Mia may not set prices: her approval fails as hers, the tool does not run, the model is told.
    decision: Approve = {"type": "approve", "by": "Mia", "fingerprint": shown["fingerprint"]}
    out = agent.invoke(Command(resume=decision), config("estimate-1"))
    answer = tool_messages(out)[-1]
    assert (answer.name, answer.status) == ("SetPrice", "error")
    assert "only a manager may set a price" in str(answer.content)
    assert s.rt.proposal(p.id).status == "failed"
    assert s.repair.price == 0
    assert out["messages"][-1].content == "The estimate is set."

    # The same estimate in another work item: Noor (a manager, who decides any proposal) approves it.
    s2 = Shop()
    agent = s2.agent(ESTIMATE)
    shown = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("estimate-2")))
    decision = {"type": "approve", "by": "Noor", "fingerprint": shown["fingerprint"]}
    out = agent.invoke(Command(resume=decision), config("estimate-2"))
    answer = tool_messages(out)[-1]
    assert (answer.name, answer.status, answer.content) == ("SetPrice", "success", '{"price": 45}')
    done = s2.rt.proposal(shown["id"])
    assert (done.status, done.ran_as, done.receipt) == ("done", "Noor", {"price": 45})
    assert done.grant is not None and done.grant.approver == "Noor"
    assert s2.repair.price == 45
    assert [e.kind for e in s2.audit if e.tool == "SetPrice"] == ["decision", "proposal", "decision", "proposal", "grant", "execution", "execution"]


def test_a_never_tool_is_refused_to_the_model_and_never_runs() -> None:
    s = Shop()
    agent = s.agent([call("ScrapRepair", {"repair": "T-7"}, "c1", "Scrap it."), AIMessage(content="I may not.")])
    out = agent.invoke({"messages": [HumanMessage("Scrap T-7")]}, config("scrap-1"))
    answer = tool_messages(out)[-1]
    assert answer.status == "error"
    assert str(answer.content).startswith("refused: `Estimator` never calls `ScrapRepair` in `EstimateRepair`")
    assert "__interrupt__" not in out
    assert s.rt.proposals() == []


def test_a_rejection_is_the_tools_answer() -> None:
    s = Shop()
    agent = s.agent(ESTIMATE)
    shown = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("e")))
    reject: Reject = {"type": "reject", "by": "Noor", "reason": "Quote the cable separately."}
    out = agent.invoke(Command(resume=reject), config("e"))
    answer = tool_messages(out)[-1]
    assert (answer.status, answer.content) == ("error", "rejected: Quote the cable separately.")
    assert s.rt.proposal(shown["id"]).status == "rejected"
    assert s.repair.price == 0


def test_always_approve_never_silently_becomes_a_standing_rule() -> None:
    s = Shop()
    # An "always" flag (the Agents SDK's `always_approve`, a UI's checkbox) approves this call only.
    agent = s.agent(ESTIMATE, requester="Noor")
    shown = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("n1")))
    loose = {"type": "approve", "by": "Noor", "fingerprint": shown["fingerprint"], "always": True, "always_approve": True}
    out = agent.invoke(Command(resume=loose), config("n1"))
    assert tool_messages(out)[-1].status == "success"
    assert s.rt.rules() == []
    # The next estimate proposes again: nothing became alone.
    agent = s.agent(ESTIMATE, requester="Noor")
    again = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7 again")]}, config("n2")))
    assert again["id"] != shown["id"]

    # "always like this" asked explicitly by someone the policy does not let widen autonomy: nothing at all
    # is approved (no grant, no rule), and the model is told why.
    s = Shop()
    agent = s.agent(ESTIMATE, requester="Mia")
    shown = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("m1")))
    ask: Approve = {"type": "approve", "by": "Mia", "fingerprint": shown["fingerprint"], "mode": "always_like_this"}
    out = agent.invoke(Command(resume=ask), config("m1"))
    answer = tool_messages(out)[-1]
    assert answer.status == "error" and "may not widen an agent's autonomy" in str(answer.content)
    assert s.rt.rules() == []
    assert s.rt.proposal(shown["id"]).status == "waiting"
    assert s.repair.price == 0

    # Asked explicitly by Noor, whom the policy lets: a standing rule, made by the runtime and audited.
    s = Shop()
    agent = s.agent(ESTIMATE, requester="Noor")
    shown = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("r1")))
    ask = {"type": "approve", "by": "Noor", "fingerprint": shown["fingerprint"], "mode": "always_like_this"}
    agent.invoke(Command(resume=ask), config("r1"))
    (rule,) = s.rt.rules()
    assert (rule.tool, rule.work_for, rule.by) == ("SetPrice", "Noor", "Noor")
    assert any(e.kind == "rule_created" and e.who == "Noor" for e in s.audit)
    out = s.agent(ESTIMATE, requester="Noor").invoke({"messages": [HumanMessage("Again")]}, config("r2"))
    assert "__interrupt__" not in out, "the rule made the next price alone"
    assert s.rt.rules()[0].uses == 1


def test_a_resume_that_is_not_a_decision_approves_nothing() -> None:
    s = Shop()
    agent = s.agent(ESTIMATE, requester="Noor")
    shown = interrupted(agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("x")))
    # LangChain's own HITL answer names no person and no fingerprint: it is not a permits decision.
    out = agent.invoke(Command(resume={"type": "approve"}), config("x"))
    answer = tool_messages(out)[-1]
    assert answer.status == "error" and "the resume value is not a decision" in str(answer.content)
    assert s.rt.proposal(shown["id"]).status == "waiting"
    assert s.repair.price == 0
    # The wrong fingerprint (another call's) approves nothing either.
    agent = s.agent(ESTIMATE, requester="Noor")
    out = agent.invoke({"messages": [HumanMessage("Estimate T-7")]}, config("x"))
    out = agent.invoke(Command(resume={"type": "approve", "by": "Noor", "fingerprint": "0" * 64}), config("x"))
    assert "is not the one of proposal" in str(tool_messages(out)[-1].content)
    assert s.repair.price == 0


def test_a_failing_host_callback_is_raised_to_the_developer_not_told_to_the_model() -> None:
    s = Shop()

    def down(who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool:
        raise RuntimeError("the directory is down")

    s.rt = permits.Runtime(fixture("workshop"), authority=down, versions=s.app.versions)
    agent = s.agent([call("PartsFor", {"fault": "brake"}, "c1"), AIMessage(content="done")])
    with pytest.raises(permits.Refused) as err:
        agent.invoke({"messages": [HumanMessage("Parts?")]}, config("down"))
    assert err.value.kind == "callback"
    assert "RuntimeError: the directory is down" in str(err.value)
