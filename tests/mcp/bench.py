"""The gateway's benchmark (issue #19, BENCHMARKS.md): the latency `permitc mcp proxy` adds to an `alone`
`tools/call`, against the same call made directly to the server (with `--service URL`, and in the local mode
`--store FILE --table TABLE`, where the proxy runs alone calls on the store itself), and `tools/list` of a 1,000-tool server,
directly and through the proxy; then the alone call again with the server over streamable HTTP (direct: one
`POST` per call on a kept-alive connection; through `permitc mcp proxy --url`). Bounded: CALLS calls and LISTS
lists each way.

    PERMITC=target/release/permitc PERMITD=target/release/permitd python tests/mcp/bench.py [CALLS] [LISTS]

Frames are written and read raw (no SDK in the loop), one request at a time, so the figures are the
server's and the proxy's, not a client's. The direct calls are timed twice: back to back, and each after a
pause as long as the proxy's added p50 (the client sleeping, as it does while the proxy works) — a server
whose threads have gone to sleep answers more slowly, so part of what the proxy adds is the server's own
wake-up, which a real agent (seconds between calls) always pays."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import HttpServer, World, server_command


class Peer:
    """An MCP server (or the proxy) on stdio, initialized."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, object]) -> None:
        assert self.p.stdin
        self.p.stdin.write(json.dumps(message).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method: str, params: dict[str, object]) -> dict[str, object]:
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        assert self.p.stdout
        while True:
            answer = json.loads(self.p.stdout.readline())
            if answer.get("id") == self.next:
                return answer

    def stop(self) -> None:
        self.p.kill()
        self.p.wait()


