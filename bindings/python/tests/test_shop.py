"""Lucy's ice-cream shop (shared/cases/shop-spending.md), steps 1-9 in one run from Python, against the
supplier (a separate process with its own database) and with the ledger in an SQLite file: the same values
as crates/permits-cli/tests/it/shop_spending.rs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DAY
from shop_support import STRAWBERRY, VANILLA, WORK, Supplier, order, send, shop_table

import permits


@pytest.fixture
def supplier(supplier_exe: Path, workdir: Path) -> Iterator[Supplier]:
    s = Supplier(supplier_exe, workdir / "supplier.db")
    yield s
    s.stop()


def figures(rt: permits.Runtime) -> tuple[int, int]:
    b = rt.budget("Supplies")
    return (b.reserved, b.spent)


def refusal(f: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(permits.Refused) as err:
        f(*args, **kwargs)
    return err.value.kind


def test_shop_spending_steps_1_to_9(permitc: Path, workdir: Path, supplier: Supplier) -> None:
    ledger = workdir / "ledger.db"
    url = f"{supplier.url}/orders"
    clock = permits.ManualClock(1_800_000_000)

    def open_ledger(table: permits.Table) -> permits.Runtime:
        # A host restarting with a recompiled policy installs its table as the store's current one first.
        opened = permits.Runtime(table, authority=permits.ADMIT_ALL, clock=clock, store=ledger)
        opened.install_table()
        return opened

    def propose(sku: str, tubs: int, price: int) -> permits.Proposal:
        return rt.propose(
            "Restocker",
            "Reorder",
            "PlaceOrder",
            order(sku, tubs, price),
            requester="Lucy",
            operation_key=WORK,
            why="the freezer runs low",
            destination=url,
        )

    def run(ctx: permits.RunContext) -> Any:
        return send(supplier, ctx)

    rt = open_ledger(shop_table(permitc, workdir, 0, 2500))

    # 1. Propose vanilla x 6 -> 1500, a draft; the same again is the same proposal.
    six = propose("vanilla", 6, VANILLA)
    assert (six.status, six.arguments["amount"]) == ("waiting", 1500)
    again = propose("vanilla", 6, VANILLA)
    assert (again.id, again.status) == (six.id, "waiting")
    assert len(rt.proposals()) == 1

    # 2. A fingerprint other than the proposal's, and the agent's own account: refused. Lucy approves twice.
    assert refusal(rt.approve, six.id, "Lucy", "0" * 64) == "wrong_fingerprint"
    assert refusal(rt.approve, six.id, "Restocker", six.fingerprint) == "not_decider"
    granted = rt.approve(six.id, "Lucy", six.fingerprint)
    assert granted.grant is not None and granted.grant.basis == "operator"
    rt.approve(six.id, "Lucy", six.fingerprint)
    assert figures(rt) == (1500, 0), "the second approval reserves nothing more"

    # 3. A sale leaves one tub: x 7 in the same work supersedes x 6 and releases its reservation.
    seven = propose("vanilla", 7, VANILLA)
    assert seven.id != six.id
    assert (seven.status, seven.arguments["amount"]) == ("waiting", 1750)
    assert rt.proposal(six.id).status == "superseded"
    assert figures(rt) == (0, 0)
    six_again = propose("vanilla", 6, VANILLA)
    assert (six_again.id, six_again.status) == (six.id, "superseded"), "it does not come back to life"
    assert figures(rt) == (0, 0)

    # 4. Recompiled with alone_up_to 2000: the retry of x 7 is granted automatically.
    rt.replace_table(shop_table(permitc, workdir, 2000, 2500))
    retry = propose("vanilla", 7, VANILLA)
    assert retry.id == seven.id, "a retry: the same proposal"
    assert retry.status == "granted"
    assert retry.grant is not None and retry.grant.basis == "automatic"
    assert retry.grant.approver is None, "no person was asked"
    assert figures(rt) == (1750, 0)
    # Strawberry x 4 = 1100 fits the allowance but not the ceiling (1750 + 1100 > 2500).
    straw = propose("strawberry", 4, STRAWBERRY)
    assert (straw.status, straw.arguments["amount"]) == ("waiting", 1100)
    assert refusal(rt.approve, straw.id, "Lucy", straw.fingerprint) == "budget"
    assert rt.proposal(straw.id).status == "waiting"
    assert figures(rt) == (1750, 0)

    # 5. Lucy revokes the strawberry proposal, twice (the second changes nothing).
    assert rt.revoke(straw.id, "Lucy", "one order at a time").status == "revoked"
    assert rt.revoke(straw.id, "Lucy", "one order at a time").status == "revoked"
    assert figures(rt) == (1750, 0)

    # 6. Recompiled with alone_up_to 0 and the ledger closed and reopened: the automatic grant no longer fits
    #    the current allowance, so executing is refused and the proposal stays granted.
    del rt
    rt = open_ledger(shop_table(permitc, workdir, 0, 2500))
    assert figures(rt) == (1750, 0), "the reservation survives the restart"
    assert refusal(rt.execute, seven.id, destination=url, run=run) == "basis"
    assert rt.proposal(seven.id).status == "granted"
    assert supplier.orders() == []
    assert figures(rt) == (1750, 0)

    # 7. Lucy approves x 7 herself; her grant expires before the execution; she approves again; it runs.
    mine = rt.approve(seven.id, "Lucy", seven.fingerprint)
    assert mine.grant is not None and mine.grant.basis == "operator"
    assert figures(rt) == (1750, 0)
    clock.advance(DAY + 1)
    assert refusal(rt.execute, seven.id, destination=url, run=run) == "grant_expired"
    assert rt.proposal(seven.id).status == "granted"
    assert supplier.orders() == []
    rt.approve(seven.id, "Lucy", seven.fingerprint)
    done = rt.execute(seven.id, destination=url, run=run)
    assert done.ran
    assert done.proposal.status == "done"
    orders = supplier.orders()
    assert len(orders) == 1
    assert (orders[0]["sku"], orders[0]["quantity"], orders[0]["amount"]) == ("vanilla", 7, 1750)

    def never(ctx: permits.RunContext) -> Any:
        raise AssertionError("a done proposal runs nothing")

    repeat = rt.execute(seven.id, destination=url, run=never)
    assert not repeat.ran
    assert repeat.proposal.receipt == done.proposal.receipt, "the stored receipt"
    assert len(supplier.orders()) == 1
    assert figures(rt) == (0, 1750)

    # 8. The same proposal toward another address of the same supplier: refused before anything else.
    elsewhere = url.replace("127.0.0.1", "localhost")
    assert refusal(rt.execute, seven.id, destination=elsewhere, run=run) == "destination"

    # 9. Only the one authorized send reached the supplier; strawberry never became a purchase.
    orders = supplier.orders()
    assert len(orders) == 1
    assert all(o["sku"] != "strawberry" for o in orders)
    assert rt.proposal(straw.id).status == "revoked"
    assert figures(rt) == (0, 1750)
    assert orders[0]["operation"] == f"{WORK}:{seven.id}" == done.proposal.operation


def test_a_non_conclusive_receipt_keeps_the_reservation_until_settled(permitc: Path, workdir: Path) -> None:
    url = "http://127.0.0.1:9/orders"
    rt = permits.Runtime(shop_table(permitc, workdir, 0, 2500), authority=permits.ADMIT_ALL, store=workdir / "l.db")
    p = rt.propose(
        "Restocker", "Reorder", "PlaceOrder", order("vanilla", 2, VANILLA), requester="Lucy",
        operation_key=WORK, why="the freezer runs low", destination=url,
    )  # fmt: skip
    rt.approve(p.id, "Lucy", p.fingerprint)
    # The host got an answer it cannot read as this operation's: not conclusive.
    run = rt.execute(p.id, destination=url, run=lambda ctx: {"ok": True})
    assert run.proposal.status == "unknown"
    assert figures(rt) == (500, 0)
    op = run.proposal.operation
    assert op == f"{WORK}:{p.id}"
    assert refusal(rt.settle, p.id, {"operation": op, "amount": 499, "outcome": "accepted"}) == "not_conclusive"
    assert figures(rt) == (500, 0)
    b = rt.settle(p.id, {"operation": op, "amount": 500, "outcome": "accepted"})
    assert (b.reserved, b.spent) == (0, 500)
    assert rt.proposal(p.id).status == "done"
