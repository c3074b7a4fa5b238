"""What passes through the gateway besides tool calls (issue #19), with real parts: the server's own requests
of the client (sampling, elicitation) to an SDK client with callbacks and back, each logged; the agent's
cancellation, mapped to the id the proxy used upstream; a proposed call cancelled while it waits; and a tool
with a `number` parameter. Upstream: `ask_server.py` (and `notes_server.py` for the proposal), on stdio and
over streamable HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, ElicitResult, TextContent

from agent import RawProxy, decide, raw, run_agent, text, wait_for
from conftest import World


def transport(world: World, kind: str) -> dict[str, Any]:
    """`run_agent`'s arguments for the upstream on `kind`: stdio, or HTTP (started here)."""
    return {"url": world.serve_http()} if kind == "http" else {}


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_sampling_and_elicitation_pass_to_the_agent_and_back_and_are_logged(ask_world: World, kind: str) -> None:
    asked: list[tuple[str, Any]] = []

    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        asked.append(("sampling", params.messages[0].content.text))
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="Milk and eggs."), model="test-model")

    async def elicitation(context: Any, params: Any) -> ElicitResult:
        asked.append(("elicitation", params.message))
        return ElicitResult(action="accept", content={"subject": "Lunch"})

    async def body(s: ClientSession) -> Any:
        return await s.call_tool("summarize_note", {"title": "groceries"}), await s.call_tool("choose_subject", {"to": "ben"})

    log = ask_world.folder / "proxy.log"
    with open(log, "w", encoding="utf-8") as errlog:
        summary, subject = run_agent(
            ask_world, body, errlog=errlog, sampling_callback=sampling, elicitation_callback=elicitation, **transport(ask_world, kind)
        )
    assert (summary.is_error, text(summary)) == (False, "summary of groceries: Milk and eggs. (by test-model)")
    assert (subject.is_error, text(subject)) == (False, "subject for ben: Lunch")
    assert asked == [("sampling", "Summarize the note `groceries`."), ("elicitation", "What subject for the mail to ben?")]
    logged = log.read_text()
    for method in ("sampling/createMessage", "elicitation/create"):
        assert re.search(rf"the upstream server asks the agent `{method}`: passed through as \"permits-\d+\"", logged), logged
        assert re.search(rf"the agent answered the upstream server's `{method}` \(\"permits-\d+\"\) with a result", logged), logged


def test_a_request_the_agent_cannot_answer_is_refused_by_the_proxy_and_logged(ask_world: World) -> None:
    """An agent that declares no `sampling` capability is never sent `sampling/createMessage`: the proxy
    answers the server with an error, and the tool says so."""

    async def body(s: ClientSession) -> Any:
        try:
            await s.call_tool("summarize_note", {"title": "groceries"})
        except MCPError as e:
            return str(e)
        return "no error"

    log = ask_world.folder / "proxy.log"
    with open(log, "w", encoding="utf-8") as errlog:
        said = run_agent(ask_world, body, errlog=errlog)
    # The SDK's server passes the error it got on as the call's JSON-RPC error.
    assert said == "the client behind permitc mcp proxy does not support `sampling/createMessage` (no `sampling` capability)"
    assert "the agent declared no `sampling` capability: answered with an error" in log.read_text()