class HttpPeer:
    """An MCP server over streamable HTTP, initialized: one kept-alive connection, each answer read from the
    event stream the server answers a `POST` with."""

    def __init__(self, url: str) -> None:
        parts = url.removeprefix("http://").split("/", 1)
        host, port = parts[0].split(":")
        self.path = "/" + parts[1]
        self.c = http.client.HTTPConnection(host, int(port), timeout=60)
        self.c.connect()
        self.c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.session = ""
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict[str, object]) -> str:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.session:
            headers |= {"mcp-session-id": self.session, "mcp-protocol-version": "2025-06-18"}
        self.c.request("POST", self.path, body=json.dumps(message), headers=headers)
        response = self.c.getresponse()
        self.session = response.getheader("mcp-session-id") or self.session
        return response.read().decode()

    def request(self, method: str, params: dict[str, object]) -> dict[str, object]:
        self.next += 1
        body = self.post({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        for line in body.splitlines():
            if line.startswith("data: ") and line[6:].strip():
                answer = json.loads(line[6:])
                if answer.get("id") == self.next:
                    return answer  # type: ignore[no-any-return]
        raise AssertionError(f"no answer in {body!r}")

    def stop(self) -> None:
        self.c.close()


def timed(peer: Peer | HttpPeer, method: str, params: dict[str, object], n: int, pause: float = 0.0) -> list[float]:
    """`n` requests one after the other, each timed in ms; with `pause` (seconds), the client first sleeps
    that long before each, as it waits while the proxy does its part."""
    out = []
    for _ in range(n):
        if pause:
            time.sleep(pause)
        start = time.perf_counter()
        answer = peer.request(method, params)
        out.append((time.perf_counter() - start) * 1000)
        assert "result" in answer, answer
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def show(name: str, values: list[float]) -> None:
    print(f"{name:<44} p50 {statistics.median(values):7.3f} ms   p99 {pct(values, 0.99):7.3f} ms   n={len(values)}")


@contextlib.contextmanager
def bench_world() -> Iterator[tuple[World, dict[str, str], dict[str, object], Path, Path]]:
    """The test world in a temporary folder (its `permitd` stopped at the end), the servers' environment, the
    alone call, the folder and `$PERMITC`."""
    permitc, permitd = Path(os.environ["PERMITC"]), Path(os.environ["PERMITD"])
    with tempfile.TemporaryDirectory() as folder:
        world = World(permitc, permitd, Path(folder))
        (world.notes / "n.txt").write_text("x")
        env = {**os.environ, "NOTES_DIR": str(world.notes)}
        try:
            yield world, env, {"name": "read_note", "arguments": {"title": "n"}}, Path(folder), permitc
        finally:
            world.service.stop()


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    lists = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with bench_world() as (world, env, call, folder, permitc):
        direct = Peer(server_command(), env)
        timed(direct, "tools/call", call, 50)
        d = timed(direct, "tools/call", call, calls)
        direct.stop()
        proxy = Peer([str(permitc), *world.proxy_args()], env)
        timed(proxy, "tools/call", call, 50)
        p = timed(proxy, "tools/call", call, calls)
        proxy.stop()
        # The local mode (`--store FILE --table TABLE`): the proxy starts its own `permitd` on the store
        # and runs the alone calls on it in its own process (`permits_mcp::lane`).
        local = Peer([str(permitc), *world.local_args(folder / "local.db")], env)
        timed(local, "tools/call", call, 50)
        lo = timed(local, "tools/call", call, calls)
        local.stop()
        # The same direct calls, each after a pause as long as the proxy adds (its p50): how much slower
        # the server itself answers a call that does not follow the last one at once (its threads asleep).
        added = (statistics.median(p) - statistics.median(d)) / 1000
        direct = Peer(server_command(), env)
        timed(direct, "tools/call", call, 50)
        paced = timed(direct, "tools/call", call, calls, pause=max(added, 0.0))
        direct.stop()
        show("alone tools/call, direct", d)
        show("alone tools/call, through the proxy", p)
        print(f"{'added by the proxy':<44} p50 {statistics.median(p) - statistics.median(d):7.3f} ms   p99 {pct(p, 0.99) - pct(d, 0.99):7.3f} ms")
        show("alone tools/call, direct, paced", paced)
        print(f"{'added, against the paced direct call':<44} p50 {statistics.median(p) - statistics.median(paced):7.3f} ms   p99 {pct(p, 0.99) - pct(paced, 0.99):7.3f} ms")
        show("alone tools/call, through the local proxy", lo)
        print(f"{'added by the local proxy (--store)':<44} p50 {statistics.median(lo) - statistics.median(d):7.3f} ms   p99 {pct(lo, 0.99) - pct(d, 0.99):7.3f} ms")
        big = [*server_command(), "--tools", "1000"]
        direct = Peer(big, env)
        show("tools/list of 1,000 tools, direct", timed(direct, "tools/list", {}, lists))
        direct.stop()
        proxy = Peer([str(permitc), *world.proxy_args(command=big)], env)
        listed = proxy.request("tools/list", {})
        assert len(listed["result"]["tools"]) == 3, listed  # type: ignore[index]
        show("tools/list of 1,000 tools, through the proxy", timed(proxy, "tools/list", {}, lists))
        proxy.stop()
        server = HttpServer(world.script, world.notes)
        try:
            direct_http = HttpPeer(server.url)
            timed(direct_http, "tools/call", call, 50)
            dh = timed(direct_http, "tools/call", call, calls)
            direct_http.stop()
            proxy = Peer([str(permitc), *world.proxy_args(url=server.url)], env)
            timed(proxy, "tools/call", call, 50)
            ph = timed(proxy, "tools/call", call, calls)
            proxy.stop()
        finally:
            server.stop()
        show("alone tools/call over HTTP, direct", dh)
        show("alone tools/call over HTTP, through the proxy", ph)
        print(f"{'added by the proxy (HTTP upstream)':<44} p50 {statistics.median(ph) - statistics.median(dh):7.3f} ms   p99 {pct(ph, 0.99) - pct(dh, 0.99):7.3f} ms")


def syncs(folder: Path, n: int = 300) -> list[float]:
    """`n` syncs of the disk under `folder`, each timed in ms: 48 KiB written (about what a claim's commit
    adds to the store's log: 12 pages) and `fdatasync`, 3 ms apart — what the answer of a read waits for
    when its tool answers sooner."""
    path = folder / "sync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    out = []
    try:
        for i in range(n):
            os.pwrite(fd, b"x" * 48 * 1024, (i % 64) * 48 * 1024)
            start = time.perf_counter()
            os.fdatasync(fd)
            out.append((time.perf_counter() - start) * 1000)
            time.sleep(0.003)
    finally:
        os.close(fd)
        path.unlink()
    return out


def main_local() -> None:
    """`bench.py local [CALLS] [ROUNDS]`: only the alone call, directly and through the local proxy
    (`--store`), one call each way in turn, CALLS each way per round (a fresh proxy and server each round,
    the stores kept), so that the machine's drift over the run falls on all alike; the figures are pooled
    over the ROUNDS rounds.

    In the same turns: a second local proxy whose store is in memory (`/dev/shm`, where there is one), whose
    syncs cost nothing — the proxy's own part, apart from the disk's sync that a read's answer waits for —;
    a third on the disk with `--sync normal` (synced at checkpoints only: no answer waits for the disk); and
    a second direct server, as the measurement's own resolution (two identical paths differ by that much).
    Last, the disk's own `fdatasync` times."""
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    shm = Path("/dev/shm")
    with bench_world() as (world, env, call, folder, permitc), contextlib.ExitStack() as stack:
        memory = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=shm))) if shm.is_dir() else None
        # (name, a fresh peer's command, its calls)
        ways: list[tuple[str, list[str], list[float]]] = [
            ("direct", server_command(), []),
            ("through the local proxy", [str(permitc), *world.local_args(folder / "local.db")], []),
        ]
        if memory:
            ways.append(("  its store in memory", [str(permitc), *world.local_args(memory / "local.db")], []))
        ways.append(
            ("  on the disk, --sync normal", [str(permitc), *world.local_args(folder / "normal.db", "--sync", "normal")], [])
        )
        ways.append(("direct to a second server", server_command(), []))
        order = random.Random(19)
        for _ in range(rounds):
            peers = [(Peer(command, env), out) for _, command, out in ways]
            for peer, _ in peers:
                timed(peer, "tools/call", call, 50)
            # One call each way in turn, so that all meet the machine in the same state; the order shuffled
            # each turn, since a call also meets what the one before it left running (a proxy's receipt).
            for _ in range(calls):
                order.shuffle(peers)
                for peer, out in peers:
                    out += timed(peer, "tools/call", call, 1)
            for peer, _ in peers:
                peer.stop()
        d = ways[0][2]
        for name, _, out in ways:
            show(f"alone tools/call, {name.strip()}", out)
        for name, _, out in ways[1:]:
            print(f"{'  added, ' + name.strip():<44} p50 {statistics.median(out) - statistics.median(d):7.3f} ms   p99 {pct(out, 0.99) - pct(d, 0.99):7.3f} ms")
        if not memory:
            print("(no /dev/shm here: the store in memory was not measured)")
        show("the store's disk: fdatasync of 48 KiB", syncs(folder))


