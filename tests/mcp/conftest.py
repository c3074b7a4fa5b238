"""Fixtures for the gateway's tests: the real `permitc` and `permitd` ($PERMITC, $PERMITD, or built with
cargo), the real MCP servers `notes_server.py` and `ask_server.py` on the official Python SDK (on stdio, or
over streamable HTTP on a loopback port), and the SDK's stdio client as the agent. No test skips: a missing
binary or SDK fails."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SERVER = HERE / "notes_server.py"
ASK_SERVER = HERE / "ask_server.py"

#: The claims an author confirms after reading each imported tool.
CONFIRMED = {"read_note": "reads", "write_note": "changes", "send_mail": "sends", "delete_note": "changes"}

#: The same for `ask_server.py`.
ASK_CONFIRMED = {
    "summarize_note": "reads",
    "choose_subject": "reads",
    "slow_count": "changes",
    "tip": "sends",
    "charge_then_fail": "changes",
}


def _binary(env: str, package: str, name: str) -> Path:
    given = os.environ.get(env)
    if given:
        return Path(given)
    subprocess.run(["cargo", "build", "--locked", "--quiet", "-p", package, "--bin", name], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / name


@pytest.fixture(scope="session")
def permitc() -> Path:
    return _binary("PERMITC", "permits-cli", "permitc")


@pytest.fixture(scope="session")
def permitd() -> Path:
    return _binary("PERMITD", "permits-service", "permitd")


def server_command(script: Path = SERVER) -> list[str]:
    return [sys.executable, str(script)]


class HttpServer:
    """`SCRIPT --http [EXTRA…]`: an MCP server over streamable HTTP on a loopback port it picks, its URL read
    from `FOLDER/server.url` (killed by `stop`)."""

    def __init__(self, script: Path, folder: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        (folder / "server.url").unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [*server_command(script), "--http", *extra],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "NOTES_DIR": str(folder), **(env or {})},
            cwd=HERE,
        )
        deadline = time.monotonic() + 30
        while not (folder / "server.url").exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"{script.name} --http did not start")
            time.sleep(0.05)
        self.url = (folder / "server.url").read_text()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def import_tools(
    permitc: Path,
    notes: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    script: Path = SERVER,
    url: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`permitc mcp import [EXTRA…] -- python SCRIPT`, or `--url URL` for a server over HTTP."""
    environment = {**os.environ, "NOTES_DIR": str(notes), **(env or {})}
    server = ["--url", url] if url else ["--", *server_command(script)]
    return subprocess.run(
        [str(permitc), "mcp", "import", *extra, *server],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def confirm_claims(imported: str, drop: tuple[str, ...] = ("wipe_notes",), confirmed: dict[str, str] = CONFIRMED) -> str:
    """The import with each claim narrowed to what the tool does, and the dropped tools' declarations removed
    (absent from the table)."""
    blocks = imported.split("\n\n")
    kept = [b for b in blocks if not any(f"extern tool {d} " in b for d in drop)]
    text = "\n\n".join(kept)
    for name, claim in confirmed.items():
        start = text.index(f"extern tool {name} ")
        at = text.index(": changes + sends + spends + reaches_out", start)
        text = text[:at] + f": {claim}" + text[at + len(": changes + sends + spends + reaches_out") :]
    return text


class Service:
    """`permitd serve` on loopback port 0 over a table and a fresh ledger (killed by `stop`)."""

    def __init__(self, permitd: Path, table: Path, store: Path) -> None:
        self.permitd = permitd
        self.store = store
        # The benchmark may ask for another `--sync` (`PERMITD_SYNC`); the tests run with the default (`group`).
        sync = ["--sync", os.environ["PERMITD_SYNC"]] if os.environ.get("PERMITD_SYNC") else []
        self.process = subprocess.Popen(
            [str(permitd), "serve", "--listen", "127.0.0.1:0", "--table", str(table), "--store", str(store), *sync],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline() if self.process.stdout else ""))
        reader.start()
        reader.join(30)
        line = lines[0].strip() if lines else ""
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"permitd's first line was {line!r}")
        self.url = line.removeprefix("listening on ")

    def key(self, *args: str) -> str:
        out = subprocess.run(
            [str(self.permitd), "keys", "add", "--store", str(self.store), *args], check=True, capture_output=True, text=True
        )
        return out.stdout.strip()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


