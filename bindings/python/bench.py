"""How fast the runtime answers from Python: `rt.level(...)` (the LevelIndex fast path), a whole alone
`rt.call(...)` on the memory store and on an SQLite ledger, and `cedarpy.is_authorized(...)` on the same
decision translated to Cedar (as benches/compare does in Rust).

    python bench.py [--table PATH] [--seconds S]

Bounded: each measurement takes at most `--seconds` (default 2) and at most 200,000 calls. Figures are per
call, from samples of 1,000 calls (500 for the SQLite ledger), p50 and p99 over the samples; they include
the Python loop (about 20 ns a call). `pip install cedarpy` for the Cedar line (the bench venv only, never
CI); without it that line is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import permits

HERE = Path(__file__).resolve().parent
WORKSHOP = HERE.parent.parent / "crates" / "permits-runtime" / "tests" / "fixtures" / "workshop.json"
LEVELS = ("alone", "propose", "propose_every_time")


def measure(name: str, f: Callable[[], Any], seconds: float, batch: int = 1000, most: int = 200_000) -> dict[str, Any]:
    """Runs `f` in batches until `seconds` or `most` calls; per-call p50 and p99 over the batches."""
    for _ in range(min(batch, 100)):  # warm up
        f()
    samples: list[float] = []
    calls = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline and calls < most:
        start = time.perf_counter_ns()
        for _ in range(batch):
            f()
        samples.append((time.perf_counter_ns() - start) / batch)
        calls += batch
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"{name:<58} p50 {p50:9.0f} ns   p99 {p99:9.0f} ns   ({calls} calls)")
    return {"name": name, "p50_ns": p50, "p99_ns": p99, "calls": calls}


def cedar_model(table: permits.Table) -> tuple[str, list[dict[str, Any]]]:
    """The table's unconditional levels in Cedar: principal `Seat::"agent/skill"`, resource `Tool::"T"`, one
    action per level, each tool holding the seats that get each level (benches/compare/src/lib.rs)."""
    policies = "".join(
        f'permit(principal, action == Action::"{level}", resource) when {{ resource.{level}.contains(principal) }};\n'
        for level in LEVELS
    )
    data = json.loads(table.to_json())
    entities = []
    for tool in data["tools"]:
        attrs: dict[str, list[dict[str, Any]]] = {level: [] for level in LEVELS}
        for agent, skills in data["entries"].items():
            for skill, entries in skills.items():
                entry = entries.get(tool)
                if entry and entry.get("level") in LEVELS and not entry.get("reserved"):
                    attrs[entry["level"]].append({"__entity": {"type": "Seat", "id": f"{agent}/{skill}"}})
        entities.append({"uid": {"type": "Tool", "id": tool}, "attrs": attrs, "parents": []})
    return policies, entities


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", default=str(WORKSHOP), help="a compiled table (default: the workshop's)")
    parser.add_argument("--seconds", type=float, default=2.0, help="at most this long per measurement")
    args = parser.parse_args()
    seconds = args.seconds
    table = permits.Table.load(args.table)
    print(f"load average {os.getloadavg()[0]:.2f}; table {args.table}")

    agent, skill, tool = "Estimator", "EstimateRepair", "NoteRepair"
    note = {"repair": "T-7", "note": "Pads and a cable."}
    rt = permits.Runtime(table, authority=permits.ADMIT_ALL)
    assert rt.level(agent, skill, tool, note, requester="Mia") == "alone"
    measure("rt.level (2 arguments, requester)", lambda: rt.level(agent, skill, tool, note, requester="Mia"), seconds)
    measure("rt.level (no arguments: never, a missing argument)", lambda: rt.level(agent, skill, tool), seconds)
    measure("table.level (the same, on the Table)", lambda: table.level(agent, skill, tool, note, requester="Mia"), seconds)

    def ok(ctx: permits.RunContext) -> str:
        return "noted"

    def call(r: permits.Runtime) -> Callable[[], Any]:
        return lambda: r.call(agent, skill, tool, note, requester="Mia", operation_key="k", why="note", run=ok)

    assert isinstance(call(rt)(), permits.Ran)
    measure("rt.call alone, memory store, ADMIT_ALL", call(rt), seconds)

    def authority(who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool:
        return True

    py = permits.Runtime(table, authority=authority)
    measure("rt.call alone, memory store, a Python authority", call(py), seconds)
    with tempfile.TemporaryDirectory() as folder:
        ledger = permits.Runtime(table, authority=permits.ADMIT_ALL, store=Path(folder) / "ledger.db")
        measure("rt.call alone, SQLite (WAL, synchronous=NORMAL)", call(ledger), seconds, batch=500)
        decide = lambda: ledger.decide(agent, skill, tool, note, requester="Mia")  # noqa: E731
        measure("rt.decide, SQLite (one transaction)", decide, seconds, batch=500)

    try:
        import cedarpy  # type: ignore[import-not-found]
    except ImportError:
        print("cedarpy is not installed: `pip install cedarpy` for the Cedar line")
        return
    policies, entities = cedar_model(table)
    request = {"principal": f'Seat::"{agent}/{skill}"', "action": 'Action::"alone"', "resource": f'Tool::"{tool}"', "context": {}}
    parsed_policies = cedarpy.PolicySet.from_str(policies)
    parsed_entities = cedarpy.Entities.from_json_str(json.dumps(entities))
    assert cedarpy.is_authorized(request, parsed_policies, parsed_entities).allowed
    measure("cedarpy.is_authorized (parsed PolicySet and Entities)", lambda: cedarpy.is_authorized(request, parsed_policies, parsed_entities), seconds)
    text = json.dumps(entities)
    measure("cedarpy.is_authorized (policies and entities as text)", lambda: cedarpy.is_authorized(request, policies, text), seconds, batch=200)


if __name__ == "__main__":
    main()
