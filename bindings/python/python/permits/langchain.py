"""LangChain agent middleware that gates every tool call through the permits runtime.

```python
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from permits.langchain import PermitsMiddleware

gate = PermitsMiddleware(rt, agent="Estimator", skill="EstimateRepair", requester="Mia")
agent = create_agent(model, tools, middleware=[gate], checkpointer=InMemorySaver())
```

For each tool call of the model (the tool's name is the table's tool name), `wrap_tool_call` asks the
runtime (`Runtime.call`):

- `alone`: the tool runs now, through LangChain's own handler, inside the runtime's execution admission;
- `never` or any refusal: the tool does not run; the model gets a `ToolMessage` with status `error` saying why;
- a proposal: the graph is interrupted (`langgraph.types.interrupt`) with the proposal — its id, fingerprint,
  label, each argument as a person reads it, why, and who decides (see `ProposalInterrupt`). The host shows it
  to that person and resumes with `Command(resume=decision)`, where `decision` is an `Approve`
  (`{"type": "approve", "by": person, "fingerprint": the one they were shown}`, optionally
  `"mode": "always_like_this"`) or a `Reject` (`{"type": "reject", "by": person, "reason": why}`). The
  runtime decides whether that person may: an approval runs the tool through `Runtime.approve_and_run`
  (everything rechecked); a refused approval or a rejection is the tool's answer to the model.

An approval is for this one call unless it says `"mode": "always_like_this"`, which asks the runtime for a
standing rule; the runtime makes it only for a person the policy lets widen autonomy (else nothing at all
is approved), and audits it. Nothing else — an `always` flag, a retry, an approval of another call — ever
becomes a standing rule. A resume that is not one of the two decisions approves nothing.

On resume LangGraph runs the tool node again: the same call under the same operation key is the same
proposal (the runtime's retry), so the decision applies to exactly what was shown. The operation key is the
graph's `thread_id` unless `operation_key` says otherwise. Synchronous runs only (`invoke`, `stream`): the
async hook is not implemented, and LangChain then refuses to run the tool at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

import permits

__all__ = ["Approve", "PermitsMiddleware", "ProposalInterrupt", "Reject"]


class ProposalInterrupt(TypedDict):
    """The value of the interrupt raised for a proposal: what the decider is shown."""

    type: Literal["permits_proposal"]
    tool_call_id: str
    id: str
    fingerprint: str
    label: str
    shown: list[tuple[str, str]]
    why: str
    waiting_on: str
    deciders: list[str]
    proposal: dict[str, Any]


class Approve(TypedDict):
    """A person approves exactly what they were shown."""

    type: Literal["approve"]
    by: str
    fingerprint: str
    mode: NotRequired[Literal["once", "always_like_this"]]


class Reject(TypedDict):
    """A person says no, with the reason the agent is told."""

    type: Literal["reject"]
    by: str
    reason: str


ToolResult = ToolMessage | Command[Any]


class PermitsMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Gates a LangChain agent's tool calls through `runtime` as `agent` in `skill`, for `requester`."""

    def __init__(
        self,
        runtime: permits.Runtime,
        *,
        agent: str,
        skill: str,
        requester: str | None = None,
        operation_key: str | Callable[[ToolCallRequest], str] | None = None,
        destination: Callable[[ToolCallRequest], str | None] | None = None,
    ) -> None:
        super().__init__()
        self.runtime = runtime
        self.agent = agent
        self.skill = skill
        self.requester = requester
        self._operation_key = operation_key
        self._destination = destination

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        call = request.tool_call
        name, arguments, call_id = call["name"], dict(call["args"]), call["id"] or ""
        ran: list[ToolResult] = []

        def run(ctx: permits.RunContext) -> Any:
            result = handler(request)
            ran.append(result)
            return _receipt(result)

        try:
            handled = self.runtime.call(
                self.agent,
                self.skill,
                name,
                arguments,
                requester=self.requester,
                operation_key=self.operation_key(request),
                why=_why(request),
                evidence=_evidence(request),
                destination=self._destination(request) if self._destination else None,
                run=run,
            )
        except permits.Refused as refused:
            if refused.kind in _HOST_ERRORS:
                raise
            return _answer(call_id, name, f"refused: {refused}")
        except permits.ToolError as failed:
            raise (failed.__cause__ or failed) from None
        if isinstance(handled, permits.Ran):
            return ran[0] if ran else _answer(call_id, name, handled.reason or handled.outcome)
        return self._decide(handled, request, call_id, name, run, ran)

    def _decide(
        self,
        p: permits.Proposal,
        request: ToolCallRequest,
        call_id: str,
        name: str,
        run: Callable[[permits.RunContext], Any],
        ran: list[ToolResult],
    ) -> ToolResult:
        if p.status == "done":
            return _answer(call_id, name, json.dumps(p.receipt), status="success")
        if p.status != "waiting" and p.status != "granted":
            return _answer(call_id, name, p.answer_for_agent())
        try:
            execution: permits.Execution | None
            if p.status == "granted":  # an automatic grant within a budget's allowance: no person is asked
                execution = self.runtime.execute(p.id, destination=p.destination, run=run)
            else:
                decision = interrupt(_shown(p, call_id))
                execution = self._resume(p, decision, run)
            if execution is None:
                return _answer(call_id, name, self.runtime.proposal(p.id).answer_for_agent())
        except permits.Refused as refused:
            if refused.kind in _HOST_ERRORS:
                raise
            return _answer(call_id, name, f"not run: {refused}")
        except permits.ToolError as failed:
            raise (failed.__cause__ or failed) from None
        if ran:
            return ran[0]
        return _answer(call_id, name, execution.proposal.answer_for_agent())

    def _resume(
        self, p: permits.Proposal, decision: Any, run: Callable[[permits.RunContext], Any]
    ) -> permits.Execution | None:
        """Applies the person's decision; `None` when it was a rejection."""
        if not isinstance(decision, dict):
            raise permits.Refused("not_approved", _NOT_A_DECISION)
        kind, by = decision.get("type"), decision.get("by")
        if kind == "reject" and isinstance(by, str) and isinstance(decision.get("reason"), str):
            self.runtime.reject(p.id, by, decision["reason"])
            return None
        fingerprint = decision.get("fingerprint")
        if kind != "approve" or not isinstance(by, str) or not isinstance(fingerprint, str):
            raise permits.Refused("not_approved", _NOT_A_DECISION)
        # Only an explicit "always_like_this" asks for a standing rule; anything else is this call only.
        mode: Literal["once", "always_like_this"] = (
            "always_like_this" if decision.get("mode") == "always_like_this" else "once"
        )
        return self.runtime.approve_and_run(p.id, by, fingerprint, mode=mode, run=run)

    def operation_key(self, request: ToolCallRequest) -> str:
        """The task this call belongs to: `operation_key`, or the graph's `thread_id`."""
        if isinstance(self._operation_key, str):
            return self._operation_key
        if self._operation_key is not None:
            return self._operation_key(request)
        configurable = (request.runtime.config or {}).get("configurable") or {}
        thread = configurable.get("thread_id")
        if thread is None:
            raise ValueError("PermitsMiddleware needs an operation key: run the agent with a thread_id, or pass one")
        return str(thread)


