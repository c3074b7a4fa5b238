"""`permitc mcp proxy --store FILE --table TABLE` (issue #19): for one person on one machine, the proxy starts
a private `permitd serve` on the local SQLite store itself (no `--service`, no `--key`): the person decides
in the service it started, with their own key made by `permitd keys add` on the same store; when the proxy
ends, the service stops and the host key minted for the run is revoked."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from agent import RawProxy, raw, text
from conftest import HERE, World, confirm_claims, import_tools, server_command


def test_the_proxy_starts_its_own_service_on_a_local_store_and_a_person_approves_in_it(
    permitc: Path, permitd: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "groceries.txt").write_text("milk, eggs")
    imported = import_tools(permitc, notes)
    assert imported.returncode == 0, imported.stderr
    package = tmp_path / "policy"
    package.mkdir()
    (package / "policy.permits").write_text((HERE / "policy.permits").read_text())
    (package / "tools.permits").write_text(confirm_claims(imported.stdout))
    table, store = tmp_path / "notes.json", tmp_path / "ledger.db"
    assert subprocess.run([str(permitc), "compile", str(package), "-o", str(table)], capture_output=True).returncode == 0
    ana = subprocess.run(
        [str(permitd), "keys", "add", "--store", str(store), "--person", "Ana"], capture_output=True, text=True, check=True
    ).stdout.strip()
    params = StdioServerParameters(
        command=str(permitc),
        args=[
            "mcp", "proxy", "--store", str(store), "--table", str(table), "--permitd", str(permitd),
            "--agent", "Scribe", "--skill", "Notes", "--for", "Ana", "--wait", "30", "--", *server_command(),
        ],
        env={k: v for k, v in {**os.environ, "NOTES_DIR": str(notes)}.items() if k != "PERMITS_HOST_KEY"},
    )
    log = tmp_path / "proxy.log"
    seen: dict[str, Any] = {}

    async def main() -> Any:
        with open(log, "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as s:
                    await s.initialize()
                    listed = sorted(t.name for t in (await s.list_tools()).tools)
                    read_note = await s.call_tool("read_note", {"title": "groceries"})
                    said = re.search(r"the approval service on \S+ is (http://127\.0\.0\.1:\d+)", log.read_text())
                    assert said, log.read_text()
                    seen["url"] = url = said.group(1)
                    # The alone call ran on the store in the proxy's own process (`permits_mcp::lane`): the
                    # service was asked no `/v1/calls`.
                    seen["after_read"] = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()

                    def approve() -> None:
                        for _ in range(600):
                            status, p = raw(url, ana, "GET", "/v1/proposals/P-1")
                            if status == 200:
                                break
                            anyio.from_thread.run(anyio.sleep, 0.05)
                        status, answer = raw(url, ana, "POST", "/v1/proposals/P-1/approve", {"fingerprint": p["fingerprint"], "mode": "once"})
                        assert status == 200, answer

                    async with anyio.create_task_group() as group:
                        group.start_soon(anyio.to_thread.run_sync, approve)
                        sent = await s.call_tool("send_mail", {"to": "ben@example.com", "subject": "Lunch", "body": "At noon?"})
                    seen["after_send"] = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
                    return listed, read_note, sent

    listed, read_note, sent = anyio.run(main)
    assert listed == ["read_note", "send_mail", "write_note"]
    assert (read_note.is_error, text(read_note)) == (False, "milk, eggs")
    assert (sent.is_error, text(sent)) == (False, "sent to ben@example.com")
    assert (notes / "outbox.log").read_text() == "ben@example.com\tLunch\tAt noon?\n"
    # The proxy ended: its service is gone, and the host key it minted is revoked (Ana's is not).
    try:
        urllib.request.urlopen(seen["url"] + "/v1/health", timeout=2)
        raise AssertionError("the private service still answers after the proxy ended")
    except (urllib.error.URLError, ConnectionError):
        pass
    listed_keys = subprocess.run([str(permitd), "keys", "list", "--store", str(store)], capture_output=True, text=True, check=True)
    keys = [json.loads(line) for line in listed_keys.stdout.splitlines()]
    assert [(k["kind"], k["person"], k["agents"], k["revoked_at"] is not None) for k in keys] == [
        ("person", "Ana", [], False),
        ("host", None, ["Scribe"], True),
    ], keys
    assert keys[1]["label"].startswith("permitc mcp proxy (process ")
    # The decision and the run are in the store, for `permitd` and the next run.
    assert "the approval service on" in log.read_text()
    assert "go through the approval service" not in log.read_text(), log.read_text()
    # The agent's input ended: the proxy stopped the upstream server itself, which is no news to log.
    assert "the upstream MCP server exited" not in log.read_text(), log.read_text()
    calls = lambda metrics: [line for line in metrics.splitlines() if 'route="/v1/calls"' in line]
    assert calls(seen["after_read"]) == [], seen["after_read"]
    # The proposal was made through the service (announced and decided there).
    assert calls(seen["after_send"]) == ['permits_requests_total{route="/v1/calls",status="200"} 1'], seen["after_send"]
    # One chain, written by the two processes, and the service's audit copy with every event of both.
    verified = subprocess.run([str(permitc), "audit", "verify", str(store)], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stdout.startswith(f"ok: `{store}`: 12 events"), verified
    copy = [json.loads(line) for line in Path(f"{store}.audit.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["outcome"], e["tool"]) for e in copy] == [
        ("table_installed", "installed", ""),
        ("decision", "alone", "read_note"),
        ("task", "bound", ""),
        ("execution", "claimed", "read_note"),
        ("execution", "sending", "read_note"),
        ("execution", "done", "read_note"),
        ("decision", "propose", "send_mail"),
        ("proposal", "waiting", "send_mail"),
        ("grant", "granted", "send_mail"),
        ("execution", "claimed", "send_mail"),
        ("execution", "sending", "send_mail"),
        ("execution", "done", "send_mail"),
    ], copy


def test_without_a_service_or_a_store_the_proxy_says_what_to_give(permitc: Path, world: World) -> None:
    out = subprocess.run([str(permitc), "mcp", "proxy", "--agent", "Scribe", "--skill", "Notes", "--", "true"], capture_output=True, text=True)
    assert out.returncode == 2 and "required arguments were not provided:\n  --service <SERVICE>" in out.stderr, out.stderr
    both = subprocess.run(
        [str(permitc), "mcp", "proxy", "--service", world.service.url, "--store", "x.db", "--table", "t.json", "--agent", "Scribe", "--skill", "Notes", "--", "true"],
        capture_output=True,
        text=True,
    )
    assert both.returncode == 2 and "cannot be used with" in both.stderr, both.stderr
    missing = subprocess.run(
        [str(permitc), "mcp", "proxy", "--store", str(world.folder / "new.db"), "--table", str(world.folder / "none.json"),
         "--permitd", str(world.service.permitd), "--agent", "Scribe", "--skill", "Notes", "--", "true"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "the private approval service on" in missing.stderr and "did not start" in missing.stderr, missing.stderr


def test_the_audit_copy_goes_where_audit_says_for_the_service_and_the_proxy_alike(
    permitc: Path, permitd: Path, world: World, tmp_path: Path
) -> None:
    (world.notes / "groceries.txt").write_text("milk, eggs")
    store, copy = tmp_path / "mine.db", tmp_path / "logs" / "audit.jsonl"
    copy.parent.mkdir()
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_note", "arguments": {"title": "groceries"}}},
    ]
    env = {k: v for k, v in {**os.environ, "NOTES_DIR": str(world.notes)}.items() if k != "PERMITS_HOST_KEY"}
    out = subprocess.run(
        [str(permitc), *world.local_args(store, "--audit", str(copy))],
        input="".join(json.dumps(f) + "\n" for f in frames), capture_output=True, text=True, env=env, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    answers = {a["id"]: a for a in map(json.loads, out.stdout.splitlines())}
    assert answers[2]["result"]["content"][0]["text"] == "milk, eggs", answers
    # The service's events (the table installed) and the proxy's own (the alone call) in the one file given,
    # none beside the store.
    events = [json.loads(line) for line in copy.read_text().splitlines()]
    assert [(e["kind"], e["outcome"]) for e in events] == [
        ("table_installed", "installed"),
        ("decision", "alone"),
        ("task", "bound"),
        ("execution", "claimed"),
        ("execution", "sending"),
        ("execution", "done"),
    ], events
    assert not Path(f"{store}.audit.jsonl").exists()


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_the_private_service_stops_and_its_key_is_revoked_however_the_proxy_ends(
    permitc: Path, permitd: Path, world: World, tmp_path: Path
) -> None:
    import signal
    import time

    env = {k: v for k, v in {**os.environ, "NOTES_DIR": str(world.notes)}.items() if k != "PERMITS_HOST_KEY"}
    for n, how in enumerate([signal.SIGTERM, signal.SIGKILL]):
        store = tmp_path / f"mine{n}.db"
        proxy = subprocess.Popen(
            [str(permitc), *world.local_args(store)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        assert proxy.stdin and proxy.stdout
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        proxy.stdin.write((json.dumps(hello) + "\n").encode())
        proxy.stdin.flush()
        assert json.loads(proxy.stdout.readline())["id"] == 1
        services = [c for c in _children(proxy.pid) if "permitd" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(services) == 1, services
        proxy.send_signal(how)
        proxy.wait(timeout=30)
        deadline = time.monotonic() + 20
        while Path(f"/proc/{services[0]}").exists() and time.monotonic() < deadline:
            # Reaped by init once it ends (it is the proxy's child no longer).
            if Path(f"/proc/{services[0]}/stat").read_text().split()[2] == "Z":
                break
            time.sleep(0.05)
        alive = Path(f"/proc/{services[0]}").exists() and Path(f"/proc/{services[0]}/stat").read_text().split()[2] != "Z"
        assert not alive, f"the private permitd outlived a proxy ended by {how.name}"
        listed = subprocess.run([str(permitd), "keys", "list", "--store", str(store)], capture_output=True, text=True, check=True)
        keys = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(k["kind"], k["revoked_at"] is not None) for k in keys] == [("host", True)], (how.name, keys)


def test_a_read_on_the_local_lane_is_sent_before_its_claim_is_written_and_answered_once_it_is_durable(
    world: World,
) -> None:
    """A tool that only reads is sent as soon as it is decided and admitted, with the store's write lock
    held, and its claim written while it runs (`Runtime::claim_if_alone_sending`): a call that fits the pipe
    whole at once (at most 4 KiB) goes before the claim's commit, a longer one right after it. Either way the
    answer is the server's, the ledger has each run claimed, confirmed and done, in one verified chain, and
    the store is free for the private service once the claim is committed."""
    (world.notes / "groceries.txt").write_text("milk, eggs")
    store = world.folder / "local.db"
    proxy = RawProxy(world, local=store)
    long_meta = {"padding": "p" * 6000}
    try:
        proxy.call(1, "read_note", {"title": "groceries"})
        short = proxy.next()
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "read_note", "arguments": {"title": "groceries"}, "_meta": long_meta}})
        long = proxy.next()
        # The service on the same store takes a write while the proxy runs (`keys add` commits).
        added = subprocess.run(
            [str(world.service.permitd), "keys", "add", "--store", str(store), "--person", "Ana"],
            capture_output=True, text=True, timeout=30,
        )
    finally:
        proxy.stop()
    for n, answer in ((1, short), (2, long)):
        assert answer["id"] == n, answer
        assert answer["result"]["content"] == [{"type": "text", "text": "milk, eggs"}], answer
        assert answer["result"]["isError"] is False, answer
    assert added.returncode == 0, added.stderr
    assert world.calls("read_note") == 2
    copy = [json.loads(line) for line in Path(f"{store}.audit.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["outcome"], e.get("proposal")) for e in copy if e["tool"] == "read_note"] == [
        ("decision", "alone", None),
        ("execution", "claimed", "A-1"),
        ("execution", "sending", "A-1"),
        ("execution", "done", "A-1"),
        ("decision", "alone", None),
        ("execution", "claimed", "A-2"),
        ("execution", "sending", "A-2"),
        ("execution", "done", "A-2"),
    ], copy
    verified = subprocess.run([str(world.permitc), "audit", "verify", str(store)], capture_output=True, text=True)
    assert verified.returncode == 0, verified
    assert "go through the approval service" not in proxy.log.read_text(), proxy.log.read_text()


def test_a_call_once_the_upstream_server_exited_is_an_error_and_leaves_no_run_to_resolve(world: World) -> None:
    """Once the upstream server has exited, a call the lane would run alone — a read or a change — is answered
    that the server exited, and the ledger gets no run for it: nothing was sent, so nothing is `unknown` for
    a person to resolve. (A change used to be claimed first, then recorded `unknown`: "no answer from the
    upstream server", though it never reached one.)"""
    (world.notes / "groceries.txt").write_text("milk, eggs")
    store = world.folder / "local.db"
    proxy = RawProxy(world, local=store)
    try:
        proxy.call(1, "read_note", {"title": "groceries"})
        first = proxy.next()
        os.kill(int((world.notes / "server.pid").read_text()), signal.SIGKILL)
        deadline = time.monotonic() + 20
        while "the upstream MCP server exited" not in proxy.log.read_text():
            assert time.monotonic() < deadline, proxy.log.read_text()
            time.sleep(0.05)
        proxy.call(2, "write_note", {"title": "x", "body": "y"})
        wrote = proxy.next()
        proxy.call(3, "read_note", {"title": "groceries"})
        read = proxy.next()
    finally:
        proxy.stop()
    assert first["result"]["content"] == [{"type": "text", "text": "milk, eggs"}], first
    gone = {"code": -32603, "message": "the upstream MCP server exited"}
    assert (wrote["id"], wrote.get("error")) == (2, gone), wrote
    assert (read["id"], read.get("error")) == (3, gone), read
    assert world.calls("write_note") == 0
    assert alone_runs(world, store) == ["read_note"]


def test_with_sync_normal_the_proxy_and_its_service_sync_at_checkpoints_only(world: World) -> None:
    """`--sync normal` (as `permitd serve --sync normal`): the private service opens the store at
    `synchronous=NORMAL`, and the proxy's own alone calls wait for no sync — the user's choice of answers that
    wait for no disk over runs that survive a power loss. The calls and the chain are as with `group`. Without
    `--store` the flag is a usage error."""
    (world.notes / "groceries.txt").write_text("milk, eggs")
    store = world.folder / "local.db"
    proxy = RawProxy(world, "--sync", "normal", local=store)
    try:
        proxy.call(1, "read_note", {"title": "groceries"})
        read = proxy.next()
        proxy.call(2, "write_note", {"title": "list", "body": "bread"})
        wrote = proxy.next()
    finally:
        proxy.stop()
    assert read["result"]["content"] == [{"type": "text", "text": "milk, eggs"}], read
    assert wrote["result"]["isError"] is False, wrote
    assert (world.notes / "list.txt").read_text() == "bread"
    assert f"permitd: store `{store}` (journal_mode=wal, synchronous=NORMAL)" in proxy.log.read_text(), proxy.log.read_text()
    assert alone_runs(world, store) == ["read_note", "write_note"]
    alone = subprocess.run(
        [str(world.permitc), "mcp", "proxy", "--service", world.service.url, "--key", "k", "--agent", "Scribe",
         "--skill", "Notes", "--sync", "normal", "--", "true"],
        capture_output=True, text=True,
    )
    assert alone.returncode == 2 and "--store <STORE>" in alone.stderr, alone


def alone_runs(world: World, store: Path) -> list[str]:
    """The tools of the alone calls the audit copy of `store` has, in the order they were decided, once each
    tool's events are sure to be whole alone runs — decided `alone`, then `claimed`, `sending` and `done`,
    nothing else — and the store's chain verified. (A call's receipt is recorded after its answer, so the
    next call's events may come before it: each tool's are compared on their own.)"""
    copy = [json.loads(line) for line in Path(f"{store}.audit.jsonl").read_text().splitlines()]
    events = [(e["kind"], e["outcome"], e["tool"]) for e in copy if e["tool"]]
    tools = [tool for kind, _, tool in events if kind == "decision"]
    run = [("decision", "alone"), ("execution", "claimed"), ("execution", "sending"), ("execution", "done")]
    for tool in set(tools):
        assert [(k, o) for k, o, t in events if t == tool] == run * tools.count(tool), copy
    verified = subprocess.run([str(world.permitc), "audit", "verify", str(store)], capture_output=True, text=True)
    assert verified.returncode == 0, verified
    return tools
