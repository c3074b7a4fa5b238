"""Task leases (spec §5a "Leases", issue #22) from Python: `take_task`, `renew_task`, `release_task`, `lease`
and the `lease=` keyword, on the embedded `permits.Runtime` (a manual clock) and on `permits.Client` against
the real `permitd` (the system's clock: a one-second lease and a sleep past it). The hardening shop
(`holes.table.json`): orders of the Clerkbot routed to a buyer (Max), `StockLevel` alone. The values of
crates/permits-runtime/tests/runtime/leases.rs and crates/permits-service/tests/service/leases.rs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, fixture
from service_support import Service, approve

import permits

ORDER = {"sku": "vanilla", "quantity": 1, "amount": 900}
ACCEPTED = {"operation": "order-1:P-1", "amount": 900, "outcome": "accepted"}
FENCED = "this host no longer holds the task `order-1`: `host-b` holds it now (fence 2); `host-a` may not act under it"


def shop() -> tuple[permits.Runtime, permits.ManualClock]:
    clock = permits.ManualClock(NOW)
    return permits.Runtime(fixture("holes.table"), authority=permits.ADMIT_ALL, clock=clock), clock


def not_holder(e: pytest.ExceptionInfo[permits.Refused], message: str) -> None:
    assert (e.value.kind, e.value.message) == ("not_holder", message)


def test_a_fenced_host_can_neither_execute_nor_settle_and_the_tool_runs_once() -> None:
    rt, clock = shop()
    a = rt.take_task("order-1", "host-a", 30)
    assert (a.key, a.holder, a.fence, a.taken_at, a.expires_at) == ("order-1", "host-a", 1, NOW, NOW + 30)
    p = rt.propose("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-1",
                   why="the freezer runs low", lease=a)
    rt.approve(p.id, "Max", p.fingerprint)
    clock.advance(30)
    b = rt.take_task("order-1", "host-b", 30)
    assert (b.holder, b.fence) == ("host-b", 2)
    assert rt.lease("order-1") == b
    runs: list[str] = []

    def order(who: str) -> Any:
        def run(ctx: permits.RunContext) -> Any:
            runs.append(who)
            return permits.Unknown("the supplier did not answer")
        return run

    # A wakes up with a valid grant: its execution is refused, and nothing runs.
    with pytest.raises(permits.Refused) as late:
        rt.execute(p.id, run=order("a"), claim_token="tok-a", lease=a)
    not_holder(late, FENCED)
    with pytest.raises(permits.Refused) as bare:
        rt.execute(p.id, run=order("a"))
    assert bare.value.kind == "not_holder"
    assert bare.value.message.startswith("task `order-1` is held by `host-b` until 1767225660")
    # B executes it: the tool runs once; the outcome waits for a settlement.
    done = rt.execute(p.id, run=order("b"), claim_token="tok-b", lease=b)
    assert (done.ran, done.proposal.status) == (True, "unknown")
    assert runs == ["b"]
    # The settlement is the holder's.
    with pytest.raises(permits.Refused) as settle:
        rt.settle(p.id, ACCEPTED, lease=a)
    not_holder(settle, FENCED)
    with pytest.raises(permits.Refused) as unleased:
        rt.settle(p.id, ACCEPTED)
    assert unleased.value.kind == "not_holder"
    assert (rt.budget("Supplies").reserved, rt.budget("Supplies").spent) == (900, 0)
    assert rt.settle(p.id, ACCEPTED, lease=b).spent == 900
    # A can no longer renew or release; B renews (the fence kept) and releases.
    with pytest.raises(permits.Refused) as renew:
        rt.renew_task(a, 30)
    not_holder(renew, FENCED)
    renewed = rt.renew_task(b, 60)
    assert (renewed.fence, renewed.expires_at) == (2, NOW + 90)
    released = rt.release_task(renewed)
    assert released.expires_at == NOW + 30
    assert rt.release_task(renewed) == released
    # Released: a call without a lease is made again.
    stock = rt.run_alone("Clerkbot", "Reorder", "StockLevel", {"sku": "vanilla"}, requester="Sam",
                         operation_key="order-1", run=lambda ctx: 12)
    assert stock.outcome == "done"


def test_call_and_run_alone_present_the_lease() -> None:
    rt, clock = shop()
    a = rt.take_task("order-1", "host-a", 30)
    stock = {"sku": "vanilla"}
    with pytest.raises(permits.Refused) as other:
        rt.call("Clerkbot", "Reorder", "StockLevel", stock, requester="Sam", operation_key="order-1", why="left?",
                run=lambda ctx: 0)
    assert other.value.kind == "not_holder"
    assert other.value.message.startswith("task `order-1` is held by `host-a` until 1767225630")
    ran = rt.call("Clerkbot", "Reorder", "StockLevel", stock, requester="Sam", operation_key="order-1", why="left?",
                  run=lambda ctx: 12, lease=a)
    assert isinstance(ran, permits.Ran) and ran.outcome == "done"
    alone = rt.run_alone("Clerkbot", "Reorder", "StockLevel", stock, requester="Sam", operation_key="order-1",
                         run=lambda ctx: 11, lease=a)
    assert alone.outcome == "done"
    proposed = rt.call("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-1",
                       why="low", run=lambda ctx: "never runs", lease=a)
    assert isinstance(proposed, permits.Proposal) and proposed.status == "waiting"
    # A lease the host made from what it kept (the runtime compares key, holder and fence only).
    kept = permits.Lease("order-1", "host-a", 1)
    assert (kept.taken_at, kept.expires_at, kept == a) == (0, 0, False)
    assert rt.run_alone("Clerkbot", "Reorder", "StockLevel", stock, requester="Sam", operation_key="order-1",
                        run=lambda ctx: 10, lease=kept).outcome == "done"
    forged = permits.Lease("order-1", "host-z", 7)
    with pytest.raises(permits.Refused) as wrong:
        rt.propose("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-1", why="x",
                   lease=forged)
    not_holder(wrong, "this host no longer holds the task `order-1`: `host-a` holds it now (fence 1); `host-z` may not act under it")
    assert a.to_dict() == {"key": "order-1", "holder": "host-a", "fence": 1, "taken_at": NOW, "expires_at": NOW + 30}
    assert repr(a) == 'Lease("order-1", holder "host-a", fence 1, until 1767225630)'
    clock.advance(31)
    with pytest.raises(permits.Refused) as expired:
        rt.propose("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-2", why="x",
                   lease=permits.Lease("order-2", "host-a", 1))
    assert expired.value.message == "this host no longer holds the task `order-2`: the store has no lease on it; `host-a` may not act under it"


def test_bad_lease_input_raises_and_stores_nothing() -> None:
    rt, _ = shop()
    for key, holder, seconds, kind, message in [
        ("order-1", "host-a", 0, "invalid_request", "a lease is taken for 1 to 86400 seconds, not 0"),
        ("order-1", "host-a", 86401, "too_large", "a lease is taken for 1 to 86400 seconds, not 86401: renew it to hold it longer"),
        ("order-1", "", 30, "invalid_request", "a lease needs an operation key and a holder: neither may be empty"),
    ]:
        with pytest.raises(permits.Refused) as e:
            rt.take_task(key, holder, seconds)
        assert (e.value.kind, e.value.message) == (kind, message)
    for bad in (-1, True, 1.5, "30"):
        with pytest.raises(permits.InputError):
            rt.take_task("order-1", "host-a", bad)  # type: ignore[arg-type]
    with pytest.raises(permits.InputError, match="lease is a permits.Lease"):
        rt.propose("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-1", why="x",
                   lease={"holder": "host-a", "fence": 1})  # type: ignore[arg-type]
    with pytest.raises(permits.InputError, match="fence is an int"):
        permits.Lease("order-1", "host-a", -1)
    with pytest.raises(permits.InputError):
        rt.renew_task("order-1", 30)  # type: ignore[arg-type]
    assert rt.lease("order-1") is None
    assert rt.proposals() == []


# ---------------------------------------------------------------------------------------------------------
# permits.Client against the real permitd


@pytest.fixture
def holes(permitd: Path, workdir: Path) -> Iterator[Service]:
    service = Service.on_fixture(permitd, "holes.table", workdir)
    yield service
    service.stop()


def test_the_client_takes_renews_and_releases_and_a_fenced_host_cannot_execute(holes: Service) -> None:
    a = permits.Client(holes.url, holes.key("--agents", "Clerkbot"))
    b = permits.Client(holes.url, holes.key("--agents", "Clerkbot"))
    max_key = holes.key("--person", "Max")
    lease_a = a.take_task("order-1", "host-a", 1)
    assert (lease_a.key, lease_a.holder, lease_a.fence, lease_a.expires_at - lease_a.taken_at) == ("order-1", "host-a", 1, 1)
    with pytest.raises(permits.Refused) as held:
        b.take_task("order-1", "host-b", 30)
    assert held.value.kind == "not_holder"
    p = a.call("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-1",
               claim_token="call-a", why="the freezer runs low", lease=lease_a)
    assert isinstance(p, permits.Proposal) and p.status == "waiting"
    approve(holes.url, max_key, p.id, p.fingerprint)
    assert a.claim(p.id, "tok-a", lease=lease_a).status == "granted"
    # A stalls past its lease; B takes the task over.
    time.sleep(1.2)
    lease_b = b.take_task("order-1", "host-b", 60)
    assert (lease_b.holder, lease_b.fence) == ("host-b", 2)
    assert a.lease("order-1") == lease_b
    assert a.lease("order-9") is None
    runs: list[str] = []

    def order(who: str) -> Any:
        def run(claimed: permits.Claimed) -> Any:
            runs.append(who)
            return ACCEPTED
        return run

    with pytest.raises(permits.Refused) as confirm:
        a.confirm(p.id, "tok-a", lease=lease_a)
    not_holder(confirm, FENCED)
    with pytest.raises(permits.Refused) as execute:
        a.execute(p.id, "tok-a", order("a"), lease=lease_a)
    not_holder(execute, FENCED)
    with pytest.raises(permits.Refused) as renew:
        a.renew_task(lease_a, 30)
    not_holder(renew, FENCED)
    done = b.execute(p.id, "tok-b", order("b"), lease=lease_b)
    assert (done.status, done.receipt) == ("done", ACCEPTED)
    assert runs == ["b"], "the tool ran once, for the host that held the task"
    with pytest.raises(permits.Refused) as settle:
        a.settle(p.id, ACCEPTED, lease=lease_a)
    not_holder(settle, FENCED)
    assert (a.budget("Supplies").reserved, a.budget("Supplies").spent) == (0, 900)
    renewed = b.renew_task(lease_b, 120)
    assert (renewed.fence, renewed.expires_at >= lease_b.expires_at) == (2, True)
    released = b.release_task(renewed)
    assert released.expires_at < renewed.expires_at
    assert b.release_task(renewed) == released
    stock = a.call("Clerkbot", "Reorder", "StockLevel", {"sku": "vanilla"}, requester="Sam", operation_key="order-1",
                   claim_token="stock-1")
    assert isinstance(stock, permits.Claimed) and stock.id == "A-1"


def test_the_client_refuses_bad_leases_before_sending_and_the_service_refuses_other_agents(holes: Service) -> None:
    host = permits.Client(holes.url, holes.key("--agents", "Clerkbot"))
    other = permits.Client(holes.url, holes.key("--agents", "Shelfbot"))
    host.call("Clerkbot", "Reorder", "PlaceOrder", ORDER, requester="Sam", operation_key="order-1", claim_token="c")
    with pytest.raises(permits.Refused) as refused:
        other.take_task("order-1", "host-z", 30)
    assert refused.value.kind == "not_your_agent"
    # 0 seconds is an input the runtime does not take: 400 `invalid_request`, the client's InputError.
    with pytest.raises(permits.InputError, match=r"\(invalid_request\): a lease is taken for 1 to 86400 seconds, not 0$"):
        host.take_task("order-1", "host-a", 0)
    with pytest.raises(permits.InputError):
        host.take_task("order-1", "host-a", -5)
    with pytest.raises(permits.InputError, match="lease is a permits.Lease"):
        host.confirm("P-1", "t", lease=("host-a", 1))  # type: ignore[arg-type]
    with pytest.raises(permits.InputError, match="lease is a permits.Lease"):
        host.release_task("order-1")  # type: ignore[arg-type]
    assert host.lease("order-1") is None
    # An unbound key: any host key takes it.
    assert other.take_task("order-9", "shelf-1", 30).fence == 1
