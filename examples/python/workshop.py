"""A complete small agent host that embeds the permits runtime from Python: the bicycle workshop of
shared/cases/workshop.md, steps 2-4, with a scripted model instead of a network call (examples/embed.rs in
Python).

Run it with a compiled table:

    cargo run --release -- compile policies/workshop -o workshop.json
    python examples/python/workshop.py workshop.json
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import permits


@dataclass
class Repair:
    ticket: str = "T-7"
    fault: str = "rear brake does not bite"
    note: str = ""
    price: int = 0
    revision: int = 1


class Workshop:
    """The workshop's own app: one repair, and who may do what in it."""

    def __init__(self) -> None:
        self.repair = Repair()

    def run(self, ctx: permits.RunContext) -> Any:
        """Runs a tool in the app. The runtime calls this only once the call is admitted."""
        if ctx.tool == "PartsFor":
            return ["brake pads", "brake cable"]
        if ctx.tool == "NoteRepair":
            self.repair.note = ctx.arguments["note"]
            return "noted"
        if ctx.tool == "SetPrice":
            self.repair.price = ctx.arguments["price"]
            return {"ticket": self.repair.ticket, "price": self.repair.price, "set_as": ctx.runs_as}
        return permits.Failed(f"the app has no `{ctx.tool}`")

    def authority(self, who: permits.Principal, tool: str, arguments: dict[str, Any]) -> bool | str:
        """Mechanics and managers may read and update repairs; only a manager or the Helper account may set a
        price."""
        manager_or_helper = who in (permits.Principal.person("Noor"), permits.Principal.agent("Estimator"))
        if tool == "SetPrice" and not manager_or_helper:
            return "only a manager may set a price"
        return True

    def versions(self, q: permits.VersionQuery) -> str | None:
        if q.entity == "Repair" and q.id == self.repair.ticket and q.field == "revision":
            return f"r{self.repair.revision}"
        return None

    def naming(self, tool: str, param: permits.Param, value: Any) -> str:
        if param.entity == "Repair" and isinstance(value, str):
            return f"Ticket {value}"
        return value if isinstance(value, str) else str(value)


def scripted_model(fault: str) -> list[tuple[str, dict[str, Any], str]]:
    """The scripted model: for a request to estimate, it looks parts up, notes them, and sets a price."""
    return [
        ("PartsFor", {"fault": fault}, "find the parts"),
        ("NoteRepair", {"repair": "T-7", "note": "Pads and a cable."}, "note what is needed"),
        ("SetPrice", {"repair": "T-7", "price": 45}, "Pads, a cable and an hour of work."),
    ]


def handle_request(rt: permits.Runtime, app: Workshop, person: str, operation_key: str) -> permits.Proposal | None:
    """One request of a person to the agent: the model's tool calls go through the runtime one by one. Returns
    the proposal the request ended in, if any."""
    print(f"\n{person} asks the estimator for an estimate of T-7 (work item `{operation_key}`)")
    offered = [t.name for t in rt.offered_tools("Estimator", "EstimateRepair")]
    print(f"  tools offered to the model: {', '.join(offered)}")
    evidence: list[permits.Evidence] = []
    for tool, arguments, why in scripted_model(app.repair.fault):
        try:
            handled = rt.call(
                "Estimator", "EstimateRepair", tool, arguments,
                requester=person, operation_key=operation_key, why=why, evidence=evidence, run=app.run,
            )  # fmt: skip
        except permits.Refused as refused:
            print(f"  {tool}: refused: {refused}")
            continue
        if isinstance(handled, permits.Ran):
            print(f"  {tool}: ran alone for {handled.runs_as} → {handled.outcome} {handled.receipt!r}")
            if handled.outcome == "done":
                evidence.append(permits.Evidence(tool, arguments, handled.receipt))
            continue
        p = handled
        print(f"  {tool}: proposed as {p.id} ({p.status}), {p.answer_for_agent()}")
        print(f"    the approval screen shows: {p.label}")
        for name, shown in p.shown:
            print(f"      {name} = {shown}")
        print(f"      why: {p.why}")
        print(f"      evidence: {len(p.evidence)} earlier call(s); covered version {p.covered_version!r}")
        return p
    return None


def main(table_path: str) -> int:
    app = Workshop()
    audit: list[permits.AuditEvent] = []
    rt = permits.Runtime(
        permits.Table.load(table_path),
        authority=app.authority,
        versions=app.versions,
        naming=app.naming,
        audit=audit.append,
    )

    # Step 2: Mia asks for an estimate; the note is written alone, the price is proposed to her.
    first = handle_request(rt, app, "Mia", "request-1")
    if first is None:
        print("no proposal", file=sys.stderr)
        return 1
    print(f"  the price is still {app.repair.price}")

    # Step 3: Mia approves and runs it now; the call runs as the agent on her behalf, and she may not set a
    # price.
    print(f"\nMia approves {first.id}")
    try:
        done = rt.approve_and_run(first.id, "Mia", first.fingerprint, run=app.run)
        print(f"  {done.proposal.id} is {done.proposal.status}")
    except permits.Refused as refused:
        print(f"  refused: {refused}")
    print(f"  {first.id} is now {rt.proposal(first.id).status}; the price is {app.repair.price}")

    # Step 4: a new request by Mia; Noor (a manager, who decides any proposal) approves it.
    second = handle_request(rt, app, "Mia", "request-2")
    if second is None:
        print("no proposal", file=sys.stderr)
        return 1
    print(f"\nNoor approves {second.id}")
    done = rt.approve_and_run(second.id, "Noor", second.fingerprint, run=app.run)
    p = done.proposal
    approver = p.grant.approver if p.grant else None
    print(f"  {p.id} is {p.status}: {approver} approved {p.tool} and it ran as {p.ran_as}; the price is {app.repair.price}")
    if p.status != "done":
        print(f"{p.id} ended `{p.status}`", file=sys.stderr)
        return 1

    print(f"\naudit ({len(audit)} events):")
    for e in audit:
        print(f"  {e.kind} {e.who or '-'} {e.agent}/{e.skill}/{e.tool} {e.proposal or '-'} {e.outcome}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python examples/python/workshop.py TABLE.json   (from `permitc compile policies/workshop`)")
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