def execution(world: World, id: str) -> tuple[str, str, str]:
    """An execution's tool, status and reason, as the host sees it."""
    status, body = raw(world.service.url, world.host_key, "GET", f"/v1/executions/{id}")
    assert status == 200, body
    return body["tool"], body["status"], body.get("reason", "")


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_a_cancelled_call_is_cancelled_upstream_under_the_proxy_id_and_not_answered(ask_world: World, kind: str) -> None:
    url = ask_world.serve_http() if kind == "http" else None
    proxy = RawProxy(ask_world, "--task", "count-1", url=url)
    try:
        log = ask_world.notes / "calls.log"
        # The agent's id is a string the server never saw; the proxy sent the call with its own number.
        proxy.call("agent-7", "slow_count", {"seconds": 30})
        wait_for(lambda: log.exists() and "started" in log.read_text(), what="the call to start upstream")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "agent-7", "reason": "the person left"}})
        wait_for(lambda: "cancelled" in log.read_text(), what="the server to cancel the call")
        proxy.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        # The next frame is the ping's answer: the cancelled request is not answered.
        assert proxy.next() == {"jsonrpc": "2.0", "id": "after", "result": {}}
        assert log.read_text().splitlines() == ["started", "cancelled"]
        logged = proxy.stderr()
        assert re.search(r'the agent cancelled request "agent-7": cancelled upstream as request \d+', logged), logged
        # It may have acted before it stopped: its receipt says the outcome is not known.
        assert execution(ask_world, "A-1") == (
            "slow_count",
            "unknown",
            "the agent cancelled the call while the upstream server ran it: it may have acted",
        )
    finally:
        proxy.stop()
    assert proxy.frames.empty()


def test_on_the_local_lane_a_call_in_flight_holds_up_nothing_and_ends_cleanly_when_cancelled_or_its_server_dies(
    ask_world: World,
) -> None:
    """In the local mode an alone call is claimed and sent from the proxy's reader and answered from the
    upstream server's reader, with no thread of its own (issue #19's latency): a ping is answered while it
    runs; the agent's cancellation reaches the server under the proxy's id and leaves the call unanswered with
    an `unknown` receipt; a server killed under a call gives the agent an error and the same receipt; the
    proxy answers on."""
    store = ask_world.folder / "local.db"
    proxy = RawProxy(ask_world, local=store)
    log = ask_world.notes / "calls.log"
    try:
        proxy.call("slow-1", "slow_count", {"seconds": 30})
        wait_for(lambda: log.exists() and "started" in log.read_text(), what="the call to start upstream")
        proxy.send({"jsonrpc": "2.0", "id": "during", "method": "ping"})
        assert proxy.next() == {"jsonrpc": "2.0", "id": "during", "result": {}}
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}})
        wait_for(lambda: "cancelled" in log.read_text(), what="the server to cancel the call")
        proxy.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        # The next frame is the ping's answer: the cancelled call is not answered.
        assert proxy.next() == {"jsonrpc": "2.0", "id": "after", "result": {}}
        assert re.search(r'the agent cancelled request "slow-1": cancelled upstream as request \d+', proxy.stderr())
        proxy.call("slow-2", "slow_count", {"seconds": 30})
        wait_for(lambda: log.read_text().splitlines().count("started") == 2, what="the second call to start upstream")
        children = Path(f"/proc/{proxy.process.pid}/task/{proxy.process.pid}/children").read_text().split()
        server = [pid for pid in children if "ask_server" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(server) == 1, children
        os.kill(int(server[0]), signal.SIGKILL)
        answer = proxy.next()
        assert answer == {"jsonrpc": "2.0", "id": "slow-2", "error": {"code": -32603, "message": "the upstream MCP server exited"}}
        proxy.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
        assert proxy.next() == {"jsonrpc": "2.0", "id": "last", "result": {}}
    finally:
        proxy.stop()
    assert proxy.frames.empty()
    assert log.read_text().splitlines() == ["started", "cancelled", "started"]
    copy = [json.loads(line) for line in Path(f"{store}.audit.jsonl").read_text().splitlines()]
    runs = [e for e in copy if e["kind"] == "execution" and e["tool"] == "slow_count"]
    assert [e["outcome"] for e in runs] == ["claimed", "sending", "unknown"] * 2, runs
    assert [e["reason"] for e in runs if e["outcome"] == "unknown"] == [
        "the agent cancelled the call while the upstream server ran it: it may have acted",
        "no answer from the upstream server: the upstream MCP server exited",
    ], runs


def test_a_server_error_after_the_tool_acted_leaves_the_outcome_unknown_not_failed(ask_world: World) -> None:
    """A JSON-RPC error answer says the request failed, not that nothing happened: a server may answer a
    server error (`-32000`) after its tool acted. Only the errors that say the request was not taken — parse
    error, invalid request, method not found, invalid params — record the run `failed` (which releases what
    it reserved); any other records it `unknown`, so it is never taken for undone."""
    proxy = RawProxy(ask_world, "--task", "charge-1")
    try:
        proxy.call(1, "charge_then_fail", {"amount": 5})
        answer = proxy.next()
        assert answer == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "the payment provider timed out after the charge"}}
        proxy.call(2, "charge_then_fail", {"amount": 0})
        refused = proxy.next()
        assert refused == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "the amount must be at least 1"}}
    finally:
        proxy.stop()
    assert (ask_world.notes / "calls.log").read_text().splitlines() == ["charged"]
    assert execution(ask_world, "A-1") == (
        "charge_then_fail",
        "unknown",
        'the upstream server answered an error that does not say the tool did not act: {"code":-32000,"message":"the payment provider timed out after the charge"}',
    )
    # Invalid params: the server says it did not take the request.
    assert execution(ask_world, "A-2") == (
        "charge_then_fail",
        "failed",
        'the upstream server refused the request: {"code":-32602,"message":"the amount must be at least 1"}',
    )


