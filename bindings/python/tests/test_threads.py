"""One runtime shared by Python threads: the GIL is released while the runtime works and while it waits for
the store's lock, callbacks run on the calling thread, one grant runs once however many threads execute it,
and a callback that calls back into the runtime is refused instead of deadlocking."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, fixture

import permits

TEXT = "J-42 recorded an export access error."


def triage(store: str | Path = ":memory:", **callbacks: Any) -> permits.Runtime:
    callbacks.setdefault("versions", lambda q: "7")
    return permits.Runtime(
        fixture("support-triage"), authority=permits.ADMIT_ALL, clock=permits.ManualClock(NOW), store=store, **callbacks
    )


def p8(rt: permits.Runtime, key: str = "mock-T42-P8") -> permits.Proposal:
    return rt.propose(
        "Triage",
        "ExportFailures",
        "SendReply",
        {"ticket": "T-42", "recipient": "customer-42", "text": TEXT},
        requester="Sam",
        operation_key=key,
        why="tell the customer",
    )


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_eight_threads_executing_one_grant_run_it_once(store: str, tmp_path: Path) -> None:
    rt = triage(":memory:" if store == "memory" else tmp_path / "ledger.db")
    p = p8(rt)
    rt.approve(p.id, "Riley", p.fingerprint)
    runs: list[str] = []
    lock = threading.Lock()

    def send(ctx: permits.RunContext) -> Any:
        with lock:
            runs.append(threading.current_thread().name)
        time.sleep(0.05)  # the others arrive while this one is `sending`
        return {"sent": 1}

    start = threading.Barrier(8)
    results: list[object] = []

    def racer() -> None:
        start.wait()
        try:
            results.append(rt.execute(p.id, run=send))
        except permits.Refused as refused:
            results.append(refused)

    threads = [threading.Thread(target=racer, name=f"racer-{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a racer never returned"
    assert len(runs) == 1, runs
    executions = [r for r in results if isinstance(r, permits.Execution)]
    refusals = [r for r in results if isinstance(r, permits.Refused)]
    assert len(executions) + len(refusals) == 8
    assert sum(1 for e in executions if e.ran) == 1
    assert all(e.proposal.status == "done" for e in executions)
    # Those that came while it was sending were refused; those after got the stored receipt.
    assert all(r.kind == "status" and "`sending`" in str(r) for r in refusals), refusals
    assert rt.proposal(p.id).status == "done"


def test_the_gil_is_not_held_while_waiting_for_the_store() -> None:
    """Thread A's `versions` callback holds the store (it runs inside A's transaction) until released; thread B
    then calls the runtime and waits for the store. The main thread must keep running Python meanwhile: if B
    waited with the GIL, nothing could release A, and the test would hang (the joins time out instead)."""
    inside = threading.Event()
    release = threading.Event()

    def versions(q: permits.VersionQuery) -> str:
        inside.set()
        release.wait(timeout=30)
        return "7"

    rt = triage(versions=versions)
    done: dict[str, object] = {}
    a = threading.Thread(target=lambda: done.setdefault("a", p8(rt)))
    a.start()
    assert inside.wait(timeout=30)
    b = threading.Thread(target=lambda: done.setdefault("b", rt.proposals()))
    b.start()
    ticks = 0
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # Python code on the main thread, while B waits for the store
        ticks += 1
    assert "b" not in done, "B did not wait for the store"
    release.set()
    a.join(timeout=30)
    b.join(timeout=30)
    assert not a.is_alive() and not b.is_alive()
    assert ticks > 1000
    assert isinstance(done["a"], permits.Proposal)
    assert [p.id for p in done["b"]] == ["P-1"]  # type: ignore[attr-defined]


def test_threads_share_one_runtime_and_callbacks_run_on_the_calling_thread() -> None:
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def authority(who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool:
        with lock:
            seen.append((threading.current_thread().name, who.kind))
        return True

    rt = permits.Runtime(fixture("support-triage"), authority=authority, versions=lambda q: "7")
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            calls(i)
        except BaseException as e:  # noqa: BLE001 - the test asserts there are none
            errors.append(e)

    def calls(i: int) -> None:
        for n in range(25):
            ran = rt.call(
                "Triage",
                "ExportFailures",
                "GetExportContext",
                {"job_id": "J-42"},
                requester="Sam",
                operation_key=f"w{i}-{n}",
                why="read",
                run=lambda ctx: {"thread": threading.current_thread().name},
            )
            assert isinstance(ran, permits.Ran)
            assert ran.receipt == {"thread": threading.current_thread().name}

    threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    assert errors == []
    assert len(seen) == 8 * 25 * 2  # the agent's account and the person, per call
    assert {name for name, _ in seen} == {f"worker-{i}" for i in range(8)}


def test_a_callback_calling_back_into_the_runtime_is_refused_not_a_deadlock() -> None:
    holder: list[permits.Runtime] = []
    inner: list[permits.Refused] = []

    def versions(q: permits.VersionQuery) -> str:
        try:
            holder[0].proposals()
        except permits.Refused as refused:
            inner.append(refused)
            raise
        return "7"

    rt = triage(versions=versions)
    holder.append(rt)
    with pytest.raises(permits.Refused) as err:
        p8(rt)
    assert err.value.kind == "callback"
    assert str(err.value).startswith("the `versions` callback failed: ")
    assert isinstance(err.value.__cause__, permits.Refused)
    assert inner[0].kind == "reentry"
    assert str(inner[0]).startswith("the `versions` callback called back into the runtime")
    assert rt.proposals() == []  # nothing was stored, and the runtime still works


def test_an_audit_sink_calling_back_is_refused_and_counted() -> None:
    holder: list[permits.Runtime] = []

    def audit(event: permits.AuditEvent) -> None:
        holder[0].proposals()

    rt = triage(audit=audit)
    holder.append(rt)
    p = p8(rt)  # the operation stands: audit failures never undo it
    assert rt.proposal(p.id).status == "waiting"
    # The table's install, the task's binding and the proposal (reading a proposal records none).
    assert rt.audit_failures == 3
    assert "called back into the runtime" in (rt.last_audit_failure or "")


def test_the_tool_may_call_back_into_the_runtime() -> None:
    """The tool runs outside any transaction, so it may use the runtime (a tool that is itself an agent)."""
    rt = triage()
    p = p8(rt)
    rt.approve(p.id, "Riley", p.fingerprint)

    def send(ctx: permits.RunContext) -> Any:
        return {"status_while_sending": rt.proposal(p.id).status}

    e = rt.execute(p.id, run=send)
    assert e.proposal.receipt == {"status_while_sending": "sending"}
