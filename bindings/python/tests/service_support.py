"""The real approval service for the client's tests: `permitd serve` on loopback port 0 over a fixture table
and a fresh ledger, keys made with `permitd keys add`, and a raw HTTP helper for what a person's key does
(the client has no person's operations)."""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from conftest import FIXTURES


class Service:
    """A running `permitd serve` (killed by `stop`)."""

    def __init__(self, permitd: Path, table: Path, store: Path) -> None:
        self.permitd = permitd
        self.store = store
        self.process = subprocess.Popen(
            [str(permitd), "serve", "--listen", "127.0.0.1:0", "--table", str(table), "--store", str(store)],
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

    @classmethod
    def on_fixture(cls, permitd: Path, name: str, folder: Path) -> Service:
        return cls(permitd, FIXTURES / f"{name}.json", folder / "ledger.db")

    def key(self, *args: str) -> str:
        """A new key (`permitd keys add --store … ARGS`): its token."""
        out = subprocess.run(
            [str(self.permitd), "keys", "add", "--store", str(self.store), *args],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


def raw(url: str, key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request with any key, straight over HTTP: the status and the JSON answer."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def approve(url: str, person_key: str, proposal_id: str, fingerprint: str, mode: str = "once") -> Any:
    """A person approves through the service (their own key), as the inbox will: the proposal's JSON."""
    status, answer = raw(url, person_key, "POST", f"/v1/proposals/{proposal_id}/approve", {"fingerprint": fingerprint, "mode": mode})
    assert status == 200, answer
    return answer
