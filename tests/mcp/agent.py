"""The agent's side of the gateway's tests: the official SDK's stdio client on `permitc mcp proxy`, and Ana
deciding through the service with her own key (as the inbox does)."""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import HERE, World

Agent = Callable[[ClientSession], Awaitable[Any]]


def run_agent(
    world: World,
    body: Agent,
    *extra: str,
    env: dict[str, str] | None = None,
    url: str | None = None,
    errlog: TextIO | None = None,
    **session: Any,
) -> Any:
    """Runs `body` with an initialized SDK session on `permitc mcp proxy EXTRA… -- python SERVER` (or
    `--url URL`); `session` are more `ClientSession` arguments (callbacks), `errlog` gets the proxy's stderr."""
    params = StdioServerParameters(
        command=str(world.permitc),
        args=world.proxy_args(*extra, url=url),
        env={**os.environ, "NOTES_DIR": str(world.notes), **(env or {})},
        cwd=str(HERE),
    )

    async def main() -> Any:
        async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60, **session) as s:
                await s.initialize()
                return await body(s)

    return anyio.run(main)


def text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def raw(url: str, key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"authorization": f"Bearer {key}", "content-type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def decide(world: World, proposal_id: str, verb: str, after: float = 0.0, reason: str = "") -> None:
    """Ana approves or rejects through the service with her own key (as the inbox does), `after` seconds
    after the proposal exists."""

    def act() -> None:
        # The proposal may not be made yet (the proxy starts its server first): wait for it, bounded.
        for _ in range(600):
            status, p = raw(world.service.url, world.ana, "GET", f"/v1/proposals/{proposal_id}")
            if status == 200:
                break
            time.sleep(0.1)
        assert status == 200, p
        body = {"fingerprint": p["fingerprint"], "mode": "once"} if verb == "approve" else {"reason": reason}
        status, answer = raw(world.service.url, world.ana, "POST", f"/v1/proposals/{proposal_id}/{verb}", body)
        assert status == 200, answer

    if after:
        threading.Timer(after, act).start()
    else:
        act()


class RawProxy:
    """`permitc mcp proxy` spoken to in raw JSON-RPC frames (no SDK in the way: a test decides exactly what is
    sent and sees exactly what comes back, and when). Its stderr goes to `log`."""

    def __init__(self, world: World, *extra: str, url: str | None = None, local: Path | None = None) -> None:
        """Starts the proxy in front of the world's server (at `url` when given), through the world's service,
        or in the local mode on the store `local` when given."""
        import queue
        import subprocess

        self.log = world.folder / f"proxy-{time.monotonic_ns()}.log"
        self._stderr = open(self.log, "w", encoding="utf-8")
        args = world.local_args(local, *extra) if local else world.proxy_args(*extra, url=url)
        self.process = subprocess.Popen(
            [str(world.permitc), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "NOTES_DIR": str(world.notes)},
            cwd=HERE,
        )
        self.frames: queue.Queue[dict[str, Any]] = queue.Queue()

        def read() -> None:
            assert self.process.stdout
            for line in self.process.stdout:
                self.frames.put(json.loads(line))

        threading.Thread(target=read, daemon=True).start()
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert self.next(60).get("id") == "init"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def call(self, id: Any, tool: str, arguments: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})

    def next(self, timeout: float = 30) -> dict[str, Any]:
        """The next frame from the proxy (fails after `timeout` seconds)."""
        return self.frames.get(timeout=timeout)

    def stderr(self) -> str:
        self._stderr.flush()
        return self.log.read_text()

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except Exception:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def wait_for(condition: Callable[[], bool], seconds: float = 30, what: str = "the condition") -> None:
    """Waits until `condition()` holds (fails after `seconds`)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.05)
