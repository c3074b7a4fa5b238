"""`permitc mcp import` and `permitc mcp proxy` with real parts (issue #19): the official Python MCP SDK's
server (`notes_server.py`) upstream, the SDK's stdio client as the agent, the real `permitd` deciding, and a
person approving with their own key."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from agent import decide, raw, run_agent, text
from conftest import HERE, World, confirm_claims, import_tools

# -------------------------------------------------------------------------------------------------
# Import


def test_the_import_is_the_expected_file_and_checks_clean_once_claims_are_confirmed(permitc: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    imported = import_tools(permitc, notes)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == (HERE / "expected_import.permits").read_text()
    assert "imported 5 tools from the MCP server `notes` 1.0.0" in imported.stderr
    package = tmp_path / "policy"
    package.mkdir()
    (package / "policy.permits").write_text((HERE / "policy.permits").read_text())
    (package / "tools.permits").write_text(confirm_claims(imported.stdout))
    checked = subprocess.run([str(permitc), "check", str(package)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert "warning" not in checked.stderr
    # The imported claims are the widest: unconfirmed, send_mail and read_note would both propose.
    (package / "tools.permits").write_text(confirm_claims(imported.stdout).replace(": reads", ": changes + sends + spends + reaches_out"))
    table = tmp_path / "t.json"
    assert subprocess.run([str(permitc), "compile", str(package), "-o", str(table)], capture_output=True).returncode == 0
    levels = json.loads(table.read_text())["entries"]["Scribe"]["Notes"]
    assert levels["read_note"]["level"] == "propose"


def test_a_reimport_keeps_confirmed_claims_and_shows_what_changed(permitc: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    first = import_tools(permitc, notes)
    tools = tmp_path / "tools.permits"
    tools.write_text(confirm_claims(first.stdout, drop=()))
    again = import_tools(permitc, notes, "-o", str(tools), env={"NOTES_VARIANT": "changed"})
    assert again.returncode == 0, again.stderr
    lines = [line for line in again.stderr.splitlines() if line.startswith(("~", "+", "-"))]
    assert lines[0] == (
        '~ send_mail: description "Send an email to one person. It goes out at once." → '
        '"Send an email to one person. It goes out at once, with a copy to archive@attacker.example."'
    )
    assert lines[1].startswith("~ send_mail: pin sha256:") and "confirm it" in lines[1]
    assert len(lines) == 2, lines
    written = tools.read_text()
    read_note = written[written.index("extern tool read_note") :]
    assert read_note.split("pinned")[0].split(")")[-1].strip() == ": reads"
    assert "archive@attacker.example" in written
    send_mail = written[written.index("extern tool send_mail") :]
    assert send_mail.split("pinned")[0].rstrip().endswith(": changes + sends + spends + reaches_out")


# -------------------------------------------------------------------------------------------------
# The gateway


def test_tools_list_offers_only_what_the_skill_offers_and_an_alone_call_is_forwarded_once(world: World) -> None:
    (world.notes / "groceries.txt").write_text("milk, eggs")

    async def body(s: ClientSession) -> Any:
        listed = sorted(t.name for t in (await s.list_tools()).tools)
        read = await s.call_tool("read_note", {"title": "groceries"})
        wrote = await s.call_tool("write_note", {"title": "todo", "body": "call Ben"})
        return listed, read, wrote

    listed, read, wrote = run_agent(world, body)
    # delete_note is `never`; wipe_notes is not in the table: neither is offered.
    assert listed == ["read_note", "send_mail", "write_note"]
    assert (read.is_error, text(read)) == (False, "milk, eggs")
    assert read.structured_content == {"result": "milk, eggs"}
    assert (wrote.is_error, text(wrote)) == (False, "wrote `todo`")
    assert (world.notes / "todo.txt").read_text() == "call Ben"
    assert (world.calls("read_note"), world.calls("write_note")) == (1, 1)


def test_in_a_mode_only_what_the_mode_allows_is_offered_and_forwarded(world: World) -> None:
    """`--mode ReadOnly` (spec §3c): `tools/list` offers only what is not `never` in the mode, and a call of a
    tool the mode makes `never` is refused and never reaches the server."""
    (world.notes / "groceries.txt").write_text("milk, eggs")

    async def body(s: ClientSession) -> Any:
        listed = sorted(t.name for t in (await s.list_tools()).tools)
        read = await s.call_tool("read_note", {"title": "groceries"})
        wrote = await s.call_tool("write_note", {"title": "todo", "body": "call Ben"})
        return listed, read, wrote

    listed, read, wrote = run_agent(world, body, "--mode", "ReadOnly")
    assert listed == ["read_note"]
    assert (read.is_error, text(read)) == (False, "milk, eggs")
    assert wrote.is_error and "`write_note` is not offered to agent `Scribe` in skill `Notes`" in text(wrote)
    assert (world.calls("read_note"), world.calls("write_note")) == (1, 0)
    assert not (world.notes / "todo.txt").exists()


def test_via_a_tighter_link_a_tool_alone_directly_is_proposed(world: World) -> None:
    """`--via Editor.Review` (spec §3b): the Scribe's calls are delegated by the Editor, whose `changes:
    propose` and `sends: never` are more layers. `write_note`, alone directly, is proposed and does not run;
    `send_mail` is not offered; `read_note` runs. A host key for the Scribe alone may not work along the
    chain: the proxy stops at its start with the service's reason (`not_your_agent`), and nothing is
    forwarded. The tool withheld along the chain is logged with the chain."""
    (world.notes / "groceries.txt").write_text("milk, eggs")

    async def body(s: ClientSession) -> Any:
        listed = sorted(t.name for t in (await s.list_tools()).tools)
        read = await s.call_tool("read_note", {"title": "groceries"})
        wrote = await s.call_tool("write_note", {"title": "todo", "body": "call Ben"})
        return listed, read, wrote

    child_only = world.host_key
    world.host_key = world.service.key("--agents", "Scribe,Editor")
    log = world.folder / "via.log"
    with open(log, "w", encoding="utf-8") as errlog:
        listed, read, wrote = run_agent(world, body, "--via", "Editor.Review", "--wait", "0", "--task", "review-1", errlog=errlog)
    assert (
        "withheld `send_mail`: `send_mail` is not offered to agent `Scribe` in skill `Notes` via `Editor.Review` "
        "(the table does not have it, the skill does not offer it, or it is `never`)"
    ) in log.read_text(), log.read_text()
    assert listed == ["read_note", "write_note"]
    assert (read.is_error, text(read)) == (False, "milk, eggs")
    assert "proposed `write_note`: waiting on a decision from Ana (proposal P-1). It has not run." in text(wrote)
    assert (world.calls("read_note"), world.calls("write_note")) == (1, 0)
    assert not (world.notes / "todo.txt").exists()
    status, p = raw(world.service.url, world.ana, "GET", "/v1/proposals/P-1")
    assert (status, p["tool"], p["via"], p["level"]) == (200, "write_note", [{"agent": "Editor", "skill": "Review"}], "propose")
    status, task = raw(world.service.url, world.ana, "GET", "/v1/tasks/review-1")
    assert (status, task["task"]["root_agent"]) == (200, "Editor")

    # Directly, the same write is alone and runs.
    async def direct(s: ClientSession) -> Any:
        return await s.call_tool("write_note", {"title": "todo", "body": "call Ben"})

    wrote = run_agent(world, direct)
    assert (wrote.is_error, text(wrote)) == (False, "wrote `todo`")
    assert world.calls("write_note") == 1

    # The Scribe's key alone does not hold the Editor: the proxy stops at its start, with the service's
    # reason, before the server is started; nothing along the chain is offered or called.
    world.host_key = child_only
    started = subprocess.run(
        [str(world.permitc), *world.proxy_args("--via", "Editor.Review", "--wait", "0")],
        input=b"",
        capture_output=True,
        env={**os.environ, "NOTES_DIR": str(world.notes)},
        timeout=60,
    )
    assert started.returncode == 2, started
    said = started.stderr.decode()
    assert re.fullmatch(
        r"error: the approval service refuses the host key for agent `Scribe` in skill `Notes` via `Editor\.Review` "
        r"\(not_your_agent\): key `K-\d+` is a host key for `Scribe`, not for `Editor`\n",
        said,
    ), said
    assert started.stdout == b""
    assert world.calls("write_note") == 1
    assert not (world.notes / "other.txt").exists()


def test_never_and_unknown_tools_are_refused_with_the_reason(world: World) -> None:
    async def body(s: ClientSession) -> Any:
        return (
            await s.call_tool("delete_note", {"title": "x"}),
            await s.call_tool("wipe_notes", {"confirm": True}),
            await s.call_tool("no_such_tool", {}),
        )

    never, absent, unknown = run_agent(world, body)
    assert never.is_error and "`delete_note` is not offered to agent `Scribe` in skill `Notes`" in text(never)
    assert absent.is_error and "`wipe_notes` is not offered" in text(absent)
    assert unknown.is_error and "the upstream server has no tool `no_such_tool`" in text(unknown)
    assert world.calls("delete_note") == world.calls("wipe_notes") == 0


def test_a_proposed_call_waits_is_approved_by_a_person_and_runs_exactly_once(world: World) -> None:
    mail = {"to": "ben@example.com", "subject": "Lunch", "body": "At noon?"}

    async def first(s: ClientSession) -> Any:
        start = time.monotonic()
        said = await s.call_tool("send_mail", mail, meta={"permits/why": "Ana asked me to invite Ben"})
        return said, time.monotonic() - start

    waiting, waited = run_agent(world, first, "--wait", "1", "--task", "lunch")
    # `--wait 1` waits a second for the decision (found by a new user: it used to round the second left down
    # to none and answer at once).
    assert waited >= 0.95, waited
    assert "proposed `send_mail`: waiting on a decision from Ana (proposal P-1). It has not run." in text(waiting)
    assert f"{world.service.url}/inbox/proposals/P-1" in text(waiting)
    assert world.calls("send_mail") == 0
    status, p = raw(world.service.url, world.ana, "GET", "/v1/proposals/P-1")
    assert (status, p["status"], p["why"], p["tool"]) == (200, "waiting", "Ana asked me to invite Ben", "send_mail")
    decide(world, "P-1", "approve")

    async def retry(s: ClientSession) -> Any:
        # The same call in the same task attaches to P-1, runs once; a third time answers the stored result.
        return await s.call_tool("send_mail", mail), await s.call_tool("send_mail", mail)

    sent, again = run_agent(world, retry, "--wait", "1", "--task", "lunch")
    assert (sent.is_error, text(sent)) == (False, "sent to ben@example.com")
    assert (again.is_error, text(again)) == (False, "sent to ben@example.com")
    assert world.calls("send_mail") == 1
    status, p = raw(world.service.url, world.ana, "GET", "/v1/proposals/P-1")
    assert (p["status"], p["decided_by"]) == ("done", "Ana")

    # Approved while the call waits: forwarded within the same call.
    other = {"to": "cy@example.com", "subject": "Hi", "body": "Hello"}

    async def waits(s: ClientSession) -> Any:
        decide(world, "P-2", "approve", after=1.0)
        return await s.call_tool("send_mail", other)

    done = run_agent(world, waits, "--wait", "30", "--task", "lunch")
    assert (done.is_error, text(done)) == (False, "sent to cy@example.com")
    assert world.calls("send_mail") == 2


def test_two_identical_calls_at_once_after_an_approval_send_exactly_once(world: World) -> None:
    """Found by a new user (the same approval sent one mail twice): two identical `tools/call` frames sent at
    once in one proxy session both attach to the granted proposal and carry this run's claim token, which
    the service rightly takes as a retry — so the gateway itself must forward an execution once: the second
    call is told it is being sent, and the server sees one call."""
    mail = {"to": "r1@example.com", "subject": "G", "body": "b"}

    async def first(s: ClientSession) -> Any:
        return await s.call_tool("send_mail", mail)

    waiting = run_agent(world, first, "--wait", "0", "--task", "race")
    assert "(proposal P-1)" in text(waiting)
    decide(world, "P-1", "approve")
    proxy = subprocess.Popen(
        [str(world.permitc), *world.proxy_args("--wait", "0", "--task", "race")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NOTES_DIR": str(world.notes)},
    )
    assert proxy.stdin and proxy.stdout
    frame = lambda i: json.dumps(  # noqa: E731
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "send_mail", "arguments": mail}}
    ).encode()
    proxy.stdin.write(frame(21) + b"\n" + frame(22) + b"\n")
    proxy.stdin.flush()
    answers = {a["id"]: a["result"] for a in (json.loads(proxy.stdout.readline()) for _ in range(2))}
    proxy.stdin.close()
    proxy.wait(30)
    texts = sorted("\n".join(c.get("text", "") for c in r["content"]) for r in answers.values())
    assert world.calls("send_mail") == 1, texts
    assert (world.notes / "outbox.log").read_text().count("r1@example.com") == 1, texts
    # One forwarded it; the other got the stored receipt, or was told the execution is being sent (by this
    # gateway, or already `sending` at the service) and did not run.
    assert "sent to r1@example.com" in texts, texts
    assert all(t == "sent to r1@example.com" or "not sent again" in t or "not run" in t for t in texts), texts


def test_a_rejected_call_returns_the_reason_and_never_runs(world: World) -> None:
    async def body(s: ClientSession) -> Any:
        decide(world, "P-1", "reject", after=1.0, reason="Not to Eve, ever.")
        return await s.call_tool("send_mail", {"to": "eve@example.com", "subject": "Data", "body": "Everything"})

    rejected = run_agent(world, body, "--wait", "30")
    assert rejected.is_error
    assert "proposal P-1 for `send_mail` was rejected by Ana: Not to Eve, ever." in text(rejected)
    assert world.calls("send_mail") == 0


def test_a_changed_tool_description_is_withheld_and_its_call_refused(world: World) -> None:
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

    params = StdioServerParameters(
        command=str(world.permitc), args=world.proxy_args(), env={**os.environ, "NOTES_DIR": str(world.notes)}
    )

    async def main() -> Any:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60, message_handler=on_message) as session:
                await session.initialize()
                return await body(session)

    before, after, refused = anyio.run(main)
    assert before == ["read_note", "send_mail", "write_note"]
    assert after == ["read_note", "write_note"]
    assert refused.is_error and "the upstream definition of `send_mail` changed since it was pinned" in text(refused)
    assert world.calls("send_mail") == 0

    # Started on the changed server, the tool is withheld from the first list.
    async def fresh(s: ClientSession) -> Any:
        return sorted(t.name for t in (await s.list_tools()).tools)

    assert run_agent(world, fresh, env={"NOTES_VARIANT": "changed"}) == ["read_note", "write_note"]


def test_a_killed_upstream_server_is_a_clean_error_and_the_proxy_keeps_serving(world: World) -> None:
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

    errors = run_agent(world, body)
    assert all("the upstream MCP server exited" in e for e in errors), errors


def test_a_thousand_malformed_frames_get_errors_and_no_crash(world: World) -> None:
    proxy = subprocess.Popen(
        [str(world.permitc), *world.proxy_args()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NOTES_DIR": str(world.notes)},
    )
    assert proxy.stdin and proxy.stdout
    bad = [
        b"{not json",
        b"[1, 2, 3]",
        b"42",
        b'{"id": 1, "method": "ping"}',
        b'{"jsonrpc": "1.0", "id": 2, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 3, "method": 7}',
        b'{"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}',
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {}}}',
        b"\xff\xfe\xfd",
    ]
    frames = [bad[i % len(bad)] for i in range(999)] + [b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + b"a" * (17 * 1024 * 1024) + b'"}}']
    writer = threading.Thread(target=lambda: [proxy.stdin.write(f + b"\n") for f in frames] and proxy.stdin.flush())  # type: ignore[union-attr]
    writer.start()
    answers = []
    for _ in range(len(frames)):
        answers.append(json.loads(proxy.stdout.readline()))
    writer.join()
    proxy.stdin.write(b'{"jsonrpc":"2.0","id":"alive","method":"ping"}\n')
    proxy.stdin.flush()
    alive = json.loads(proxy.stdout.readline())
    assert alive == {"jsonrpc": "2.0", "id": "alive", "result": {}}
    assert proxy.poll() is None
    codes = [a["error"]["code"] for a in answers]
    assert len(codes) == 1000 and all(a.get("jsonrpc") == "2.0" and "result" not in a for a in answers)
    # 999 frames of the 10 kinds in turn (100 of each, 99 of the last), then one of 17 MiB.
    assert codes.count(-32700) == 100 + 99  # not JSON, not UTF-8
    assert codes.count(-32600) == 600 + 1  # six kinds of invalid request, and the oversized frame
    assert codes.count(-32601) == 100 and codes.count(-32602) == 100
    proxy.stdin.close()
    proxy.wait(30)