def test_a_cancelled_call_waiting_for_a_person_stops_waiting_and_its_proposal_stays(world: World) -> None:
    """Cancelled while it waits for Ana: the proxy stops waiting and answers nothing; the proposal is not
    withdrawn, so Ana may still approve it, and the same call again attaches to it and runs once."""
    mail = {"to": "ben@example.com", "subject": "Lunch", "body": "At noon?"}
    proxy = RawProxy(world, "--wait", "60", "--task", "lunch")
    try:
        proxy.call(3, "send_mail", mail)
        wait_for(lambda: raw(world.service.url, world.ana, "GET", "/v1/proposals/P-1")[0] == 200, what="the proposal")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
        wait_for(lambda: "the agent cancelled its call of `send_mail` waiting on proposal P-1" in proxy.stderr(), what="the proxy to stop waiting")
        decide(world, "P-1", "approve")
        proxy.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
        assert proxy.next() == {"jsonrpc": "2.0", "id": 4, "result": {}}
        assert world.calls("send_mail") == 0
        assert raw(world.service.url, world.ana, "GET", "/v1/proposals/P-1")[1]["status"] == "granted"
        proxy.call(5, "send_mail", mail)
        sent = proxy.next()
        assert (sent["id"], sent["result"]["isError"], sent["result"]["content"][0]["text"]) == (5, False, "sent to ben@example.com")
        assert world.calls("send_mail") == 1
        assert "the agent cancelled request 3 before it reached the upstream server" in proxy.stderr()
    finally:
        proxy.stop()
    assert proxy.frames.empty()


def test_a_number_parameter_is_imported_typed_and_its_argument_checked(ask_world: World) -> None:
    """`tip(amount: float)` is imported as `amount: number`; a fractional amount passes the runtime's argument
    check and is forwarded, a string is refused and never reaches the server. (A condition on it, `alone [tip
    when amount < 100.5]`, does not compile yet: see ask_policy.permits.)"""
    tools = (ask_world.folder / "policy" / "tools.permits").read_text()
    assert "extern tool tip \"Send a tip\" (amount: number, to: string)" in tools

    async def body(s: ClientSession) -> Any:
        return await s.call_tool("tip", {"amount": 2.5, "to": "ben"}), await s.call_tool("tip", {"amount": "2.5", "to": "ben"})

    tipped, refused = run_agent(ask_world, body)
    assert (tipped.is_error, text(tipped)) == (False, "tipped ben 2.5")
    assert refused.is_error and "amount" in text(refused), text(refused)
    assert (ask_world.notes / "calls.log").read_text().splitlines() == ["tip 2.5"]
    assert json.loads(json.dumps(tipped.structured_content)) == {"result": "tipped ben 2.5"}