def main_compare() -> None:
    """`bench.py compare [CALLS] [ROUNDS]` with $PERMITC_B and $PERMITD_B: the local proxy of two builds side by
    side (a change against the build before it), and the direct call, one call each way in turn (the order
    shuffled each turn), each build on a store of its own; the figures pooled over the rounds."""
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    permitd_b = Path(os.environ["PERMITD_B"])
    permitc_b = Path(os.environ["PERMITC_B"])
    with bench_world() as (world, env, call, folder, permitc):
        b_args = world.local_args(folder / "b.db")
        b_args[b_args.index("--permitd") + 1] = str(permitd_b)
        d: list[float] = []
        a: list[float] = []
        b: list[float] = []
        order = random.Random(19)
        for _ in range(rounds):
            peers = [
                (Peer(server_command(), env), d),
                (Peer([str(permitc), *world.local_args(folder / "a.db")], env), a),
                (Peer([str(permitc_b), *b_args], env), b),
            ]
            for peer, _ in peers:
                timed(peer, "tools/call", call, 50)
            for _ in range(calls):
                order.shuffle(peers)
                for peer, out in peers:
                    out += timed(peer, "tools/call", call, 1)
            for peer, _ in peers:
                peer.stop()
        show("alone tools/call, direct", d)
        for name, values in (("$PERMITC", a), ("$PERMITC_B", b)):
            show(f"through the local proxy of {name}", values)
            print(f"{'  added':<44} p50 {statistics.median(values) - statistics.median(d):7.3f} ms   p99 {pct(values, 0.99) - pct(d, 0.99):7.3f} ms")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "local":
        main_local()
    elif len(sys.argv) > 1 and sys.argv[1] == "compare":
        main_compare()
    else:
        main()
