"""A host of the workshop against the approval service (`permitd`), with `permits.Client`: the Estimator
proposes a price for Mia's repair, waits for a person to decide (with their own key: a host key never
can), then runs the tool through the execution protocol. Run as the README's "From Python" says:

    python examples/python/client.py http://127.0.0.1:7878 host.key
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import permits


def admits(claimed: permits.Claimed) -> permits.client.Admission:
    """The workshop app's own permissions: only a manager (Noor) may set a price."""
    return None if claimed.runs_as == "Noor" else ("person", "only a manager may set a price")


def set_price(claimed: permits.Claimed) -> Any:
    """The tool, run in the host's app once the service admitted it: its return value is the receipt."""
    return {"price": claimed.arguments["price"], "set_as": claimed.runs_as}


def main(url: str, key_file: str) -> None:
    host = permits.Client(url, Path(key_file).read_text())
    p = host.call("Estimator", "EstimateRepair", "SetPrice", {"repair": "T-7", "price": 45}, requester="Mia",
                  operation_key="mia-1", claim_token="call-1", why="Pads, a cable and an hour of work.",
                  covered_version="r1", shown={"repair": "Ticket T-7"})
    assert isinstance(p, permits.Proposal)          # a permits.Claimed when the call is alone
    print(p.id, p.status, p.shown, p.answer_for_agent())
    p = host.wait(p.id, timeout=600)                # long-polls until a person decides
    print(p.id, p.status, p.grant.approver if p.grant else None)
    done = host.execute(p.id, "run-1", set_price, admits=admits, covered_version="r1")
    print(done.status, done.runs_as, done.receipt)


if __name__ == "__main__":
    main(*sys.argv[1:3])
