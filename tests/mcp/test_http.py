"""The gateway in front of a server over the streamable-HTTP transport (issue #19): the official SDK's
`MCPServer` served with `streamable_http_app` on a loopback port it picks (answering with event streams, or
with `application/json` when started `--json`), `permitc mcp import --url` and `permitc mcp proxy --url`
against it, the SDK's stdio client as the agent and the real `permitd` deciding."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from agent import decide, run_agent, text
from conftest import HERE, HttpServer, SERVER, World, import_tools


@pytest.mark.parametrize("mode", ["events", "json"])
def test_an_import_over_http_is_the_file_an_import_over_stdio_writes(permitc: Path, tmp_path: Path, mode: str) -> None:
    server = HttpServer(SERVER, tmp_path, *(["--json"] if mode == "json" else []))
    try:
        imported = import_tools(permitc, tmp_path, url=server.url)
    finally:
        server.stop()
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == (HERE / "expected_import.permits").read_text()
    assert "imported 5 tools from the MCP server `notes` 1.0.0" in imported.stderr
    assert "malformed" not in imported.stderr, imported.stderr


def test_an_import_of_a_url_that_is_not_plain_http_or_not_there_fails_clearly(permitc: Path, tmp_path: Path) -> None:
    https = import_tools(permitc, tmp_path, url="https://mcp.example/mcp")
    assert (https.returncode, https.stdout) == (2, "")
    assert "https is not supported" in https.stderr
    other = import_tools(permitc, tmp_path, url="ftp://mcp.example/mcp")
    assert other.returncode == 2 and "the URL must start with http://" in other.stderr
    # A loopback port nobody listens on (bound, then closed).
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    absent = import_tools(permitc, tmp_path, url=f"http://127.0.0.1:{port}/mcp")
    assert absent.returncode == 2 and f"the upstream MCP server at http://127.0.0.1:{port}/mcp: cannot be reached" in absent.stderr


@pytest.mark.parametrize("mode", ["events", "json"])
def test_the_proxy_over_http_filters_forwards_alone_calls_and_gates_a_proposed_one(world: World, mode: str) -> None:
    url = world.serve_http(*(["--json"] if mode == "json" else []))
    (world.notes / "groceries.txt").write_text("milk, eggs")
    mail = {"to": "ben@example.com", "subject": "Lunch", "body": "At noon?"}

    async def body(s: ClientSession) -> Any:
        listed = sorted(t.name for t in (await s.list_tools()).tools)
        read = await s.call_tool("read_note", {"title": "groceries"})
        wrote = await s.call_tool("write_note", {"title": "todo", "body": "call Ben"})
        never = await s.call_tool("delete_note", {"title": "todo"})
        decide(world, "P-1", "approve", after=1.0)
        sent = await s.call_tool("send_mail", mail)
        return listed, read, wrote, never, sent

    listed, read, wrote, never, sent = run_agent(world, body, "--wait", "30", url=url)
    assert listed == ["read_note", "send_mail", "write_note"]
    assert (read.is_error, text(read), read.structured_content) == (False, "milk, eggs", {"result": "milk, eggs"})
    assert (wrote.is_error, text(wrote)) == (False, "wrote `todo`")
    assert never.is_error and "`delete_note` is not offered to agent `Scribe`" in text(never)
    assert (sent.is_error, text(sent)) == (False, "sent to ben@example.com")
    assert (world.notes / "todo.txt").read_text() == "call Ben"
    assert [world.calls(t) for t in ("read_note", "write_note", "delete_note", "send_mail")] == [1, 1, 0, 1]


def test_a_tool_changed_over_http_is_withheld_when_the_server_says_list_changed(world: World) -> None:
    """The server's `notifications/tools/list_changed` is not part of any request: it comes on the session's
    own event stream (the proxy's `GET`), and the proxy re-checks the pins and tells the agent."""
    url = world.serve_http()
    changed = threading.Event()

    async def on_message(message: Any) -> None:
        if "ToolListChanged" in type(getattr(message, "root", message)).__name__:
            changed.set()

    async def body(s: ClientSession) -> Any:
        before = sorted(t.name for t in (await s.list_tools()).tools)
        await s.call_tool("write_note", {"title": "__rug_pull__", "body": ""})
        with anyio.fail_after(20):
            while not changed.is_set():
                await anyio.sleep(0.05)
        after = sorted(t.name for t in (await s.list_tools()).tools)
        refused = await s.call_tool("send_mail", {"to": "ben@example.com", "subject": "x", "body": "y"})
        return before, after, refused

    before, after, refused = run_agent(world, body, url=url, message_handler=on_message)
    assert before == ["read_note", "send_mail", "write_note"]
    assert after == ["read_note", "write_note"]
    assert refused.is_error and "the upstream definition of `send_mail` changed since it was pinned" in text(refused)
    assert world.calls("send_mail") == 0


def test_a_killed_http_server_is_a_clean_error_and_the_proxy_keeps_serving(world: World) -> None:
    url = world.serve_http()

    async def body(s: ClientSession) -> Any:
        assert not (await s.call_tool("read_note", {"title": "x"})).is_error
        os.kill(int((world.notes / "server.pid").read_text()), signal.SIGKILL)
        time.sleep(0.5)
        errors = []
        for call in (lambda: s.call_tool("read_note", {"title": "x"}), lambda: s.list_tools()):
            try:
                await call()
                errors.append("no error")
            except MCPError as e:
                errors.append(str(e))
        await s.send_ping()
        return errors

    errors = run_agent(world, body, url=url)
    assert len(errors) == 2 and all(f"the upstream MCP server at {url}: cannot be reached" in e for e in errors), errors
    assert world.calls("read_note") == 1
