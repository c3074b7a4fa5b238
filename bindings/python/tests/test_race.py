"""Two Python processes on one ledger — an SQLite file, then a PostgreSQL database — racing for the last of a
ceiling: never over it (500 rounds on SQLite, 200 on PostgreSQL; `PERMITS_RACE_ROUNDS` for more). The Python
twin of shop_spending.rs's race between two runtimes."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from race_worker import race
from shop_support import WORK, shop_table_path

import permits


def test_two_processes_racing_for_the_last_of_the_ceiling_never_exceed_it(permitc: Path, workdir: Path) -> None:
    race_on(permitc, workdir, str(workdir / "ledger.db"), int(os.environ.get("PERMITS_RACE_ROUNDS", "500")))


def test_two_processes_on_postgresql_racing_for_the_last_of_the_ceiling_never_exceed_it(
    permitc: Path, workdir: Path, postgres_url: str
) -> None:
    """The same race on one PostgreSQL database (issue #22): each process its own store and connection."""
    race_on(permitc, workdir, postgres_url, int(os.environ.get("PERMITS_RACE_ROUNDS", "200")))


def race_on(permitc: Path, workdir: Path, ledger: str, rounds: int) -> None:
    table = shop_table_path(permitc, workdir, 0, 2500)
    rt = permits.Runtime(permits.Table.load(table), authority=permits.ADMIT_ALL, store=ledger)
    # 1000 held by a standing order: 1500 of room, and each racer wants 1000.
    held = rt.propose(
        "Restocker", "Reorder", "PlaceOrder", {"sku": "chocolate", "quantity": 4, "amount": 1000},
        requester="Lucy", operation_key=WORK, why="standing order", destination="http://127.0.0.1:9/orders",
    )  # fmt: skip
    rt.approve(held.id, "Lucy", held.fingerprint)

    spawn = multiprocessing.get_context("spawn")
    start, approve, results = spawn.Barrier(3), spawn.Barrier(2), spawn.Queue()
    racers = [
        spawn.Process(target=race, args=(str(table), str(ledger), sku, rounds, start, approve, results))
        for sku in ("vanilla", "strawberry")
    ]
    for r in racers:
        r.start()
    try:
        for round_ in range(rounds):
            start.wait(timeout=60)
            outcomes = [results.get(timeout=60), results.get(timeout=60)]
            assert {o[0] for o in outcomes} == {round_}
            kinds = sorted(o[2] for o in outcomes)
            assert kinds == ["budget", "granted"], f"round {round_}: exactly one approval fits: {outcomes}"
            b = rt.budget("Supplies")
            assert (b.reserved, b.spent) == (2000, 0), f"round {round_}"
            assert b.reserved + b.spent <= b.effective_ceiling
            # Free the room for the next round.
            for _, proposal_id, _ in outcomes:
                rt.revoke(proposal_id, "Lucy", "next round")
    finally:
        for r in racers:
            r.join(timeout=60)
            if r.is_alive():
                r.kill()
    assert all(r.exitcode == 0 for r in racers)
    b = rt.budget("Supplies")
    assert (b.reserved, b.spent) == (1000, 0)