class World:
    """A compiled policy over the imported tools, the service on it, a host key and Ana's key. By default the
    notes server's tools as the Scribe in Notes; `ask=True`: the ask server's as the Helper in Ask."""

    def __init__(self, permitc: Path, permitd: Path, folder: Path, ask: bool = False) -> None:
        self.permitc = permitc
        self.folder = folder
        self.notes = folder / "notes"
        self.notes.mkdir()
        self.script = ASK_SERVER if ask else SERVER
        self.agent, self.skill = ("Helper", "Ask") if ask else ("Scribe", "Notes")
        imported = import_tools(permitc, self.notes, script=self.script)
        assert imported.returncode == 0, imported.stderr
        package = folder / "policy"
        package.mkdir()
        policy = HERE / ("ask_policy.permits" if ask else "policy.permits")
        (package / "policy.permits").write_text(policy.read_text())
        tools = confirm_claims(imported.stdout, drop=(), confirmed=ASK_CONFIRMED) if ask else confirm_claims(imported.stdout)
        (package / "tools.permits").write_text(tools)
        table = folder / "table.json"
        compiled = subprocess.run([str(permitc), "compile", str(package), "-o", str(table)], capture_output=True, text=True)
        assert compiled.returncode == 0, compiled.stderr
        self.service = Service(permitd, table, folder / "ledger.db")
        self.host_key = self.service.key("--agents", self.agent)
        self.ana = self.service.key("--person", "Ana")
        #: The upstream server over HTTP, when a test starts one (`serve_http`); stopped with the world.
        self.http: HttpServer | None = None

    def serve_http(self, *extra: str, env: dict[str, str] | None = None) -> str:
        """Starts this world's server over streamable HTTP (`--http EXTRA…`) and returns its URL."""
        self.http = HttpServer(self.script, self.notes, *extra, env=env)
        return self.http.url

    def proxy_args(self, *extra: str, command: list[str] | None = None, url: str | None = None) -> list[str]:
        """`permitc` arguments: `mcp proxy` as this world's agent and skill for Ana, `EXTRA…`, then the server's
        command (or `--url URL`)."""
        server = ["--url", url] if url else ["--", *(command or server_command(self.script))]
        return [
            "mcp", "proxy", "--service", self.service.url, "--key", self.host_key,
            "--agent", self.agent, "--skill", self.skill, "--for", "Ana", *extra, *server,
        ]

    def local_args(self, store: Path, *extra: str) -> list[str]:
        """`permitc` arguments: `mcp proxy` in the local mode on `store` (a private `permitd` on it, started by
        the proxy, with this world's table), as this world's agent and skill for Ana, `EXTRA…`, then the
        server's command."""
        return [
            "mcp", "proxy", "--store", str(store), "--table", str(self.folder / "table.json"),
            "--permitd", str(self.service.permitd), "--agent", self.agent, "--skill", self.skill, "--for", "Ana",
            *extra, "--", *server_command(self.script),
        ]

    def calls(self, tool: str) -> int:
        log = self.notes / "calls.log"
        return log.read_text().splitlines().count(tool) if log.exists() else 0


@pytest.fixture
def world(permitc: Path, permitd: Path, tmp_path: Path) -> Iterator[World]:
    w = World(permitc, permitd, tmp_path)
    try:
        yield w
    finally:
        w.service.stop()
        if w.http:
            w.http.stop()


@pytest.fixture
def ask_world(permitc: Path, permitd: Path, tmp_path: Path) -> Iterator[World]:
    w = World(permitc, permitd, tmp_path, ask=True)
    try:
        yield w
    finally:
        w.service.stop()
        if w.http:
            w.http.stop()
