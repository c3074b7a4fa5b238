"""One racer of test_race.py, in its own process (spawned): a runtime on the shared SQLite ledger that, each
round, proposes its order under the round's key and approves it at the same moment as the other racer."""

from __future__ import annotations

from typing import Any

import permits


def race(table: str, ledger: str, sku: str, rounds: int, start: Any, approve: Any, results: Any) -> None:
    rt = permits.Runtime(permits.Table.load(table), authority=permits.ADMIT_ALL, store=ledger)
    for round_ in range(rounds):
        start.wait()
        p = rt.propose(
            "Restocker",
            "Reorder",
            "PlaceOrder",
            {"sku": sku, "quantity": 4, "amount": 1000},
            requester="Lucy",
            operation_key=f"race-{round_}",
            why="race",
            destination="http://127.0.0.1:9/orders",
        )
        approve.wait()
        try:
            rt.approve(p.id, "Lucy", p.fingerprint)
            results.put((round_, p.id, "granted"))
        except permits.Refused as refused:
            results.put((round_, p.id, refused.kind))
