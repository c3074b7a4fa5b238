"""The shop case's support: its tables compiled by the real `permitc` from policies/shop (with other budget
figures, as a recompiled policy), and the supplier peer, a separate process on loopback with its own SQLite
database (examples/supplier), asked over HTTP what reached it."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conftest import ROOT

import permits

WORK = "restock-2026-11-30"
# Authoritative prices in US cents: the host computes every amount, never the model.
VANILLA = 250
STRAWBERRY = 275


def shop_table_path(
    permitc: Path, folder: Path, alone_up_to: int, ceiling: int, edits: tuple[tuple[str, str], ...] = ()
) -> Path:
    """policies/shop with these figures and text replacements, compiled by `permitc`; the table's path."""
    package = folder / f"shop-{alone_up_to}-{ceiling}-{len(edits)}"
    package.mkdir(parents=True, exist_ok=True)
    for source in sorted((ROOT / "policies" / "shop").iterdir()):
        text = source.read_text().replace(
            "ceiling: 2500, alone_up_to: 0", f"ceiling: {ceiling}, alone_up_to: {alone_up_to}"
        )
        for old, new in edits:
            text = text.replace(old, new)
        (package / source.name).write_text(text)
    out = package / "table.json"
    run = subprocess.run([str(permitc), "compile", str(package), "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, f"permitc compile: {run.stderr}"
    return out


def shop_table(permitc: Path, folder: Path, alone_up_to: int, ceiling: int) -> permits.Table:
    return permits.Table.load(shop_table_path(permitc, folder, alone_up_to, ceiling))


def order(sku: str, tubs: int, price: int) -> dict[str, Any]:
    return {"sku": sku, "quantity": tubs, "amount": tubs * price}


class Supplier:
    """The supplier peer, started as its own process: `supplier --db PATH` on a free loopback port."""

    def __init__(self, exe: Path, db: Path) -> None:
        self.process = subprocess.Popen([str(exe), "--db", str(db)], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        assert line.startswith("listening on "), f"the supplier said {line!r}"
        self.url = line.removeprefix("listening on ")

    def _ask(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    def order(self, operation: str, sku: str, quantity: int, amount: int) -> tuple[int, Any]:
        """POST /orders: (status, body)."""
        return self._ask("POST", "/orders", {"operation": operation, "sku": sku, "quantity": quantity, "amount": amount})

    def orders(self) -> list[dict[str, Any]]:
        """GET /orders: every order the supplier accepted."""
        status, body = self._ask("GET", "/orders")
        assert status == 200, body
        orders: list[dict[str, Any]] = body["orders"]
        return orders

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


def send(supplier: Supplier, ctx: permits.RunContext) -> Any:
    """The host's tool: sends the order to the supplier with the runtime's operation id."""
    a = ctx.arguments
    status, body = supplier.order(ctx.operation, a["sku"], a["quantity"], a["amount"])
    if status == 200:
        return body
    if status == 409:
        return permits.Failed(f"the supplier refused: {body}")
    return permits.Unknown(f"the supplier did not answer clearly: {status} {body}")