# The host's own failures (a callback that raised, or called back into the runtime) are raised, not told to
# the model: they are bugs for the developer, and their messages are not the model's business.
_HOST_ERRORS = ("callback", "reentry")

_NOT_A_DECISION = (
    "the resume value is not a decision: approve with "
    '{"type": "approve", "by": PERSON, "fingerprint": FINGERPRINT} or reject with '
    '{"type": "reject", "by": PERSON, "reason": WHY}; nothing was approved'
)


def _shown(p: permits.Proposal, call_id: str) -> ProposalInterrupt:
    return ProposalInterrupt(
        type="permits_proposal",
        tool_call_id=call_id,
        id=p.id,
        fingerprint=p.fingerprint,
        label=p.label,
        shown=p.shown,
        why=p.why,
        waiting_on=p.decider.waiting_on(),
        deciders=p.decider.persons,
        proposal=p.to_dict(),
    )


def _answer(call_id: str, name: str, text: str, status: Literal["success", "error"] = "error") -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name=name, status=status)


def _receipt(result: ToolResult) -> Any:
    """What the runtime stores of the tool's result: the message's content (parsed when it is JSON text, as
    LangChain writes a tool's dict), or a failure."""
    if isinstance(result, ToolMessage):
        if result.status == "error":
            return permits.Failed(str(result.content))
        if isinstance(result.content, str):
            try:
                return json.loads(result.content, parse_constant=_not_json)
            except ValueError:
                return result.content
        return _json(result.content)
    return {"command": True}


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _json(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return str(value)


def _messages(request: ToolCallRequest) -> list[Any]:
    state = request.state
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    return list(messages or [])


def _why(request: ToolCallRequest) -> str:
    """The model's words around the call, for the person who decides."""
    call_id = request.tool_call["id"]
    for message in reversed(_messages(request)):
        if isinstance(message, AIMessage) and any(c.get("id") == call_id for c in message.tool_calls):
            text = message.text if isinstance(message.text, str) else ""
            if text.strip():
                return text.strip()
    return f"the model called `{request.tool_call['name']}`"


def _evidence(request: ToolCallRequest) -> list[dict[str, Any]]:
    """The tool calls that ran before in this conversation, and what they returned."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    evidence: list[dict[str, Any]] = []
    for message in _messages(request):
        if isinstance(message, AIMessage):
            for c in message.tool_calls:
                if c.get("id"):
                    calls[str(c["id"])] = (c["name"], dict(c["args"]))
        elif isinstance(message, ToolMessage) and message.status != "error" and message.tool_call_id in calls:
            tool, arguments = calls[message.tool_call_id]
            evidence.append({"tool": tool, "arguments": _json(arguments), "answer": _json(message.content)})
    return evidence
