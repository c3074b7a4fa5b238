"""`permits.Runtime(store="postgres://…")` (issue #22): runtimes on one PostgreSQL database share one
ledger — a proposal made through one is approved, executed and settled through another, a grant runs once —
over a plain connection or TLS (`sslmode=require`), and a URL that cannot work is a clear error. The race
between processes on PostgreSQL is in test_race.py."""

from __future__ import annotations

import os

import pytest
from conftest import NOW, fixture

import permits


def runtime(store: str) -> permits.Runtime:
    return permits.Runtime(fixture("holes.table"), authority=permits.ADMIT_ALL, store=store,
                           clock=permits.ManualClock(NOW))  # fmt: skip


def order(rt: permits.Runtime, key: str) -> permits.Proposal:
    p = rt.propose("Clerkbot", "Reorder", "PlaceOrder", {"sku": "vanilla", "quantity": 1, "amount": 900},
                   requester="Sam", operation_key=key, why="the freezer runs low")  # fmt: skip
    assert isinstance(p, permits.Proposal)
    return p


def test_two_runtimes_on_one_database_share_the_ledger_and_a_grant_runs_once(postgres_url: str) -> None:
    a, b = runtime(postgres_url), runtime(postgres_url)
    p = order(a, "order-1")
    assert (p.id, p.status) == ("P-1", "waiting")
    assert b.proposal("P-1").status == "waiting"
    granted = b.approve(p.id, "Max", p.fingerprint)
    assert (granted.status, granted.grant.approver if granted.grant else None) == ("granted", "Max")
    assert (a.budget("Supplies").reserved, a.budget("Supplies").spent) == (900, 0)
    runs: list[str] = []

    def run(ctx: permits.RunContext) -> dict[str, object]:
        runs.append(ctx.runs_as)
        return {"operation": ctx.operation, "amount": 900, "outcome": "accepted"}

    done = a.execute(p.id, run=run)
    assert done.proposal.status == "done"
    # Through the other runtime, the same grant never runs again: the stored receipt comes back.
    again = b.execute(p.id, run=run)
    assert (again.ran, again.proposal.status) == (False, "done")
    assert runs == ["Max"]
    assert (b.budget("Supplies").reserved, b.budget("Supplies").spent) == (0, 900)
    assert b.proposal(p.id).receipt == {"operation": "order-1:P-1", "amount": 900, "outcome": "accepted"}


def test_a_runtime_over_tls_and_urls_that_cannot_work(postgres_url: str) -> None:
    ca = os.environ.get("PERMITS_TEST_POSTGRES_CA")
    if not ca:
        pytest.fail("PERMITS_TEST_POSTGRES_CA (the test server's certificate) is not set: `.ci/postgres start` sets it")
    rt = runtime(f"{postgres_url}?sslmode=require&sslrootcert={ca}")
    assert order(rt, "order-tls").status == "waiting"
    with pytest.raises(permits.StoreError) as no_root:
        runtime(f"{postgres_url}?sslmode=require")
    assert "`sslmode=require` needs `sslrootcert=PATH`" in str(no_root.value)
    with pytest.raises(permits.StoreError) as unreachable:
        runtime("postgres://permits@127.0.0.1:1/nothing")
    assert "cannot connect to PostgreSQL" in str(unreachable.value)


def test_the_key_value_connection_string_is_the_same_database_and_never_a_file(
    postgres_url: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from urllib.parse import unquote, urlsplit

    url = urlsplit(postgres_url)
    words = [f"host={url.hostname}", f"port={url.port}", f"user={unquote(url.username or '')}"]
    if url.password:
        words.append(f"password={unquote(url.password)}")
    words.append(f"dbname={url.path.lstrip('/')}")
    monkeypatch.chdir(tmp_path)
    assert order(runtime(" ".join(words)), "order-kv").id == "P-1"
    # The proposal is in the database the URL names, and no file was made for the string.
    assert runtime(postgres_url).proposal("P-1").status == "waiting"
    assert os.listdir(tmp_path) == []
